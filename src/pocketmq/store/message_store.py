"""The message store: CommitLog, ConsumeQueues, index, flush, recovery and retention, wired.

This is the one object the broker talks to (RocketMQ's `DefaultMessageStore`). It owns the
directory layout under `storePathRootDir`, the `abort` marker that tells a crash from a clean
stop, and the order of start-up and shutdown. It does no networking. Reads (queues, offsets,
lookups by time, key or offset) are `reader.py`'s; the read methods here delegate to it, so
the broker has one object to call.

Threading: everything runs on the event loop except blocking flushes, which go to one flush
thread. `load()` (recovery) is synchronous and runs before the loop serves anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from pocketmq.common.stored_message import HostAddress, ReadableBuffer, StoredMessage
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.store.api import (
    BatchToStore,
    Durability,
    GetResult,
    MessageToStore,
    PutResult,
    PutStatus,
    Replication,
)
from pocketmq.store.checkpoint import Checkpoint
from pocketmq.store.commitlog import AppendedRecord, CommitLog
from pocketmq.store.config import FlushDiskType, MessageStoreConfig
from pocketmq.store.consume_queue_table import ConsumeQueueTable
from pocketmq.store.dispatch import Dispatcher, IndexTarget
from pocketmq.store.flush import FlushOutcome, FlushServices
from pocketmq.store.index import IndexService
from pocketmq.store.metadata import BrokerMetadataFiles
from pocketmq.store.reader import MessageReader
from pocketmq.store.recovery import RecoveryResult, recover_commit_log
from pocketmq.store.retention import CleanResult, RetentionPolicy, disk_used_percent

log = logging.getLogger(__name__)


class StoreNotRunningError(RuntimeError):
    """The store was used before `load()` or after `shutdown()`."""


class MessageStore:
    """RocketMQ's message store on local disk."""

    def __init__(
        self,
        config: MessageStoreConfig,
        *,
        store_host: HostAddress = ("127.0.0.1", 10911),
        clock: Clock | None = None,
        disk_usage: Callable[[], float] | None = None,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.fs = fs
        self.root = Path(config.store_path_root_dir)
        self.store_host = store_host
        self.commit_log = CommitLog(
            Path(config.store_path_commit_log)
            if config.store_path_commit_log
            else self.root / "commitlog",
            file_size=config.mapped_file_size_commit_log,
            clock=self.clock,
            store_host=store_host,
            max_message_size=config.max_message_size,
            fs=fs,
        )
        self.consume_queues = ConsumeQueueTable(
            self.root / "consumequeue", config.mapped_file_size_consume_queue, fs=fs
        )
        self.index = IndexService(
            self.root / "index",
            max_hash_slot_num=config.max_hash_slot_num,
            max_index_num=config.max_index_num,
            clock=self.clock,
            fs=fs,
        )
        targets: list[object] = [self.consume_queues]
        if config.message_index_enable:
            targets.append(IndexTarget(self.index))
        self.dispatcher = Dispatcher(self.commit_log, targets)  # type: ignore[arg-type]
        self.reader = MessageReader(self.commit_log, self.consume_queues, self.index, config)
        self.checkpoint = Checkpoint(self.root / "checkpoint", fs)
        # Topics, groups and offsets: the broker owns their meaning, the store their files.
        self.metadata = BrokerMetadataFiles(self.root / "config", fs)
        self.metadata_documents: dict[str, object] = {}
        self.retention = RetentionPolicy(
            clock=self.clock,
            file_reserved_time_hours=config.file_reserved_time_hours,
            delete_when=config.delete_when,
            disk_max_used_space_ratio=config.disk_max_used_space_ratio,
            disk_usage=disk_usage or (lambda: disk_used_percent(self.root)),
        )
        self._clean_task: asyncio.Task[None] | None = None
        self._abort_path = self.root / "abort"
        self.flushing = FlushServices(
            sync_flush=config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
            flush_commit_log=self._flush_commit_log,
            flush_derived=self._flush_derived,
            wrote_offset=lambda: self.commit_log.max_offset,
            commit_log_interval_ms=config.flush_interval_commit_log_ms,
            derived_interval_ms=config.flush_interval_consume_queue_ms,
            where=str(self.root),
        )
        self._dispatch_handle: asyncio.Handle | None = None
        self._loaded = False
        self._running = False
        # A slave's CommitLog takes only replicated bytes (`append_raw`), never puts.
        self.accepts_puts = True
        self.replication: Replication | None = None
        self.last_recovery: RecoveryResult | None = None

    # -- life cycle ------------------------------------------------------------------------
    def load(self) -> RecoveryResult:
        """Opens the files, recovers after a clean or unclean stop, and re-dispatches.

        Blocking; run it before the store serves anything.
        """
        fs = self.fs
        fs.make_dirs(self.root)
        abnormal = fs.exists(self._abort_path)
        self.checkpoint = Checkpoint.open(self.root / "checkpoint", fs)
        self.commit_log.files.load()
        self.consume_queues.load()
        self.index.load()
        self.metadata_documents = self.metadata.load_all()
        result = recover_commit_log(
            self.commit_log,
            abnormal=abnormal,
            safe_timestamp=self.checkpoint.min_timestamp(
                with_index=self.config.message_index_enable
            ),
        )
        end = result.end_offset
        for queue in self.consume_queues.queues.values():
            queue.truncate_to_physical(end)
        if abnormal:
            reput_from = result.scan_start
        else:
            dispatched = [q.max_physical_end for q in self.consume_queues.queues.values()]
            reput_from = min(max(dispatched, default=0), end)
        reput_from = max(reput_from, self.commit_log.min_offset)
        if abnormal:
            # A power loss can tear the index's newest entries: it may need a few messages
            # from before the safe point again.
            reput_from = max(self.index.recover(reput_from), self.commit_log.min_offset)
        else:
            self.index.truncate(end)
        self.dispatcher.reput_offset = reput_from
        if abnormal:
            # Queue entries after the safe point may be torn or missing: rewrite them all.
            # Queue files may be there only in the page cache: sync their names with them.
            self.consume_queues.distrust_loaded_files()
            self.consume_queues.begin_repair()
        redispatched = self.dispatcher.dispatch_available(max_records=1 << 62)
        if abnormal:
            self.consume_queues.end_repair()
        for (topic, queue_id), queue in self.consume_queues.queues.items():
            self.commit_log.queue_offsets.set(topic, queue_id, queue.max_offset)
            queue.delete_expired(self.commit_log.min_offset)
        if abnormal:
            # What a crash left may sit only in the page cache: sync it all before serving,
            # so that no later FLUSHED receipt stands on unsynced bytes. The marker stays.
            self._flush_all()
        else:
            handle = fs.open(self._abort_path, create=True)
            handle.close()
            fs.sync_directory(self.root)
        self._loaded = True
        self.last_recovery = result
        log.info(
            "store loaded from %s (%s stop): commit log [%d, %d), %d queues, "
            "%d records re-dispatched",
            self.root,
            "unclean" if abnormal else "clean",
            self.commit_log.min_offset,
            self.commit_log.max_offset,
            len(self.consume_queues.queues),
            redispatched,
        )
        return result

    async def start(self) -> None:
        """Starts the flush services; call from the event loop after `load()`."""
        if not self._loaded:
            self.load()
        self.flushing.start()
        self._clean_task = asyncio.get_running_loop().create_task(
            self._clean_periodically(), name="retention"
        )
        self._running = True

    @property
    def disk_error(self) -> str | None:
        """Why puts are refused after a sync failed, until a restart (whose recovery syncs
        everything again); None while the disk is fine."""
        return self.flushing.disk_error

    async def _clean_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.clean_resource_interval_ms / 1000)
            try:
                self.clean_expired_files()
            except OSError:
                log.exception("retention pass failed; retrying at the next interval")

    async def shutdown(self) -> None:
        """Flushes everything, writes the checkpoint and removes the `abort` marker."""
        if not self._loaded:
            return
        self._running = False
        if self._clean_task is not None:
            await cancel_and_wait(self._clean_task)
            self._clean_task = None
        if self._dispatch_handle is not None:
            self._dispatch_handle.cancel()
            self._dispatch_handle = None
        if self.disk_error is None:
            try:
                self.dispatcher.dispatch_available(max_records=1 << 62)
            except OSError as error:
                self.flushing.refuse_writes(error)
        await self.flushing.stop()
        if self.disk_error is not None:
            # Not clean: the next start must recover and sync as after a crash.
            self.close()
            log.warning("store at %s stopped after a disk error; it will recover", self.root)
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.flushing.executor, self._flush_all)
        self.close()
        self.fs.remove(self._abort_path)
        self.fs.sync_directory(self.root)
        log.info("store at %s stopped cleanly", self.root)

    def close(self) -> None:
        """Closes the files without the clean-stop steps: the next `load()` recovers as after
        a crash (the `abort` marker stays). `shutdown()` is the clean stop."""
        if not self._loaded:
            return
        self._loaded = False
        self.commit_log.close()
        self.consume_queues.close()
        self.index.close()
        self.flushing.shutdown()

    def _flush_all(self) -> None:
        self.commit_log.files.flush()
        self._flush_derived()

    def _flush_commit_log(self) -> int:
        """The CommitLog flush service's work: a sync, then the pages it made durable well
        behind the writer let go of (`MappedFileQueue.release_pages`). Blocking."""
        files = self.commit_log.files
        flushed = files.flush()
        files.release_pages(self.config.commit_log_resident_window)
        return flushed

    def _flush_derived(self) -> None:
        """Flushes queues and index, then records in the checkpoint how far all are durable."""
        physic_timestamp = self.commit_log.last_store_timestamp
        logics_timestamp = self.dispatcher.last_store_timestamp
        self.commit_log.files.flush()
        self.consume_queues.flush()
        self.index.flush()
        checkpoint = self.checkpoint
        if physic_timestamp:
            checkpoint.physic_msg_timestamp = physic_timestamp
        if logics_timestamp:
            checkpoint.logics_msg_timestamp = logics_timestamp
            checkpoint.index_msg_timestamp = logics_timestamp
        checkpoint.flush()

    # -- retention -------------------------------------------------------------------------
    def clean_expired_files(self) -> CleanResult | None:
        """One retention pass (see `retention.py`); None when it is no time to delete."""
        reason = self.retention.reason_to_clean()
        if reason is None:
            return None
        text, force = reason
        files = self.commit_log.files.files
        candidates = [(mapped.path, self.fs.mtime_ms(mapped.path)) for mapped in files]
        doomed = self.retention.files_to_delete(candidates, force=force)
        for path in doomed:
            assert files[0].path == path, "retention deletes from the front"
            self.commit_log.files.delete_first()
        min_offset = self.commit_log.min_offset
        queue_files = sum(q.delete_expired(min_offset) for q in self.consume_queues.queues.values())
        index_files = self.index.delete_expired(min_offset)
        self.dispatcher.reput_offset = max(self.dispatcher.reput_offset, min_offset)
        if doomed:
            log.info(
                "retention (%s): deleted %d commit log files, %d queue files, %d index files; "
                "commit log now starts at %d",
                text,
                len(doomed),
                queue_files,
                index_files,
                min_offset,
            )
        return CleanResult(len(doomed), queue_files, index_files, text)

    # -- writing ---------------------------------------------------------------------------
    async def put_message(self, message: MessageToStore) -> PutResult:
        """Stores one message; with SYNC_FLUSH, returns once its bytes are durable."""
        return await self.put_messages((message,))

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Stores a batch of messages of one topic and queue as one unit.

        Returns PUT_OK, or a status saying why nothing (MESSAGE_ILLEGAL, ...) or not enough
        (FLUSH_DISK_TIMEOUT: stored, but not known durable in time) happened.
        """
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        return await self._settle(self._append(messages))

    async def put_batch(self, batch: BatchToStore) -> PutResult:
        """`put_messages` for a batch send, written straight from its body."""
        refusal = self._refusal()
        if refusal is not None:
            return refusal
        return await self._settle(
            self._guarded_append(
                batch.topic,
                lambda appended: self.commit_log.append_batch(batch, appended=appended),
            )
        )

    def _refusal(self) -> PutResult | None:
        """Why this store takes no put now, if it does not."""
        if not self._loaded:
            raise StoreNotRunningError("the store is not loaded")
        if not self.accepts_puts:
            return PutResult(
                PutStatus.SERVICE_NOT_AVAILABLE,
                remark="this broker is a slave (brokerRole=SLAVE): send to its master",
            )
        return None

    async def _settle(self, result: PutResult) -> PutResult:
        """Waits for what an append's receipt promises: the flush (SYNC_FLUSH) and the
        replicas."""
        if not result.ok:
            return result
        self._schedule_dispatch()
        replication = self.replication
        if replication is not None:
            replication.notify_appended()
        group_commit = self.flushing.group_commit
        if group_commit is not None:
            outcome = await group_commit.wait_durable(
                result.end_offset, self.config.sync_flush_timeout_ms / 1000
            )
            if outcome is FlushOutcome.DURABLE:
                result.durability = Durability.FLUSHED
            else:
                # Stored (readers may see it) but not known durable: never FLUSHED.
                result.status = PutStatus.FLUSH_DISK_TIMEOUT
                if outcome is FlushOutcome.FAILED:
                    result.remark = self.disk_error or "its bytes were truncated before a sync"
        if replication is not None and result.status is PutStatus.PUT_OK:
            await replication.settle(result)
        return result

    def put_messages_now(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Appends without waiting for a flush or the event loop; dispatch runs inline.

        For tools and tests that drive the store synchronously.
        """
        result = self._append(messages)
        if result.ok:
            self.dispatcher.dispatch_available()
            if self.replication is not None:
                self.replication.notify_appended()
        return result

    def append_replicated(
        self, messages: Sequence[MessageToStore], *, store_timestamp: int, store_host: HostAddress
    ) -> PutResult:
        """Appends messages a consensus log committed, with the store time and host its leader
        chose (so every replica writes the same bytes), and dispatches them; no flush wait."""
        result = self._append(messages, store_timestamp=store_timestamp, store_host=store_host)
        if result.ok:
            self._schedule_dispatch_if_running()
        return result

    def _append(
        self,
        messages: Sequence[MessageToStore],
        *,
        store_timestamp: int | None = None,
        store_host: HostAddress | None = None,
    ) -> PutResult:
        return self._guarded_append(
            messages[0].topic if messages else "",
            lambda appended: self.commit_log.append(
                messages, store_timestamp=store_timestamp, store_host=store_host, appended=appended
            ),
        )

    def _guarded_append(
        self, topic: str, append: Callable[[list[AppendedRecord] | None], PutResult]
    ) -> PutResult:
        """Runs one CommitLog append of `topic`'s records, unless a disk error stopped writes;
        hands what it wrote to dispatch, and turns a file that could not be made into a
        status."""
        if self.disk_error is not None:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self.disk_error)
        # Nothing is collected while dispatch is too far behind to take it (`KNOWN_MAX`).
        appended: list[AppendedRecord] | None = [] if self.dispatcher.takes_expected else None
        try:
            result = append(appended)
            if appended:
                self.dispatcher.expect(topic, result.store_timestamp, appended)
            return result
        except OSError as error:
            log.error("store at %s: cannot create the next commit log file: %s", self.root, error)
            return PutResult(
                PutStatus.CREATE_MAPPED_FILE_FAILED,
                remark=f"cannot create the next commit log file ({error.strerror or error}); "
                "free disk space or check the disk",
            )

    def _schedule_dispatch(self) -> None:
        if self._dispatch_handle is None:
            self._dispatch_handle = asyncio.get_running_loop().call_soon(self._run_dispatch)

    def _run_dispatch(self) -> None:
        self._dispatch_handle = None
        # A slice of ~2,000 records keeps the loop free for other requests (~20 ms at most).
        try:
            self.dispatcher.dispatch_available(max_records=2_000)
        except OSError as error:
            # A queue or index file could not be created: what is stored stays readable up to
            # here; the rest is dispatched by the recovery of the next start.
            self.flushing.refuse_writes(error)
            return
        if self.dispatcher.reput_offset < self.commit_log.max_offset:
            self._schedule_dispatch()

    def dispatch_now(self) -> int:
        """Dispatches everything appended so far; returns the record count."""
        return self.dispatcher.dispatch_available(max_records=1 << 62)

    def append_raw(self, offset: int, data: bytes | memoryview) -> None:
        """Appends bytes another replica stored (replication, consensus); dispatches them."""
        self.commit_log.append_raw(offset, data)
        self._schedule_dispatch_if_running()

    def take_over_writing(self) -> int:
        """A replica that copied another's bytes becomes the writer: its queues are built to
        the end of the CommitLog and the next queue offsets continue them (raw appends do not
        assign any). Returns the records dispatched."""
        dispatched = self.dispatch_now()
        for (topic, queue_id), queue in self.consume_queues.queues.items():
            self.commit_log.queue_offsets.set(topic, queue_id, queue.max_offset)
        return dispatched

    def truncate(self, offset: int) -> None:
        """Cuts the CommitLog back to the record boundary `offset`, with queues and index."""
        self.commit_log.truncate(offset)
        for (topic, queue_id), queue in self.consume_queues.queues.items():
            queue.truncate_to_physical(offset)
            self.commit_log.queue_offsets.set(topic, queue_id, queue.max_offset)
        self.index.truncate(offset)
        self.dispatcher.reput_offset = min(self.dispatcher.reput_offset, offset)
        self.dispatcher.forget_expected()

    def _schedule_dispatch_if_running(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.dispatch_now()
            return
        self._schedule_dispatch()

    # -- reading (see `reader.py`) ---------------------------------------------------------
    @property
    def min_phy_offset(self) -> int:
        return self.commit_log.min_offset

    @property
    def max_phy_offset(self) -> int:
        return self.commit_log.max_offset

    def get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        *,
        max_bytes: int = 256 * 1024 * 1024,
        tag_codes: frozenset[int] | None = None,
        record_filter: Callable[[ReadableBuffer], bool] | None = None,
    ) -> GetResult:
        """Reads up to `max_count` stored records of a queue (`MessageReader.get_message`)."""
        return self.reader.get_message(
            topic,
            queue_id,
            offset,
            max_count,
            max_bytes=max_bytes,
            tag_codes=tag_codes,
            record_filter=record_filter,
        )

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.reader.get_min_offset_in_queue(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        """The CommitLog offset of a queue entry, or -1 when it does not exist."""
        return self.reader.get_commit_log_offset_in_queue(topic, queue_id, offset)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of a queue entry's message, or -1."""
        return self.reader.get_message_store_timestamp(topic, queue_id, offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.reader.get_earliest_message_time(topic, queue_id)

    def store_timestamp_at(self, physical: int) -> int:
        """The store time of the record at CommitLog offset `physical`, or -1."""
        return self.reader.store_timestamp_at(physical)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms`."""
        return self.reader.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    def look_message_by_offset(self, physical_offset: int) -> StoredMessage | None:
        """The message stored at a CommitLog offset, or None when no record is there."""
        return self.reader.look_message_by_offset(physical_offset)

    def select_one_message_by_offset(self, physical_offset: int) -> bytes | None:
        """The stored bytes of the record at a CommitLog offset."""
        return self.reader.select_one_message_by_offset(physical_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int = 1 << 62
    ) -> list[StoredMessage]:
        """Messages of `topic` with `key` among their KEYS or as their unique id, newest first."""
        return self.reader.query_message(topic, key, max_num, begin_ms, end_ms)

    def topics(self) -> set[str]:
        return self.reader.topics()

    def queue_ids(self, topic: str) -> list[int]:
        return self.reader.queue_ids(topic)
