"""Reads of the message store: queues, offsets, lookups by time, key and CommitLog offset.

It owns how a read walks a ConsumeQueue into the CommitLog (tag-code filtering, the byte and
count bounds, when to suggest a slave) and the lookups the admin and query paths make. It never
writes: appends, dispatch, recovery and retention belong to `message_store.py` and the modules
it wires. Everything here runs on the event loop and reads mapped files directly.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Final

from pocketmq.common.constants import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.stored_layout import STORE_TIMESTAMP_END_MAX, peek_store_timestamp
from pocketmq.common.stored_message import (
    MessageDecodeError,
    ReadableBuffer,
    StoredMessage,
    decode_record,
)
from pocketmq.store.api import GetResult, GetStatus
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.consume_queue_table import ConsumeQueueTable
from pocketmq.store.index import IndexService

# RocketMQ scans at most this many queue entries per read when a tag filter skips them.
MAX_FILTERED_ENTRIES_PER_READ: Final = 16_000
# Bytes read to peek at a record's STORETIMESTAMP: its head, with room for an IPv6 born host.
_HEAD_READ_BYTES: Final = 80


class MessageReader:
    """Reads over one store's CommitLog, ConsumeQueues and index."""

    def __init__(
        self,
        commit_log: CommitLog,
        consume_queues: ConsumeQueueTable,
        index: IndexService,
        config: MessageStoreConfig,
    ) -> None:
        """Args:
        commit_log: The log records are read from.
        consume_queues: The queues reads walk.
        index: The key index `query_message` asks.
        config: Read at every call for `accessMessageInMemoryMaxRatio` (percent of RAM behind
            the log's end past which a read suggests the consumer go to a slave).
        """
        self._commit_log = commit_log
        self._consume_queues = consume_queues
        self._index = index
        self._config = config

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
        """Reads up to `max_count` stored records of a queue from `offset` on.

        `tag_codes` keeps only entries whose tag hash is in the set (None keeps all); the
        client re-checks the real tag, as hashes can collide. `record_filter` then sees each
        record (SQL92 property filters); skipped records still advance `next_begin_offset`.
        """
        queue = self._consume_queues.find(topic, queue_id)
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        min_offset, max_offset = queue.min_offset, queue.max_offset
        if max_offset == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
        if offset < min_offset:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
        if offset == max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
        if offset > max_offset:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
        result = GetResult(GetStatus.NO_MATCHED_MESSAGE, offset, min_offset, max_offset)
        commit_log = self._commit_log
        commit_log_min = commit_log.min_offset
        next_offset = offset
        scanned = 0
        last_physical = -1
        status = GetStatus.NO_MATCHED_MESSAGE
        buffers = result.buffers
        queue_offsets = result.queue_offsets
        total_bytes = 0
        # The CommitLog file last read from, [low, high) its written bytes: a queue's records
        # are mostly in one file, read here without a call each (nothing writes during a read).
        low = high = 0
        mapped_buffer: ReadableBuffer = b""
        first_physical = -1
        while (
            next_offset < max_offset
            and len(buffers) < max_count
            and scanned < MAX_FILTERED_ENTRIES_PER_READ
        ):
            before = next_offset
            full = False
            queue_offset = next_offset - 1
            for physical, size, tags in queue.entry_run(
                next_offset, min(max_offset - next_offset, MAX_FILTERED_ENTRIES_PER_READ - scanned)
            ):
                queue_offset += 1
                scanned += 1
                if physical < commit_log_min:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                elif tag_codes is None or tags in tag_codes:
                    if buffers and total_bytes + size > max_bytes:
                        full = True
                        break
                    if low <= physical and physical + size <= high:
                        record: bytes | None = bytes(
                            mapped_buffer[physical - low : physical - low + size]
                        )
                    else:
                        mapped = commit_log.files.find(physical)
                        if mapped is None:
                            record = None
                        else:
                            if first_physical < 0:
                                first_physical = physical
                            low = mapped.file_from_offset
                            high = low + mapped.wrote_position
                            mapped_buffer = mapped.buffer
                            record = commit_log.read(physical, size)
                    if record is None:
                        status = GetStatus.OFFSET_FOUND_NULL
                    elif record_filter is not None and not record_filter(record):
                        pass
                    else:
                        buffers.append(record)
                        queue_offsets.append(queue_offset)
                        total_bytes += size
                        last_physical = physical
                next_offset = queue_offset + 1
                if len(buffers) >= max_count:
                    break
            if full or next_offset == before:
                break
        result.total_bytes = total_bytes
        result.next_begin_offset = next_offset
        if buffers:
            status = GetStatus.FOUND
            commit_log.note_read(first_physical, last_physical + len(buffers[-1]))
            behind = commit_log.max_offset - last_physical
            result.suggest_slave = (
                behind > _memory_bytes() * self._config.access_message_in_memory_max_ratio // 100
            )
        result.status = status
        return result

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self._consume_queues.find(topic, queue_id)
        return queue.max_offset if queue else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        queue = self._consume_queues.find(topic, queue_id)
        return queue.min_offset if queue else 0

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        """The CommitLog offset of a queue entry, or -1 when it does not exist."""
        queue = self._consume_queues.find(topic, queue_id)
        entry = queue.entry(offset) if queue else None
        return entry[0] if entry else -1

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of a queue entry's message, or -1."""
        queue = self._consume_queues.find(topic, queue_id)
        entry = queue.entry(offset) if queue else None
        if entry is None:
            return -1
        return self._store_timestamp_at(entry[0], entry[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.get_message_store_timestamp(
            topic, queue_id, self.get_min_offset_in_queue(topic, queue_id)
        )

    def store_timestamp_at(self, physical: int) -> int:
        """The store time of the record at CommitLog offset `physical`, or -1."""
        return self._store_timestamp_at(physical, _HEAD_READ_BYTES)

    def _store_timestamp_at(self, physical: int, size: int) -> int:
        record = self._commit_log.read(physical, min(size, _HEAD_READ_BYTES))
        if record is None or len(record) < STORE_TIMESTAMP_END_MAX:
            return -1
        return peek_store_timestamp(record, 0)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose message was stored at or after `timestamp_ms`.

        Before every message: the min offset; after every message: the max offset.
        """
        queue = self._consume_queues.find(topic, queue_id)
        if queue is None:
            return 0
        low, high = queue.min_offset, queue.max_offset
        while low < high:
            mid = (low + high) // 2
            entry = queue.entry(mid)
            stamp = self._store_timestamp_at(entry[0], entry[1]) if entry else -1
            if 0 <= stamp < timestamp_ms:
                low = mid + 1
            else:
                high = mid
        return low

    def look_message_by_offset(self, physical_offset: int) -> StoredMessage | None:
        """The message stored at a CommitLog offset, or None when no record is there."""
        record = self._commit_log.read_record(physical_offset)
        if record is None:
            return None
        try:
            return decode_record(record, check_crc=False)
        except MessageDecodeError:
            return None

    def select_one_message_by_offset(self, physical_offset: int) -> bytes | None:
        """The stored bytes of the record at a CommitLog offset."""
        return self._commit_log.read_record(physical_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int = 1 << 62
    ) -> list[StoredMessage]:
        """Messages of `topic` with `key` among their KEYS or as their unique id, newest first."""
        found = []
        for physical in self._index.query(topic, key, max_num * 2, begin_ms, end_ms):
            message = self.look_message_by_offset(physical)
            # The index keeps whole seconds, so its candidates may lie just outside the range.
            if (
                message is None
                or message.topic != topic
                or not begin_ms <= message.store_timestamp <= end_ms
            ):
                continue
            keys = message.properties.get(PROPERTY_KEYS, "").split(KEY_SEPARATOR)
            if key in keys or message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key:
                found.append(message)
                if len(found) >= max_num:
                    break
        return found

    def topics(self) -> set[str]:
        return {topic for topic, _ in self._consume_queues.queues}

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in self._consume_queues.queues if t == topic)


@functools.cache
def _memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30
