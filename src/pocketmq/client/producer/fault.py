"""Which queue a send goes to: round robin that steers around brokers that failed or were slow
(RocketMQ's `MQFaultStrategy` with `LatencyFaultToleranceImpl`).

Each send reports its broker's latency; a latency at or above a step of `LATENCY_STEPS_MS` keeps
that broker out of the rotation for the matching `UNAVAILABLE_MS`, and a failure counts as the
worst step. When every broker is out, the least recently failed one is tried anyway: a producer
never refuses to send just because all brokers had a bad moment.

Pure: the caller passes `now_ms`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pocketmq.client.message import MessageQueue

LATENCY_STEPS_MS: Final = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
UNAVAILABLE_MS: Final = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
"""How long a broker is avoided after a send that took at least the matching latency step."""
FAILURE_LATENCY_MS: Final = 30_000
"""The latency a failed send counts as: the broker is avoided for the longest time."""


_STEPS_LONGEST_FIRST: Final = tuple(
    zip(reversed(LATENCY_STEPS_MS), reversed(UNAVAILABLE_MS), strict=True)
)
_FIRST_PENALISED_MS: Final = min(step for step, duration in _STEPS_LONGEST_FIRST if duration)
"""Below this latency no step penalises: every send reports, and almost all are this fast."""


def unavailable_ms(latency_ms: float) -> int:
    """How long to avoid a broker whose send took `latency_ms`."""
    if latency_ms < _FIRST_PENALISED_MS:
        return 0
    for step, duration in _STEPS_LONGEST_FIRST:
        if latency_ms >= step:
            return duration
    return 0


class QueueChooser:
    """Round-robin queue choice per topic, avoiding brokers in their penalty time."""

    def __init__(self, start_index: int = 0) -> None:
        self._index = start_index
        self._unavailable_until_ms: dict[str, int] = {}

    def report(self, broker_name: str, latency_ms: float, now_ms: int, *, failed: bool) -> None:
        """Records how a send to `broker_name` went."""
        duration = unavailable_ms(FAILURE_LATENCY_MS if failed else latency_ms)
        if duration:
            self._unavailable_until_ms[broker_name] = now_ms + duration
        else:
            self._unavailable_until_ms.pop(broker_name, None)

    def is_available(self, broker_name: str, now_ms: int) -> bool:
        return self._unavailable_until_ms.get(broker_name, 0) <= now_ms

    def choose(
        self, queues: Sequence[MessageQueue], now_ms: int, avoid_broker: str | None = None
    ) -> MessageQueue:
        """The next queue to send to.

        Args:
            queues: The topic's writable queues (not empty).
            now_ms: The current time.
            avoid_broker: The broker the previous attempt of this send failed on.
        """
        assert queues, "choose needs at least one queue"
        count = len(queues)
        for _ in range(count):
            self._index = (self._index + 1) % count
            queue = queues[self._index]
            if queue.broker_name != avoid_broker and self.is_available(queue.broker_name, now_ms):
                return queue
        # Everything is penalised or avoided: prefer another broker, then the one whose
        # penalty ends first.
        others = [q for q in queues if q.broker_name != avoid_broker] or list(queues)
        best = min(others, key=lambda q: self._unavailable_until_ms.get(q.broker_name, 0))
        candidates = [q for q in others if q.broker_name == best.broker_name]
        self._index = (self._index + 1) % count
        return candidates[self._index % len(candidates)]
