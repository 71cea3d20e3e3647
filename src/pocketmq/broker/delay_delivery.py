"""Delivering delayed messages when their time comes: one asyncio task on the broker's loop.

The task reads each level's queue of SCHEDULE_TOPIC_XXXX from that level's offset. Entries carry
their delivery time as tag code (the dispatcher puts it there), so a level is read from the
queue alone until its first entry that is not due. A due entry's message is read from the
CommitLog, stored again into its real topic and queue (`schedule.restore_due`), and the level's
offset moves past it. The task then sleeps until the earliest due time it saw, at most
`POLL_INTERVAL_S`, so new delayed messages are noticed within that.

Offsets (`delayOffset.json`) are saved within `PERSIST_INTERVAL_S` of a change and at stop. A
crash can still lose the last moves; so after a start, each level first checks its due entries
against the index: an entry whose copy (same UNIQ_KEY, reconsume count, born time and body) is
already in the real queue, stored after it, is skipped instead of delivered twice. Messages
without a UNIQ_KEY, or on a store without an index, may then arrive twice (at least once).

Due messages are stored through the put path, like any message. Failures stay local: a message
whose CommitLog record is gone, has no real topic, or that the store can never take (illegal,
properties too large) is skipped with a warning; a level whose put fails for a reason that may
pass waits `RETRY_DELAY_S` and tries the same entry again, while other levels go on.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.broker.put_path import PutPath
from pocketmq.broker.schedule import (
    SCHEDULE_TOPIC,
    DelayLevels,
    DelayOffsets,
    UndeliverableError,
    correct_deliver_timestamp,
    restore_due,
)
from pocketmq.common.constants import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from pocketmq.common.stored_message import StoredMessage
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import Delivery, MessageToStore
from pocketmq.store.message_store import MessageStore, StoreNotRunningError

log = logging.getLogger(__name__)

POLL_INTERVAL_S: Final = 0.1
"""Longest sleep between two looks at the queues (RocketMQ's `DELAY_FOR_A_WHILE`)."""
PERSIST_INTERVAL_S: Final = 1.0
RETRY_DELAY_S: Final = 1.0
"""Wait of a level after a failed put, and of the task after an unexpected error."""
BATCH_PER_LEVEL: Final = 64
"""Entries one level delivers before the others get their turn."""
_DUPLICATE_CANDIDATES: Final = 8


@dataclass(frozen=True, slots=True)
class DeliveryRound:
    """What one pass over the levels did.

    Attributes:
        delivered: Messages stored into their real topics.
        next_due_ms: The earliest due time of an entry not yet due, if one was seen.
        more: A level stopped at its batch limit with due entries left.
    """

    delivered: int
    next_due_ms: int | None
    more: bool


class DelayDelivery:
    """Delivers due delayed messages; `load`, then `start` on the loop, `stop` at shutdown."""

    def __init__(
        self,
        store: MessageStore,
        put_path: PutPath,
        levels: DelayLevels,
        clock: Clock,
        *,
        batch_per_level: int = BATCH_PER_LEVEL,
    ) -> None:
        """Args:
        store: A loaded store: the schedule queues and the CommitLog are read here.
        put_path: Where due messages are stored.
        levels: `messageDelayLevel`, parsed.
        clock: Wall time to compare with delivery times.
        batch_per_level: Entries one level delivers per pass.
        """
        self._store = store
        self._put_path = put_path
        self.levels = levels
        self._clock = clock
        self._batch = batch_per_level
        self.offsets = DelayOffsets()
        # Levels whose due entries are still checked for a delivery the saved offsets missed.
        self._resuming: set[int] = set(range(1, levels.max_level + 1))
        self._retry_at_ms: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._persist_lock = asyncio.Lock()
        self._persisted_at = clock.monotonic()

    # -- life cycle ------------------------------------------------------------------------
    def load(self, document: Any) -> None:
        """Takes the saved offsets (`delayOffset.json`, or None) and brings each into its
        queue's bounds."""
        self.offsets.load(document)
        for level in range(1, self.levels.max_level + 1):
            queue = self._store.consume_queues.find(SCHEDULE_TOPIC, level - 1)
            low, high = (queue.min_offset, queue.max_offset) if queue else (0, 0)
            old = self.offsets.correct(level, low, high)
            if old is not None:
                log.warning(
                    "delay level %d: saved offset %d is outside its queue [%d, %d]; "
                    "going on from %d",
                    level,
                    old,
                    low,
                    high,
                    self.offsets.get(level),
                )

    def start(self) -> None:
        """Starts the delivery task on the running loop."""
        assert self._task is None, "started twice"
        # Every start resumes: a new DLedger leader checks for deliveries its offsets missed.
        self._resuming = set(range(1, self.levels.max_level + 1))
        self._task = asyncio.get_running_loop().create_task(self._run(), name="delay-delivery")

    async def stop(self) -> None:
        """Stops the task (a put under way finishes first) and saves the offsets."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self.persist()

    async def persist(self) -> None:
        """Saves `delayOffset.json` if an offset moved since the last save."""
        async with self._persist_lock:
            if not self.offsets.changed:
                return
            self.offsets.changed = False
            document = self.offsets.snapshot()
            self._persisted_at = self._clock.monotonic()
            try:
                await asyncio.to_thread(self._store.metadata.delay_offsets.save, document)
            except OSError:
                self.offsets.changed = True
                log.exception("saving delayOffset.json failed; trying again later")

    def backlog(self) -> int:
        """Delayed messages not yet delivered, over every level."""
        return sum(
            max(0, self._store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1) - offset)
            for level, offset in self.offsets.offsets.items()
        )

    def runtime_stats(self) -> dict[str, str]:
        """`scheduleMessageOffset_<level>` = `offset,maxOffset`, as RocketMQ's runtime info."""
        stats = {}
        for level, offset in sorted(self.offsets.offsets.items()):
            high = self._store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)
            stats[f"scheduleMessageOffset_{level}"] = f"{offset},{high}"
        return stats

    # -- the task --------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                outcome = await self.deliver_due()
            except StoreNotRunningError:
                log.info("the store stopped; delayed message delivery ends")
                return
            except Exception:  # a task boundary: log, wait, go on
                log.exception("delivering delayed messages failed; retrying")
                await asyncio.sleep(RETRY_DELAY_S)
                continue
            if self._clock.monotonic() - self._persisted_at >= PERSIST_INTERVAL_S:
                await self.persist()
            if outcome.more:
                await asyncio.sleep(0)  # let requests in between batches
                continue
            wait_s = POLL_INTERVAL_S
            if outcome.next_due_ms is not None:
                until_due_s = (outcome.next_due_ms - self._clock.now_ms()) / 1000
                wait_s = min(wait_s, max(until_due_s, 0.0))
            await asyncio.sleep(wait_s)

    async def deliver_due(self) -> DeliveryRound:
        """One pass: every level delivers its due entries, up to its batch.

        Raises:
            StoreNotRunningError: the store was shut down.
        """
        delivered = 0
        next_due: int | None = None
        more = False
        for level in range(1, self.levels.max_level + 1):
            count, due, level_more = await self._deliver_level(level)
            delivered += count
            more = more or level_more
            if due is not None:
                next_due = due if next_due is None else min(next_due, due)
        return DeliveryRound(delivered, next_due, more)

    async def _deliver_level(self, level: int) -> tuple[int, int | None, bool]:
        """Delivers one level's due entries; returns (delivered, next due time, more due)."""
        now_ms = self._clock.now_ms()
        if self._retry_at_ms.get(level, 0) > now_ms:
            return 0, self._retry_at_ms[level], False
        queue = self._store.consume_queues.find(SCHEDULE_TOPIC, level - 1)
        if queue is None:
            self._resuming.discard(level)
            return 0, None, False
        if self.offsets.correct(level, queue.min_offset, queue.max_offset) is not None:
            log.warning("delay level %d: entries were removed; going on from the first left", level)
        offset = self.offsets.get(level)
        delay_ms = self.levels.delay_ms(level)
        # The head alone first: an idle poll of a long level reads one entry, not a batch.
        head = list(queue.entries(offset, min(1, queue.max_offset - offset)))
        if not head:
            self._resuming.discard(level)
            return 0, None, False
        head_due_ms = correct_deliver_timestamp(now_ms, head[0][3], delay_ms)
        if head_due_ms > now_ms:
            self._resuming.discard(level)
            return 0, head_due_ms, False
        # Copied out before any await: retention may unmap the queue file meanwhile.
        entries = list(queue.entries(offset, min(self._batch, queue.max_offset - offset)))
        delivered = 0
        for queue_offset, physical_offset, _size, tags_code in entries:
            due_ms = correct_deliver_timestamp(now_ms, tags_code, delay_ms)
            if due_ms > now_ms:
                self._resuming.discard(level)
                return delivered, due_ms, False
            stored = self._store.look_message_by_offset(physical_offset)
            if stored is None:
                log.warning(
                    "delay level %d: no message at commit log offset %d (queue offset %d); skipped",
                    level,
                    physical_offset,
                    queue_offset,
                )
                self.offsets.set(level, queue_offset + 1)
                continue
            try:
                message = restore_due(stored)
            except UndeliverableError as exc:
                log.warning(
                    "delay level %d: skipping queue offset %d: %s", level, queue_offset, exc
                )
                self.offsets.set(level, queue_offset + 1)
                continue
            if level in self._resuming:
                if self._delivered_before(stored, message):
                    log.info(
                        "delay level %d: queue offset %d was delivered before the restart; "
                        "not delivering it again",
                        level,
                        queue_offset,
                    )
                    self.offsets.set(level, queue_offset + 1)
                    continue
                self._resuming.discard(level)
            delivery, why = await self._put_path.deliver(message)
            if delivery is Delivery.SKIPPED:
                log.warning(
                    "delay level %d: the due message of queue offset %d cannot be stored into "
                    "%s (%s); skipped",
                    level,
                    queue_offset,
                    message.topic,
                    why,
                )
                self.offsets.set(level, queue_offset + 1)
                continue
            if delivery is Delivery.RETRY:
                log.warning(
                    "delay level %d: storing the due message of queue offset %d into %s failed "
                    "(%s); trying again in %.0f s",
                    level,
                    queue_offset,
                    message.topic,
                    why,
                    RETRY_DELAY_S,
                )
                self._retry_at_ms[level] = now_ms + int(RETRY_DELAY_S * 1000)
                return delivered, self._retry_at_ms[level], False
            self.offsets.set(level, queue_offset + 1)
            delivered += 1
        return delivered, None, entries[-1][0] + 1 < queue.max_offset

    def _delivered_before(self, stored: StoredMessage, message: MessageToStore) -> bool:
        """Whether the real queue already holds this schedule record's copy (a delivery whose
        offset move was lost in a crash)."""
        uniq_key = stored.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq_key:
            return False
        candidates = self._store.query_message(
            message.topic, uniq_key, _DUPLICATE_CANDIDATES, begin_ms=stored.store_timestamp
        )
        return any(
            found.queue_id == message.queue_id
            and found.reconsume_times == stored.reconsume_times
            and found.born_timestamp == stored.born_timestamp
            and found.body == stored.body
            for found in candidates
        )
