"""What a lite pull consumer has pulled and `poll` has not returned yet.

Pull tasks put each pull's messages in as one batch (`put`, bounded: a full buffer makes the
pull tasks wait); `poll` takes messages out in the order their batches came, at most
`batch_max` at a time. A batch larger than a poll is split: its rest goes first next time, so
a queue's messages come out in queue order. Batches of a paused queue are set aside until it
is resumed; batches pulled for a queue state that was dropped since (a seek, a rebalance)
are skipped, never returned.

`PollFeed` is one queue's side of its pull loop: it puts what the pulls bring in here, and
holds the pulls while the queue is paused or holds `pull_threshold` messages.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from pocketmq.client.consumer.pull_loop import FLOW_CONTROL_DELAY_S
from pocketmq.client.consumer.pull_request import PullResult
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.subscription import SubscriptionData

BUFFERED_BATCHES_MAX: Final = 256
"""Pulled batches the consumer buffers before its pull tasks wait for `poll`."""
PAUSED_CHECK_INTERVAL_S: Final = 0.1
"""How often the pull task of a paused queue looks whether it was resumed."""


class QueueState:
    """One queue's pull position and consumed offset, for one position of the queue.

    `seek` and removal replace or drop the state; batches pulled for a dropped state are
    never returned.
    """

    __slots__ = ("buffered_count", "consumed_offset", "dropped", "next_offset", "queue")

    def __init__(self, queue: MessageQueue, offset: int) -> None:
        self.queue = queue
        self.next_offset = offset
        """Where the next pull starts."""
        self.consumed_offset = offset
        """The offset after the last message `poll` returned: what `commit` writes."""
        self.buffered_count = 0
        """Messages pulled and not yet returned by `poll` (flow control)."""
        self.dropped = False


@dataclass(frozen=True, slots=True)
class Batch:
    """Messages of one pull, in queue order; `next_offset` is where the pull left off."""

    state: QueueState
    messages: list[MessageExt]
    next_offset: int


class PollBuffer:
    """Pulled batches waiting for `poll`, and the queues paused meanwhile."""

    def __init__(self, batch_max: int) -> None:
        self._batch_max = batch_max
        self.paused: set[MessageQueue] = set()
        # None wakes a waiting `take` (resume, close); batches of dropped states are skipped.
        self._queue: asyncio.Queue[Batch | None] = asyncio.Queue(BUFFERED_BATCHES_MAX)
        self._leftovers: deque[Batch] = deque()
        """Batches taken from the queue but not returned yet: the rest of a batch larger
        than a poll, and batches of paused queues."""

    async def put(self, batch: Batch) -> None:
        batch.state.buffered_count += len(batch.messages)
        await self._queue.put(batch)

    def clear(self) -> None:
        self._leftovers.clear()

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self.paused.update(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self.paused.difference_update(queues)
        self.wake()  # buffered messages of these queues may be waiting

    def wake(self) -> None:
        """Makes a waiting `take` look again."""
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)

    async def take(self, timeout_s: float, is_open: Callable[[], bool]) -> list[MessageExt]:
        """Up to `batch_max` messages; waits up to `timeout_s` for the first one only."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout_s, 0.0)
        messages: list[MessageExt] = []
        while len(messages) < self._batch_max and is_open():
            batch = self._next_leftover()
            if batch is None:
                if messages or not self._queue.empty():
                    try:
                        item = self._queue.get_nowait()
                    except asyncio.QueueEmpty:
                        break
                else:
                    remaining = deadline - loop.time()
                    if remaining <= 0:
                        break
                    try:
                        async with asyncio.timeout(remaining):
                            item = await self._queue.get()
                    except TimeoutError:
                        break
                if item is None or item.state.dropped:
                    continue
                if item.state.queue in self.paused:
                    self._leftovers.append(item)
                    continue
                batch = item
            self._take(batch, messages)
        return messages

    def _next_leftover(self) -> Batch | None:
        """Removes and returns the first leftover batch of a queue that is not paused."""
        for index, batch in enumerate(self._leftovers):
            if batch.state.dropped or batch.state.queue in self.paused:
                continue
            del self._leftovers[index]
            return batch
        if self._leftovers:
            # Only paused and dropped batches are left: drop the dropped ones for good.
            self._leftovers = deque(b for b in self._leftovers if not b.state.dropped)
        return None

    def _take(self, batch: Batch, messages: list[MessageExt]) -> None:
        room = self._batch_max - len(messages)
        taken, rest = batch.messages[:room], batch.messages[room:]
        messages.extend(taken)
        state = batch.state
        state.buffered_count -= len(taken)
        if rest:
            # The rest goes first next time: no other batch of this queue is left over
            # ahead of it, so queue order holds.
            self._leftovers.appendleft(Batch(state, rest, batch.next_offset))
            state.consumed_offset = taken[-1].queue_offset + 1
        else:
            # The pull's next offset also skips messages the tag filter dropped.
            state.consumed_offset = max(taken[-1].queue_offset + 1, batch.next_offset)


class PollFeed:
    """One queue's pulls as the lite pull consumer takes them (a `pull_loop.PullFeed`)."""

    def __init__(
        self,
        state: QueueState,
        buffer: PollBuffer,
        subscription: Callable[[], SubscriptionData],
        *,
        pull_threshold: int,
    ) -> None:
        self.queue = state.queue
        self._state = state
        self._buffer = buffer
        # Looked up at every pull: a changed expression applies at once.
        self.subscription = subscription
        self._pull_threshold = pull_threshold

    @property
    def dropped(self) -> bool:
        return self._state.dropped

    @property
    def next_offset(self) -> int:
        return self._state.next_offset

    def hold_s(self) -> float:
        if self.queue in self._buffer.paused:
            return PAUSED_CHECK_INTERVAL_S
        if self._state.buffered_count >= self._pull_threshold:
            return FLOW_CONTROL_DELAY_S
        return 0.0

    def commit_offset(self) -> int:
        # No commit offset rides on the pull: a lite pull consumer commits only when it (or
        # its application) decides to.
        return 0

    async def found(self, result: PullResult) -> None:
        state = self._state
        state.next_offset = max(state.next_offset, result.next_begin_offset)
        if result.messages:
            await self._buffer.put(Batch(state, result.messages, result.next_begin_offset))
        elif state.buffered_count == 0:
            # Everything up to here was filtered out: nothing of it is left to return.
            state.consumed_offset = max(state.consumed_offset, result.next_begin_offset)

    async def offset_moved(self, result: PullResult) -> None:
        state = self._state
        state.next_offset = result.next_begin_offset
        if state.buffered_count == 0:
            state.consumed_offset = result.next_begin_offset
