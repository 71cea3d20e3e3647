"""One queue of a push consumer as its pull loop fills it (a `pull_loop.PullFeed`): pulled
messages go into the queue's `ProcessQueue`, then to the consume service; the queue's offset
follows what the pulls found, and is piggybacked on each pull for clustering groups.

Flow control: a process queue holding `count_max` messages or `bytes_max` body bytes is not
pulled until its listener catches up.
"""

from __future__ import annotations

from collections.abc import Callable

from pocketmq.client.consumer.offset_store import OffsetStore
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_loop import FLOW_CONTROL_DELAY_S
from pocketmq.client.consumer.pull_request import PullResult, PullStatus
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.subscription import SubscriptionData

Deliver = Callable[[MessageQueue, ProcessQueue, list[MessageExt]], None]
"""Hands one pull's messages to the consume service (concurrent or orderly)."""


class ProcessQueueFeed:
    """The pull loop's view of one process queue."""

    def __init__(
        self,
        queue: MessageQueue,
        process_queue: ProcessQueue,
        subscription: SubscriptionData,
        offsets: OffsetStore,
        deliver: Deliver,
        *,
        count_max: int,
        bytes_max: int,
        commit_with_pull: bool,
    ) -> None:
        self.queue = queue
        self._process_queue = process_queue
        # Read once when the queue starts: a changed expression reaches queues started later.
        self._subscription = subscription
        self._offsets = offsets
        self._deliver = deliver
        self._count_max = count_max
        self._bytes_max = bytes_max
        self._commit_with_pull = commit_with_pull

    @property
    def dropped(self) -> bool:
        return self._process_queue.dropped

    @property
    def next_offset(self) -> int:
        return self._process_queue.next_offset

    def hold_s(self) -> float:
        held = self._process_queue
        if held.held_count >= self._count_max or held.held_bytes >= self._bytes_max:
            return FLOW_CONTROL_DELAY_S
        return 0.0

    def subscription(self) -> SubscriptionData:
        return self._subscription

    def commit_offset(self) -> int:
        return self._offsets.current(self.queue) if self._commit_with_pull else 0

    async def found(self, result: PullResult) -> None:
        process_queue = self._process_queue
        if result.status is PullStatus.FOUND:
            process_queue.add(result.messages, result.next_begin_offset)
            if not result.messages:
                self._offsets.update(self.queue, process_queue.commit_offset())
            self._deliver(self.queue, process_queue, result.messages)
        else:
            process_queue.next_offset = result.next_begin_offset
            if process_queue.held_count == 0:
                self._offsets.update(self.queue, process_queue.commit_offset())

    async def offset_moved(self, result: PullResult) -> None:
        self._process_queue.reset(result.next_begin_offset)
        self._offsets.update(self.queue, result.next_begin_offset, increase_only=False)
        await self._offsets.persist([self.queue])
