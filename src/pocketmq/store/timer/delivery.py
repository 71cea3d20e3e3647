"""Delivery of due timer messages: the wheel's slots, oldest first, into their real topics.

Once the clock passes a slot's end, the slot's chain (`recovery.collect_chain`) is walked in log
order: delete markers, the messages they name (recall) and duplicates are skipped, each other
message is read from the CommitLog and stored into its real topic and queue (or, for a rolled
entry, into the timer topic again for its next round). Progress is the slot (`read_time_ms`)
and how many of its entries are done (`slot_done`); the owner saves both in its checkpoint
after every entry, through `save_progress`.

A slot of time T is delivered only when the clock has reached T + precision, so no message goes
out before its time. Delivery is at least once: a crash between storing a due message and saving
the checkpoint delivers it again after the restart. A recall that arrives after its slot began
delivering is too late and is dropped, as in RocketMQ.

Not here: enqueuing, the checkpoint's file, the task and its sleeps (`timer_store.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from pocketmq.common.constants import PROPERTY_TIMER_DEL_UNIQKEY
from pocketmq.common.stored_message import StoredMessage
from pocketmq.common.topic_names import TIMER_TOPIC
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import Deliver, Delivery, MessageToStore
from pocketmq.store.message_store import MessageStore
from pocketmq.store.timer.log import TimerEntry, TimerLog
from pocketmq.store.timer.messages import (
    UndeliverableTimerError,
    entry_key,
    restore_due,
    restore_rolled,
)
from pocketmq.store.timer.recovery import SlotChain, collect_chain
from pocketmq.store.timer.wheel import TimerWheel

log = logging.getLogger(__name__)

DELIVER_BATCH: Final = 256
"""Due messages one delivery step stores before the loop serves others."""
EMPTY_SLOTS_PER_STEP: Final = 4096
"""Empty slots one step skips (after a long stop the wheel may be days behind)."""
RETRY_DELAY_S: Final = 1.0
"""Wait after a put that failed for a reason that may pass (disk, flush, slave)."""
INLINE_CHAIN_MAX: Final = 512
"""Slots with at most this many entries are walked on the loop; bigger ones on a thread."""


class TimerDelivery:
    """Walks due slots and stores their messages; one step at a time (`deliver_due`)."""

    def __init__(
        self,
        store: MessageStore,
        deliver: Deliver,
        timer_log: TimerLog,
        clock: Clock,
        precision_ms: int,
        *,
        wheel: Callable[[], TimerWheel],
        save_progress: Callable[[], None],
        on_done: Callable[[TimerEntry], None],
    ) -> None:
        """Args:
        store: Where timer records and delete markers are read.
        deliver: Stores a due message (the broker's put path).
        timer_log: The timer log the wheel's chains point into.
        clock: Wall time to compare with slot times.
        precision_ms: The width of one slot.
        wheel: The wheel (opened by the owner's `load`).
        save_progress: Saves `read_time_ms` and `slot_done` in the owner's checkpoint.
        on_done: Called once per timer entry that is finished with (stored or skipped).
        """
        self._store = store
        self._deliver = deliver
        self._log = timer_log
        self._clock = clock
        self.precision_ms = precision_ms
        self._wheel = wheel
        self._save_progress = save_progress
        self._on_done = on_done
        self.read_time_ms = 0
        """The first slot not delivered yet."""
        self.slot_done = 0
        """Entries of that slot's chain already handled."""
        self.chain: SlotChain | None = None
        """The chain of the slot being delivered, None between slots."""
        self.chain_queue_offset = -1
        self.retry_at_ms = 0
        self.more = False
        """The last step stopped at its budget: more is due now."""

    async def deliver_due(self) -> int:
        """One step: delivers due slots, up to `DELIVER_BATCH` messages.

        Returns:
            Messages stored into their real topics (or rolled into the timer topic again).

        Raises:
            StoreNotRunningError: the store was shut down.
        """
        self.more = False
        now_ms = self._clock.now_ms()
        if now_ms < self.retry_at_ms:
            return 0
        delivered = 0
        budget = DELIVER_BATCH
        empty_skipped = 0
        while self.read_time_ms + self.precision_ms <= now_ms:
            chain = self.chain
            if chain is None:
                slot = self._wheel().get(self.read_time_ms)
                if slot.empty:
                    self.next_slot()
                    empty_skipped += 1
                    if empty_skipped >= EMPTY_SLOTS_PER_STEP:
                        self.more = True
                        break
                    continue
                if abs(slot.count) <= INLINE_CHAIN_MAX:
                    chain = collect_chain(self._log, slot)
                else:
                    chain = await asyncio.to_thread(collect_chain, self._log, slot)
                self.chain = chain
                self.chain_queue_offset = self._queue_offset_before(chain, self.slot_done)
            positions = chain.positions
            while self.slot_done < len(positions):
                if budget == 0:
                    self.more = True
                    self._save_progress()
                    return delivered
                outcome = await self._deliver_entry(positions[self.slot_done], chain, now_ms)
                if outcome is None:
                    self.retry_at_ms = now_ms + int(RETRY_DELAY_S * 1000)
                    self._save_progress()
                    return delivered
                delivered += outcome
                budget -= 1
                self.slot_done += 1
                self._save_progress()
            self.next_slot()
        self._save_progress()
        return delivered

    def next_slot(self) -> None:
        self.read_time_ms += self.precision_ms
        self.slot_done = 0
        self.chain = None
        self.chain_queue_offset = -1

    def _queue_offset_before(self, chain: SlotChain, done: int) -> int:
        """The highest queue offset among the first `done` entries (resuming a slot)."""
        highest = -1
        for position in chain.positions[:done]:
            entry = self._log.read(position)
            if entry is not None:
                highest = max(highest, entry.queue_offset)
        return highest

    async def _deliver_entry(self, position: int, chain: SlotChain, now_ms: int) -> int | None:
        """Handles one chain entry: 1 when a message was stored, 0 when skipped, None when the
        store refused for now (the same entry is tried again later)."""
        entry = self._log.read(position)
        if entry is None:
            log.warning("timer log entry at %d is unreadable; skipped", position)
            return 0
        if entry.queue_offset <= self.chain_queue_offset:
            log.warning(
                "timer log entry at %d repeats queue offset %d; skipped",
                position,
                entry.queue_offset,
            )
            return 0
        self.chain_queue_offset = entry.queue_offset
        if entry.is_delete and not entry.is_roll:
            return 0  # a marker: it acts through `chain.deletes`
        stored = self._store.look_message_by_offset(entry.commit_offset)
        if stored is None or stored.topic != TIMER_TOPIC:
            log.warning(
                "timer message at commit log offset %d is gone (retention?); skipped",
                entry.commit_offset,
            )
            self._on_done(entry)
            return 0
        where = f"timer log position {position}"
        if entry.is_roll:
            stored_ok = await self._store_message(restore_rolled(stored, now_ms), where)
        elif self._recalled(stored, entry, chain):
            log.debug("timer message at %d was recalled; not delivered", entry.commit_offset)
            self._on_done(entry)
            return 0
        else:
            stored_ok = await self.store_due(stored, where, now_ms)
        if not stored_ok:
            return None
        self._on_done(entry)
        return 1

    def _recalled(self, stored: StoredMessage, entry: TimerEntry, chain: SlotChain) -> bool:
        markers = chain.deletes.get(entry.key_hash)
        if not markers:
            return False
        key = entry_key(stored)
        for commit_offset in markers:
            marker = self._store.look_message_by_offset(commit_offset)
            if marker is not None and marker.properties.get(PROPERTY_TIMER_DEL_UNIQKEY) == key:
                return True
        return False

    async def store_due(self, stored: StoredMessage, where: str, now_ms: int) -> bool:
        try:
            message = restore_due(stored, now_ms)
        except UndeliverableTimerError as exc:
            log.warning("timer message (%s) skipped: %s", where, exc)
            return True
        return await self._store_message(message, where)

    async def _store_message(self, message: MessageToStore, where: str) -> bool:
        """Stores a due message; False when it should be tried again later."""
        delivery, why = await self._deliver(message)
        if delivery is Delivery.STORED:
            return True
        if delivery is Delivery.SKIPPED:
            log.warning(
                "due timer message for %s (%s) cannot be stored (%s); skipped",
                message.topic,
                where,
                why,
            )
            return True
        log.warning(
            "storing the due timer message for %s (%s) failed (%s); trying again in %.0f s",
            message.topic,
            where,
            why,
            RETRY_DELAY_S,
        )
        return False
