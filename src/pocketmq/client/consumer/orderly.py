"""Orderly consumption (RocketMQ's `ConsumeMessageOrderlyService`): each queue's messages reach
the listener one call at a time, in queue order, by one consumer of the group.

Clustering consumers hold the broker's lock of every queue they consume (LOCK_BATCH_MQ):
a queue is taken only once locked, locks are renewed every `lock_renew_interval_s`, and a lock
not renewed for `LOCK_VALID_MS` is treated as lost (consumption of that queue pauses until it is
locked again), well inside the broker's 60 s expiry. A queue that moves away is released in
this order: wait for its running listener call, commit its offset, then unlock; the next owner
therefore starts exactly after the last message this consumer finished.

A failed call (exception or RECONSUME_LATER) suspends the queue for `suspend_s` and retries the
same messages, so nothing behind them overtakes them; after `max_reconsume_times` failures a
message goes to the dead-letter queue (send-back with delay level -1) and the queue moves on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from pocketmq.client.consumer import queue_locks
from pocketmq.client.consumer.consumption import ConsumingConsumer
from pocketmq.client.consumer.listener import ConsumeResult
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)

LOCK_VALID_MS: Final = 30_000
"""How long a lock counts as held after the broker granted it (the broker's expiry is 60 s)."""
LOCK_RETRY_S: Final = 1.0
"""How soon queues that could not be locked are tried again."""
RELEASE_WAIT_S: Final = 10.0


@dataclass(slots=True)
class _OrderlyQueue:
    process_queue: ProcessQueue
    waiting: deque[MessageExt] = field(default_factory=deque)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    locked_at: float = 0.0
    failures: dict[int, int] = field(default_factory=dict)  # queue offset -> failed calls
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    """Set by `release`: finish the running call, record its outcome, take nothing more."""


class OrderlyConsumption:
    """Per-queue consume loops and broker locks of one orderly push consumer."""

    def __init__(
        self,
        consumer: ConsumingConsumer,
        *,
        locking: bool,
        suspend_s: float,
        lock_renew_interval_s: float,
    ) -> None:
        self._consumer = consumer
        self._clock = consumer.instance.clock
        self._locking = locking
        self._suspend_s = suspend_s
        self._lock_renew_interval_s = lock_renew_interval_s
        self._queues: dict[MessageQueue, _OrderlyQueue] = {}
        self._lock_wanted: set[MessageQueue] = set()
        self._keeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._locking:
            self._keeper = asyncio.get_running_loop().create_task(
                self._keep_locks(), name=f"locks-{self._consumer.group}"
            )

    # -- assignment ------------------------------------------------------------------------

    async def take(self, queues: list[MessageQueue]) -> list[MessageQueue]:
        """Locks newly assigned queues; returns those this consumer may now consume."""
        if not self._locking:
            return queues
        locked = await self._lock(queues)
        missing = [q for q in queues if q not in locked]
        self._lock_wanted.update(missing)
        self._lock_wanted.difference_update(locked)
        if missing:
            log.info(
                "group %s: %d queues are locked by another consumer; retrying in %g s",
                self._consumer.group,
                len(missing),
                LOCK_RETRY_S,
            )
        return [q for q in queues if q in locked]

    def begin(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        """Starts the consume loop of a queue just taken."""
        state = _OrderlyQueue(process_queue, locked_at=self._clock.monotonic())
        self._queues[queue] = state
        state.task = asyncio.get_running_loop().create_task(
            self._consume_loop(queue, state), name=f"orderly-{queue}"
        )

    async def release(self, queue: MessageQueue) -> None:
        """Stops consuming `queue` after its running call; the caller commits, then unlocks."""
        self._lock_wanted.discard(queue)
        state = self._queues.pop(queue, None)
        if state is None or state.task is None:
            return
        state.stopping = True
        state.ready.set()
        try:
            await asyncio.wait_for(asyncio.shield(state.task), RELEASE_WAIT_S)
        except TimeoutError:
            log.warning(
                "listener on %s still running after %g s: cancelling", queue, RELEASE_WAIT_S
            )
            await cancel_and_wait(state.task)

    def forget_wanted(self, keep: Iterable[MessageQueue]) -> None:
        """Stops trying to lock queues that are no longer assigned."""
        self._lock_wanted.intersection_update(keep)

    async def unlock(self, queues: list[MessageQueue]) -> None:
        """Releases broker locks (after the offsets were committed)."""
        if not self._locking or not queues:
            return
        await queue_locks.unlock(self._consumer.instance, self._consumer.group, queues)

    async def stop(self) -> None:
        """Stops every loop (after its running call) and the lock keeper."""
        if self._keeper is not None:
            await cancel_and_wait(self._keeper)
            self._keeper = None
        for queue in list(self._queues):
            await self.release(queue)

    # -- delivery --------------------------------------------------------------------------

    def deliver(self, queue: MessageQueue, messages: list[MessageExt]) -> None:
        """Queues pulled messages for the queue's consume loop."""
        state = self._queues.get(queue)
        if state is None:
            return
        state.waiting.extend(messages)
        state.ready.set()

    async def _consume_loop(self, queue: MessageQueue, state: _OrderlyQueue) -> None:
        consumer = self._consumer
        process_queue = state.process_queue
        while not state.stopping and not process_queue.dropped:
            if not state.waiting:
                state.ready.clear()
                await state.ready.wait()
                continue
            if self._locking and (self._clock.monotonic() - state.locked_at) * 1000 > LOCK_VALID_MS:
                await asyncio.sleep(0.1)  # the keeper renews or the rebalance drops the queue
                continue
            batch = [
                state.waiting[i]
                for i in range(min(consumer.consume_batch_max_size, len(state.waiting)))
            ]
            async with consumer.consume_slots:
                result = await consumer.listener_calls.call(batch)
            if result is ConsumeResult.SUCCESS or await self._give_up_on(batch, state):
                for _ in batch:
                    state.waiting.popleft()
                for message in batch:
                    state.failures.pop(message.queue_offset, None)
                consumer.finished(queue, process_queue, batch)
            elif not state.stopping:
                await asyncio.sleep(self._suspend_s)

    async def _give_up_on(self, batch: list[MessageExt], state: _OrderlyQueue) -> bool:
        """Counts a failure; True once every message was moved to the dead-letter queue."""
        limit = self._consumer.max_reconsume_times
        exhausted = []
        for message in batch:
            count = state.failures.get(message.queue_offset, 0) + 1
            state.failures[message.queue_offset] = count
            if count > limit:
                exhausted.append(message)
        if len(exhausted) < len(batch):
            return False
        for message in exhausted:
            if not await self._consumer.send_back(message, delay_level=-1):
                return False
            log.warning(
                "message %s failed %d times in orderly group %s: moved to the dead-letter queue",
                message.msg_id,
                limit + 1,
                self._consumer.group,
            )
        return True

    # -- locks -----------------------------------------------------------------------------

    async def _lock(self, queues: Iterable[MessageQueue]) -> set[MessageQueue]:
        return await queue_locks.lock(self._consumer.instance, self._consumer.group, queues)

    async def _keep_locks(self) -> None:
        last_renew = self._clock.monotonic()
        while True:
            await asyncio.sleep(LOCK_RETRY_S if self._lock_wanted else 0.5)
            if self._lock_wanted:
                self._consumer.instance.request_rebalance()
            if self._clock.monotonic() - last_renew < self._lock_renew_interval_s:
                continue
            last_renew = self._clock.monotonic()
            held = list(self._queues)
            locked = await self._lock(held)
            now = self._clock.monotonic()
            for queue in held:
                state = self._queues.get(queue)
                if state is not None and queue in locked:
                    state.locked_at = now
                elif state is not None:
                    log.warning("lost the lock of %s: pausing it until locked again", queue)
