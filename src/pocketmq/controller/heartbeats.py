"""Which brokers are alive, as this controller replica hears them (RocketMQ's
`DefaultBrokerHeartbeatManager`).

Not replicated: brokers send BROKER_HEARTBEAT (904) to every controller, so whichever replica
leads next already knows who is alive. A broker is alive while its last heartbeat is younger
than the timeout it asked for; a broker whose connection to this controller closed (a killed
process resets it) is dead at once, so that its group fails over without waiting the timeout.
A controller that never heard of a broker judges nothing about it: a restarted controller must
not depose masters it has not heard from yet.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.remoting.transport import Channel


@dataclass(slots=True)
class LiveBroker:
    """The latest heartbeat of one broker."""

    cluster: str
    group: str
    broker_id: int
    address: str
    last_ms: int
    timeout_ms: int
    epoch: int = 0
    max_offset: int = 0
    confirm_offset: int = 0
    priority: int = 0
    channel: Channel | None = None
    closed: bool = False
    ha_state: str = ""
    """pocketmq's: a master's replication state (`pocketmq.common.ha_qos.HaState`)."""

    def alive(self, now_ms: int) -> bool:
        return not self.closed and now_ms - self.last_ms <= self.timeout_ms


class LiveBrokers:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self.table: dict[tuple[str, int], LiveBroker] = {}
        self.on_dead: list[Callable[[LiveBroker], None]] = []

    def heartbeat(self, broker: LiveBroker) -> None:
        self.table[(broker.group, broker.broker_id)] = broker

    def get(self, group: str, broker_id: int) -> LiveBroker | None:
        found = self.table.get((group, broker_id))
        return found if found is not None and found.alive(self._now_ms()) else None

    def alive(self, group: str, broker_id: int) -> bool:
        return self.get(group, broker_id) is not None

    def known(self, group: str, broker_id: int) -> bool:
        return (group, broker_id) in self.table

    def channel_closed(self, channel: Channel) -> None:
        for broker in self.table.values():
            if broker.channel is channel and not broker.closed:
                broker.closed = True
                for listener in self.on_dead:
                    listener(broker)

    def expired(self) -> list[LiveBroker]:
        """Brokers heard from before whose heartbeats stopped (they stay listed as dead)."""
        now = self._now_ms()
        return [b for b in self.table.values() if not b.alive(now)]

    def forget(self, group: str, ids: list[int] | None) -> None:
        for key in [k for k in self.table if k[0] == group and (ids is None or k[1] in ids)]:
            del self.table[key]
