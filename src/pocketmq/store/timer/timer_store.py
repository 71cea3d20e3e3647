"""The timer message store: timer messages with any delivery time, held on disk until due
(RocketMQ's `TimerMessageStore`).

The send path stores a timer message in `rmq_sys_wheel_timer` queue 0 (`messages.py`). This
store follows that queue and does three things, all in one asyncio task of the broker:

1. enqueue: reads new entries of the timer queue from its checkpointed offset, appends one
   timer log entry per message (`log.py`) and links it into the wheel slot of its time
   (`wheel.py`). A message whose slot is already delivered is delivered at once; one beyond the
   wheel's reach is linked into the farthest slot with a roll flag and goes round again there.
2. deliver: once the clock passes a slot's end, stores the slot's messages into their real
   topics and queues (`delivery.py`). The checkpoint (`checkpoint.py`) records the slot and how
   many of its entries are done after each one.
3. recover: after an unclean stop (or when the wheel's geometry changed) the log is cut at its
   last valid entry and the wheel is rebuilt from it (`recovery.rebuild_wheel`), so no slot
   points at a missing entry; enqueuing resumes after the last queue offset in the log.

A slot of time T holds the messages whose TIMER_OUT_MS rounds down to T; the send path rounds a
delivery time D down so that D <= T + precision. A slot is delivered only when the clock has
reached T + precision, so no message is delivered before its time.

Memory: the wheel and the log are mapped files; the only per-timer state in Python objects is
the array of one due slot's log positions while it is delivered. Blocking work (walking a big
chain, flushes, scanning a log file before deleting it, recovery) runs on threads; work on the
event loop goes in bounded steps (`ENQUEUE_BATCH` messages, `DELIVER_BATCH` deliveries,
`EMPTY_SLOTS_PER_STEP` empty slots) with a yield in between.

Delivery is at least once (see `delivery.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from pocketmq.common.stored_message import MessageDecodeError, decode_record
from pocketmq.common.topic_names import TIMER_TOPIC
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import Deliver
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.message_store import MessageStore, StoreNotRunningError
from pocketmq.store.timer.checkpoint import TimerCheckpoint, TimerProgress
from pocketmq.store.timer.delivery import RETRY_DELAY_S, TimerDelivery
from pocketmq.store.timer.log import (
    FLAG_DELETE,
    FLAG_IMMEDIATE,
    FLAG_ROLL,
    TimerEntry,
    TimerLog,
)
from pocketmq.store.timer.messages import (
    TIMER_QUEUE_ID,
    UndeliverableTimerError,
    entry_key,
    is_delete_marker,
    key_hash,
    timer_out_ms,
)
from pocketmq.store.timer.recovery import rebuild_wheel
from pocketmq.store.timer.wheel import TimerWheel, WheelGeometryError

log = logging.getLogger(__name__)

ENQUEUE_BATCH: Final = 512
"""Timer queue entries one enqueue step reads (about 15 ms of event loop time)."""
POLL_INTERVAL_S: Final = 0.1
"""Longest sleep: new timer queue entries also wake the task at once."""
HOUSEKEEPING_INTERVAL_S: Final = 10.0
"""How often fully delivered timer log files are looked for and deleted."""
BLANK_SLOTS: Final = 60
"""Slots beyond twice the longest delay, so a lagging delivery still leaves room."""
SLOT_COUNT_MAX: Final = 2 * 7 * 24 * 3600
"""RocketMQ's wheel size (two weeks of 1 s slots, a 38.7 MB file); longer delays, or finer
precision, make messages roll round the wheel instead of growing the file."""


def wheel_slot_count(precision_ms: int, max_delay_sec: int) -> int:
    """Slots of a wheel for `timerMaxDelaySec`: twice the longest delay plus `BLANK_SLOTS`,
    like RocketMQ's wheel of twice its roll window, so times within the limit never roll;
    at most `SLOT_COUNT_MAX`."""
    assert precision_ms > 0, "timerPrecisionMs must be positive"
    assert max_delay_sec >= 0, "timerMaxDelaySec must not be negative"
    return min(2 * -(-max_delay_sec * 1000 // precision_ms) + BLANK_SLOTS, SLOT_COUNT_MAX)


@dataclass(frozen=True, slots=True)
class TimerLoadResult:
    """How `TimerMessageStore.load` found the files.

    Attributes:
        clean: The last stop was clean and the wheel was reused as it was.
        rebuilt_entries: Log entries scanned to rebuild the wheel (0 when reused).
        relinked: Log entries whose chain pointer or slot was rewritten by the rebuild.
        pending: Timers waiting in the wheel.
        enqueue_offset: Where enqueuing resumes in the timer queue.
        read_time_ms: The first slot not delivered yet.
    """

    clean: bool
    rebuilt_entries: int
    relinked: int
    pending: int
    enqueue_offset: int
    read_time_ms: int


@dataclass(frozen=True, slots=True)
class TimerHandover:
    """How far another replica's timer store had come (a DLedger group replicates it), so that
    the next master neither delivers a timer twice nor loses one."""

    enqueue_offset: int
    read_time_ms: int
    slot_done: int

    def to_json(self) -> dict[str, int]:
        return {
            "enqueueOffset": self.enqueue_offset,
            "readTimeMs": self.read_time_ms,
            "slotDone": self.slot_done,
        }

    @classmethod
    def from_json(cls, document: dict[str, int]) -> TimerHandover:
        return cls(
            int(document["enqueueOffset"]), int(document["readTimeMs"]), int(document["slotDone"])
        )


class TimerMessageStore:
    """Holds timer messages until due; `load`, then `start` on the loop, `stop` at shutdown."""

    def __init__(
        self,
        store: MessageStore,
        config: MessageStoreConfig,
        clock: Clock,
        *,
        deliver: Deliver,
        slot_count: int | None = None,
    ) -> None:
        """Args:
        store: The broker's loaded message store: the timer queue and records are read here.
        deliver: Stores a due message the way every message is stored (the broker's put
            path); the store package cannot see the broker, so it is handed in.
        config: `timerPrecisionMs`, `timerMaxDelaySec`, `timerFlushIntervalMs`,
            `mappedFileSizeTimerLog` and `storePathRootDir` (files go under `timer/`).
        clock: Wall time to compare with delivery times.
        slot_count: The wheel's size; by default `wheel_slot_count` of the config.
        """
        assert config.timer_precision_ms > 0, "timerPrecisionMs must be positive"
        self._store = store
        self._clock = clock
        self.precision_ms = config.timer_precision_ms
        self.slot_count = slot_count or wheel_slot_count(
            config.timer_precision_ms, config.timer_max_delay_sec
        )
        self.flush_interval_s = config.timer_flush_interval_ms / 1000
        self.root = Path(config.store_path_root_dir) / "timer"
        self._fs = store.fs
        self.log = TimerLog(self.root / "log", config.mapped_file_size_timer_log, fs=self._fs)
        self._wheel: TimerWheel | None = None
        self._checkpoint: TimerCheckpoint | None = None
        self.enqueue_offset = 0
        self.pending = 0
        self.delivery = TimerDelivery(
            store,
            deliver,
            self.log,
            clock,
            self.precision_ms,
            wheel=lambda: self.wheel,
            save_progress=self._save,
            on_done=self._done_with,
        )
        self._enqueue_more = False
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._flushed_at = 0.0
        self._housekept_at = 0.0
        self._file_max_time: dict[int, int] = {}
        self.last_load: TimerLoadResult | None = None
        self._delivered_before: TimerHandover | None = None
        """After `take_over`: what the previous master had delivered, skipped when met."""

    @property
    def wheel(self) -> TimerWheel:
        assert self._wheel is not None, "load() first"
        return self._wheel

    @property
    def checkpoint(self) -> TimerCheckpoint:
        assert self._checkpoint is not None, "load() first"
        return self._checkpoint

    @property
    def read_time_ms(self) -> int:
        """The first slot not delivered yet."""
        return self.delivery.read_time_ms

    @property
    def slot_done(self) -> int:
        """Entries of the slot at `read_time_ms` already delivered or skipped."""
        return self.delivery.slot_done

    # -- life cycle ------------------------------------------------------------------------
    def load(self) -> TimerLoadResult:
        """Opens the files and recovers; blocking (run it on a thread before `start`).

        After a clean stop with an unchanged geometry the wheel is used as it is; otherwise
        the log is cut at its last valid entry and the wheel rebuilt from it.
        """
        self._fs.make_dirs(self.root)
        checkpoint = self._checkpoint = TimerCheckpoint(self.root / "checkpoint", fs=self._fs)
        saved = checkpoint.progress
        self.log.load()
        now_ms = self._clock.now_ms()
        same_geometry = (saved.precision_ms, saved.slot_count) == (
            self.precision_ms,
            self.slot_count,
        )
        read_time = saved.read_time_ms if checkpoint.found else 0
        read_time -= read_time % self.precision_ms
        if read_time <= 0:
            read_time = now_ms - now_ms % self.precision_ms
        wheel: TimerWheel | None
        try:
            wheel = TimerWheel(self.root / "wheel", self.slot_count, self.precision_ms, fs=self._fs)
        except WheelGeometryError:
            wheel = None
        reuse = (
            checkpoint.found
            and saved.clean
            and same_geometry
            and wheel is not None
            and not wheel.created
            and self.log.set_end(saved.log_end)
        )
        if reuse:
            assert wheel is not None
            enqueue_offset, pending, scanned, relinked = saved.enqueue_offset, saved.pending, 0, 0
        else:
            if wheel is not None:
                wheel.close()
            end = self.log.recover_end()
            wheel = TimerWheel.recreate(
                self.root / "wheel", self.slot_count, self.precision_ms, fs=self._fs
            )
            rebuilt = rebuild_wheel(self.log, wheel, read_time)
            enqueue_offset = (
                rebuilt.max_queue_offset + 1 if rebuilt.entries else saved.enqueue_offset
            )
            pending, scanned, relinked = rebuilt.pending, rebuilt.entries, rebuilt.relinked
            log.info(
                "timer wheel rebuilt from the timer log (%s): %d entries up to position %d, "
                "%d pending, %d relinked, %d re-rolled",
                _why_rebuilt(checkpoint.found, saved.clean, same_geometry),
                rebuilt.entries,
                end,
                rebuilt.pending,
                rebuilt.relinked,
                rebuilt.rerolled,
            )
        self._wheel = wheel
        self.enqueue_offset = self._bounded_enqueue_offset(enqueue_offset)
        self.delivery.read_time_ms = read_time
        self.delivery.slot_done = saved.slot_done if read_time == saved.read_time_ms else 0
        self.pending = pending
        self._save(clean=False)
        checkpoint.flush()
        self.last_load = TimerLoadResult(
            clean=reuse,
            rebuilt_entries=scanned,
            relinked=relinked,
            pending=pending,
            enqueue_offset=self.enqueue_offset,
            read_time_ms=read_time,
        )
        log.info(
            "timer store loaded: %d pending, enqueue from queue offset %d, deliver from %d",
            pending,
            self.enqueue_offset,
            read_time,
        )
        return self.last_load

    @property
    def running(self) -> bool:
        return self._task is not None and self._checkpoint is not None

    @property
    def handover(self) -> TimerHandover:
        """Where this store is, for the replica that delivers after it."""
        return TimerHandover(self.enqueue_offset, self.read_time_ms, self.slot_done)

    def take_over(self, handover: TimerHandover) -> TimerLoadResult:
        """Loads as the next master of a replicated group: this replica's own timer files
        (behind what the previous master did) are dropped and the wheel is rebuilt from the
        whole timer queue, from the previous master's read time on. A timer it had enqueued
        into a slot before its read time was delivered, and is skipped; the rest are linked
        again. Only the entries of the slot it was delivering may go out twice. Blocking."""
        if self._checkpoint is not None:
            self.close()
        for name in self._fs.list_dir(self.root) if self._fs.exists(self.root) else []:
            path = self.root / name
            if self._fs.is_dir(path):
                for child in self._fs.list_dir(path):
                    self._fs.remove(path / child)
            else:
                self._fs.remove(path)
        self.load()
        read_time = handover.read_time_ms - handover.read_time_ms % self.precision_ms
        self.delivery.read_time_ms = read_time
        self.delivery.slot_done = handover.slot_done
        self.enqueue_offset = self._bounded_enqueue_offset(0)
        self._delivered_before = handover
        self._save()
        log.info(
            "timer store taken over: deliver from %d, the previous master enqueued up to "
            "queue offset %d",
            read_time,
            handover.enqueue_offset,
        )
        assert self.last_load is not None
        return self.last_load

    def _bounded_enqueue_offset(self, offset: int) -> int:
        queue = self._store.consume_queues.find(TIMER_TOPIC, TIMER_QUEUE_ID)
        low, high = (queue.min_offset, queue.max_offset) if queue else (0, 0)
        bounded = min(max(offset, low), high)
        if bounded != offset:
            log.warning(
                "timer queue offset %d is outside the queue [%d, %d]; going on from %d",
                offset,
                low,
                high,
                bounded,
            )
        return bounded

    def start(self) -> None:
        """Starts the task on the running loop; new timer queue entries wake it."""
        assert self._task is None, "started twice"
        self._store.dispatcher.on_dispatched.append(self._on_dispatched)
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run(), name="timer-store")

    async def stop(self, timeout_s: float = 5.0) -> None:
        """Lets a step under way finish, then flushes everything and marks the stop clean."""
        self._stopping = True
        self._wake.set()
        with contextlib.suppress(ValueError):
            self._store.dispatcher.on_dispatched.remove(self._on_dispatched)
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
            except TimeoutError:
                log.warning("the timer store did not stop within %.0f s; cancelling it", timeout_s)
                await cancel_and_wait(self._task)
            self._task = None
        if self._checkpoint is None:
            return
        await asyncio.to_thread(self._flush_files)
        self._save(clean=True)
        await asyncio.to_thread(self.checkpoint.flush)
        self.close()

    def close(self) -> None:
        """Closes the files without marking the stop clean (the next load rebuilds)."""
        if self._wheel is not None:
            self._wheel.close()
            self._wheel = None
        if self._checkpoint is not None:
            self._checkpoint.close()
            self._checkpoint = None
        self.log.close()

    def _save(self, *, clean: bool = False) -> None:
        self.checkpoint.save(
            TimerProgress(
                enqueue_offset=self.enqueue_offset,
                read_time_ms=self.read_time_ms,
                slot_done=self.slot_done,
                log_end=self.log.end_position,
                pending=self.pending,
                precision_ms=self.precision_ms,
                slot_count=self.slot_count,
                clean=clean,
            )
        )

    def _flush_files(self) -> None:
        self.log.flush()
        self.wheel.flush()
        self.checkpoint.flush()

    def _on_dispatched(self, run: Sequence[DispatchRequest]) -> None:
        if any(request.topic == TIMER_TOPIC for request in run):
            self._wake.set()

    # -- the task --------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        self._flushed_at = self._housekept_at = loop.time()
        while not self._stopping:
            self._wake.clear()
            try:
                await self.enqueue_available()
                await self.deliver_due()
                await self._housekeeping(loop.time())
            except StoreNotRunningError:
                log.info("the store stopped; timer delivery ends")
                return
            except Exception:  # a task boundary: log, wait, go on
                log.exception("the timer store failed a step; retrying")
                await self._sleep(RETRY_DELAY_S)
                continue
            if self._enqueue_more or self.delivery.more:
                await asyncio.sleep(0)  # let requests in between batches
                continue
            await self._sleep(self._idle_wait_s())

    def _idle_wait_s(self) -> float:
        now_ms = self._clock.now_ms()
        due_ms = max(self.read_time_ms + self.precision_ms, self.delivery.retry_at_ms)
        return min(POLL_INTERVAL_S, max((due_ms - now_ms) / 1000, 0.0))

    async def _sleep(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _housekeeping(self, now_s: float) -> None:
        if now_s - self._flushed_at >= self.flush_interval_s:
            self._flushed_at = now_s
            await asyncio.to_thread(self._flush_files)
        if now_s - self._housekept_at >= HOUSEKEEPING_INTERVAL_S:
            self._housekept_at = now_s
            await self.delete_delivered_log_files()

    async def delete_delivered_log_files(self) -> int:
        """Deletes timer log files whose every entry is delivered (never the last file).

        Returns:
            How many files were deleted.
        """
        deleted = 0
        while self.log.file_count() > 1:
            first = self.log.first_file_range()
            assert first is not None
            start, end = first
            newest = self._file_max_time.get(start)
            if newest is None:
                newest = await asyncio.to_thread(self._max_time_in, start, end)
                self._file_max_time[start] = newest
            if newest >= self.read_time_ms:
                break
            self.log.delete_first_file()
            self._file_max_time.pop(start, None)
            deleted += 1
            log.info("deleted timer log file at %d: every entry in it is delivered", start)
        return deleted

    def _max_time_in(self, start: int, end: int) -> int:
        newest = -1
        for position, entry in self.log.scan(start):
            if position >= end:
                break
            newest = max(newest, entry.time_ms)
        return newest

    # -- enqueue ---------------------------------------------------------------------------
    async def enqueue_available(self) -> int:
        """One step: links up to `ENQUEUE_BATCH` new timer queue entries into the wheel.

        Returns:
            Entries handled (linked, delivered at once, or skipped as unreadable).

        Raises:
            StoreNotRunningError: the store was shut down.
        """
        self._enqueue_more = False
        queue = self._store.consume_queues.find(TIMER_TOPIC, TIMER_QUEUE_ID)
        if queue is None:
            return 0
        offset = self.enqueue_offset
        if not queue.min_offset <= offset <= queue.max_offset:
            offset = self.enqueue_offset = self._bounded_enqueue_offset(offset)
        if offset >= queue.max_offset:
            return 0
        result = self._store.get_message(TIMER_TOPIC, TIMER_QUEUE_ID, offset, ENQUEUE_BATCH)
        handled = 0
        now_ms = self._clock.now_ms()
        for record, queue_offset in zip(result.buffers, result.queue_offsets, strict=True):
            if not await self._enqueue_record(record, queue_offset, now_ms):
                self._save()
                return handled
            self.enqueue_offset = queue_offset + 1
            handled += 1
        self.enqueue_offset = max(self.enqueue_offset, result.next_begin_offset)
        self._enqueue_more = self.enqueue_offset < queue.max_offset
        self._save()
        return handled

    async def _enqueue_record(self, record: bytes, queue_offset: int, now_ms: int) -> bool:
        """Links one timer queue record; False when it must be tried again later."""
        try:
            stored = decode_record(record, check_crc=False)
            out_ms = timer_out_ms(stored)
        except (MessageDecodeError, UndeliverableTimerError) as exc:
            log.warning(
                "timer queue offset %d is not a timer message (%s); skipped", queue_offset, exc
            )
            return True
        delete = is_delete_marker(stored)
        key = entry_key(stored)
        entry = TimerEntry(
            flags=FLAG_DELETE if delete else 0,
            prev_pos=-1,
            time_ms=self.wheel.slot_time(out_ms),
            commit_offset=stored.physical_offset,
            commit_size=stored.store_size,
            queue_offset=queue_offset,
            key_hash=key_hash(key) if key else 0,
        )
        slot_time = entry.time_ms
        before = self._delivered_before
        if before is not None:
            if queue_offset >= before.enqueue_offset:
                self._delivered_before = None
            elif slot_time < before.read_time_ms:
                return True  # the previous master delivered it
        if slot_time < self.read_time_ms or (
            slot_time == self.read_time_ms and self.delivery.chain is not None
        ):
            # Its slot is delivered (or being delivered): it is due, so it goes out now. A
            # late delete marker has nothing left to delete.
            where = f"timer queue offset {queue_offset}"
            if not delete and not await self.delivery.store_due(stored, where, now_ms):
                return False
            self.log.append(replace(entry, flags=entry.flags | FLAG_IMMEDIATE))
            return True
        if slot_time - self.read_time_ms >= self.wheel.max_span_ms():
            slot_time = self.read_time_ms + self.wheel.max_span_ms() - self.precision_ms
            entry = replace(entry, flags=entry.flags | FLAG_ROLL, time_ms=slot_time)
        slot = self.wheel.get(slot_time)
        position = self.log.append(replace(entry, prev_pos=slot.last_pos))
        self.wheel.link(slot, position, delete_marker=delete and not entry.flags & FLAG_ROLL)
        if not delete:
            self.pending += 1
        return True

    async def deliver_due(self) -> int:
        """One delivery step (`TimerDelivery.deliver_due`).

        Returns:
            Messages stored into their real topics (or rolled into the timer topic again).

        Raises:
            StoreNotRunningError: the store was shut down.
        """
        return await self.delivery.deliver_due()

    def _done_with(self, entry: TimerEntry) -> None:
        if not entry.is_delete:
            self.pending = max(self.pending - 1, 0)

    # -- statistics ------------------------------------------------------------------------
    def backlog(self) -> int:
        """Timer messages waiting: in the wheel, and not yet read from the timer queue."""
        queue_max = self._store.get_max_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        return self.pending + max(queue_max - self.enqueue_offset, 0)

    def runtime_stats(self) -> dict[str, str]:
        """RocketMQ's timer keys of the broker runtime info: how far delivery is behind the
        clock (s), enqueuing behind the timer queue (messages), and the pending count."""
        queue_max = self._store.get_max_offset_in_queue(TIMER_TOPIC, TIMER_QUEUE_ID)
        behind_ms = max(self._clock.now_ms() - self.read_time_ms, 0)
        return {
            "timerReadBehind": str(behind_ms // 1000),
            "timerOffsetBehind": str(max(queue_max - self.enqueue_offset, 0)),
            "timerCongestNum": str(self.pending),
        }


def _why_rebuilt(found: bool, clean: bool, same_geometry: bool) -> str:
    if not found:
        return "no checkpoint yet"
    if not clean:
        return "unclean stop"
    if not same_geometry:
        return "timerPrecisionMs or timerMaxDelaySec changed"
    return "wheel file missing or not matching the log"
