"""The CommitLog: every message of every topic, appended to one log of mapped files.

It owns the append path (encoding records straight into the mapped file, assigning physical and
queue offsets), reads by physical offset, and the three operations that replication and
consensus build on: `append_raw` (bytes that another replica already encoded), `truncate`
(cut back to an offset, e.g. to an epoch boundary) and `read`. It does not flush (see
`flush.py`), recover (see `recovery.py`) or build queues (see `dispatch.py`).

Invariant: a record never spans two files. When a record does not fit in what is left of the
last file, the rest of the file is filled with a blank record (length + BLANK_MAGIC_CODE) and
the record goes to the next file.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from pocketmq.common.checksum import crc32
from pocketmq.common.constants import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    PROPERTY_SEPARATOR,
)
from pocketmq.common.stored_message import (
    HostAddress,
    encode_blank,
    fixed_part,
    host_flags,
    pack_host,
    peek_size_and_magic,
    topic_field,
)
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.store.api import BatchToStore, MessageToStore, PutResult, PutStatus
from pocketmq.store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

AppendedRecord = tuple[int, int, int, int, int, str]
"""What `CommitLog.append` wrote for one message: its CommitLog offset, size, queue id, queue
offset, stored sys flag and stored properties text, so that dispatch need not parse it back."""

_packed_host = lru_cache(maxsize=1024)(pack_host)


def _body_too_big(size: int, limit: int) -> PutResult:
    return PutResult(
        PutStatus.MESSAGE_ILLEGAL,
        remark=f"message body is {size} bytes, the limit (maxMessageSize) is {limit}",
    )


def _properties_too_long(size: int) -> PutResult:
    return PutResult(
        PutStatus.PROPERTIES_SIZE_EXCEEDED,
        remark=f"properties are {size} bytes, the limit is {MAX_PROPERTIES_LENGTH}",
    )


@lru_cache(maxsize=1024)
def _topic_fields(topic: str) -> tuple[bytes, int] | None:
    """A topic's TOPIC field and the record magic it takes (V2 for a long topic), or None for
    a topic no record can carry."""
    encoded = topic.encode()
    if len(encoded) > MAX_TOPIC_LENGTH or not encoded or b"\0" in encoded:
        return None
    magic = MESSAGE_MAGIC_CODE_V2 if len(encoded) > MAX_TOPIC_LENGTH_V1 else MESSAGE_MAGIC_CODE_V1
    return topic_field(encoded), magic


class QueueOffsetTable:
    """The next queue offset of every (topic, queueId): RocketMQ's `topicQueueTable`."""

    def __init__(self) -> None:
        self._next: dict[tuple[str, int], int] = {}

    def next_offset(self, topic: str, queue_id: int) -> int:
        return self._next.get((topic, queue_id), 0)

    def advance(self, topic: str, queue_id: int, count: int) -> int:
        """Reserves `count` consecutive offsets; returns the first."""
        queue_key = (topic, queue_id)
        first = self._next.get(queue_key, 0)
        self._next[queue_key] = first + count
        return first

    def set(self, topic: str, queue_id: int, next_offset: int) -> None:
        self._next[(topic, queue_id)] = next_offset

    def remove_topic(self, topic: str) -> None:
        for queue_key in [k for k in self._next if k[0] == topic]:
            del self._next[queue_key]


class CommitLog:
    """The append-only message log."""

    def __init__(
        self,
        directory: Path,
        *,
        file_size: int,
        clock: Clock,
        store_host: HostAddress,
        max_message_size: int,
        preallocate: bool = True,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        self.files = MappedFileQueue(directory, file_size, preallocate=preallocate, fs=fs)
        self.file_size = file_size
        self._clock = clock
        self.store_host = store_host
        self._store_host_packed = pack_host(store_host)
        self.max_message_size = max_message_size
        self.queue_offsets = QueueOffsetTable()
        # Store time of the newest record; the flush service copies it into the checkpoint.
        self.last_store_timestamp = 0

    # -- positions -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    # -- appending -------------------------------------------------------------------------
    def append(
        self,
        messages: Sequence[MessageToStore],
        *,
        store_timestamp: int | None = None,
        store_host: HostAddress | None = None,
        appended: list[AppendedRecord] | None = None,
    ) -> PutResult:
        """Appends one message, or a batch of messages of one topic and queue, as one unit.

        Returns a `PutResult` whose status says why nothing was written when it is not PUT_OK;
        on PUT_OK every message's `queue_offset` is filled in, and each record written is added
        to `appended` when given. `store_timestamp` and `store_host` replace the clock and this
        log's host: a replicated log writes the same bytes on every replica.
        """
        if not messages:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="an empty batch holds no message")
        first = messages[0]
        topic_fields = _topic_fields(first.topic)
        if topic_fields is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"illegal topic {first.topic!r}")
        topic_part, magic = topic_fields
        packed_store_host = self._store_host_packed if store_host is None else pack_host(store_host)
        max_body = self.max_message_size
        # First pass: validate and size everything, so a bad message writes nothing.
        prepared = []
        total = 0
        # The messages of a batch share their born host and flags: packed once per change.
        last_host: tuple[HostAddress, int] | None = None
        born_host = b""
        fixed = fixed_part(len(packed_store_host), len(packed_store_host))  # set by the first
        sys_flag = 0
        for message in messages:
            body = message.body
            if len(body) > max_body:
                return _body_too_big(len(body), max_body)
            text = message.properties
            if text and text[-1] != PROPERTY_SEPARATOR:
                # Recovery relies on the trailing separator to spot a torn tail (see dispatch).
                text += PROPERTY_SEPARATOR
            properties = text.encode()
            if len(properties) > MAX_PROPERTIES_LENGTH:
                return _properties_too_long(len(properties))
            if (message.born_host, message.sys_flag) != last_host:
                last_host = (message.born_host, message.sys_flag)
                born_host = _packed_host(message.born_host)
                fixed = fixed_part(len(born_host), len(packed_store_host))
                sys_flag = host_flags(message.sys_flag, len(born_host), len(packed_store_host))
            tail = topic_part + len(properties).to_bytes(2, "big") + properties
            size = fixed.size + len(body) + len(tail)
            prepared.append((message, born_host, fixed, tail, size, sys_flag, text))
            total += size
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                remark=f"batch of {total} bytes does not fit in a {self.file_size}-byte file",
            )
        mapped = self._file_with_room(total)
        queue_offset = self.queue_offsets.advance(first.topic, first.queue_id, len(messages))
        now = self._clock.now_ms() if store_timestamp is None else store_timestamp
        buf = mapped.buffer
        pos = mapped.wrote_position
        base = mapped.file_from_offset
        offsets = []
        next_queue_offset = queue_offset
        for message, born_host, fixed, tail, size, sys_flag, text in prepared:
            body = message.body
            message.queue_offset = next_queue_offset
            fixed.pack_into(
                buf,
                pos,
                size,
                magic,
                crc32(body) & 0x7FFFFFFF,
                message.queue_id,
                message.flag,
                next_queue_offset,
                base + pos,
                sys_flag,
                message.born_timestamp,
                born_host,
                now,
                packed_store_host,
                message.reconsume_times,
                message.prepared_transaction_offset,
                len(body),
            )
            start = pos + fixed.size
            end = start + len(body)
            buf[start:end] = body
            buf[end : end + len(tail)] = tail
            offsets.append(base + pos)
            if appended is not None:
                appended.append(
                    (base + pos, size, message.queue_id, next_queue_offset, sys_flag, text)
                )
            pos += size
            next_queue_offset += 1
        return self._appended(mapped, pos, now, offsets, queue_offset, total)

    def append_batch(
        self, batch: BatchToStore, *, appended: list[AppendedRecord] | None = None
    ) -> PutResult:
        """`append` for a batch send, each record written straight from its entry in the
        batch body: the same records, with no object per message on the way."""
        topic_fields = _topic_fields(batch.topic)
        if topic_fields is None:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark=f"illegal topic {batch.topic!r}")
        spans = batch.spans
        if not spans:
            return PutResult(PutStatus.MESSAGE_ILLEGAL, remark="an empty batch holds no message")
        topic_part, magic = topic_fields
        store_host = self._store_host_packed
        born_host = _packed_host(batch.born_host)
        fixed = fixed_part(len(born_host), len(store_host))
        fixed_size = fixed.size
        sys_flag = host_flags(batch.sys_flag, len(born_host), len(store_host))
        max_body = self.max_message_size
        # First pass: validate and size everything, so a bad entry writes nothing.
        tails = []
        total = 0
        for _flag, start, stop, text in spans:
            if stop - start > max_body:
                return _body_too_big(stop - start, max_body)
            if text and text[-1] != PROPERTY_SEPARATOR:
                text += PROPERTY_SEPARATOR  # as `append`: recovery relies on it
            properties = text.encode()
            if len(properties) > MAX_PROPERTIES_LENGTH:
                return _properties_too_long(len(properties))
            tail = topic_part + len(properties).to_bytes(2, "big") + properties
            tails.append((tail, text))
            total += fixed_size + stop - start + len(tail)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            return PutResult(
                PutStatus.MESSAGE_ILLEGAL,
                remark=f"batch of {total} bytes does not fit in a {self.file_size}-byte file",
            )
        mapped = self._file_with_room(total)
        queue_id = batch.queue_id
        queue_offset = self.queue_offsets.advance(batch.topic, queue_id, len(spans))
        now = self._clock.now_ms()
        buf = mapped.buffer
        pos = mapped.wrote_position
        base = mapped.file_from_offset
        source = memoryview(batch.body)
        born_timestamp = batch.born_timestamp
        reconsume_times = batch.reconsume_times
        pack = fixed.pack_into
        offsets = []
        next_queue_offset = queue_offset
        for (flag, start, stop, _text), (tail, text) in zip(spans, tails, strict=True):
            body = source[start:stop]
            size = fixed_size + stop - start + len(tail)
            pack(
                buf,
                pos,
                size,
                magic,
                crc32(body) & 0x7FFFFFFF,
                queue_id,
                flag,
                next_queue_offset,
                base + pos,
                sys_flag,
                born_timestamp,
                born_host,
                now,
                store_host,
                reconsume_times,
                0,
                stop - start,
            )
            body_end = pos + fixed_size + stop - start
            buf[pos + fixed_size : body_end] = body
            buf[body_end : pos + size] = tail
            offsets.append(base + pos)
            if appended is not None:
                appended.append((base + pos, size, queue_id, next_queue_offset, sys_flag, text))
            pos += size
            next_queue_offset += 1
        return self._appended(mapped, pos, now, offsets, queue_offset, total)

    def _appended(
        self,
        mapped: MappedFile,
        position: int,
        now: int,
        offsets: list[int],
        queue_offset: int,
        total: int,
    ) -> PutResult:
        """Publishes an append's records (readers and dispatch see up to `position`)."""
        mapped.wrote_position = position
        self.last_store_timestamp = now
        return PutResult(
            PutStatus.PUT_OK,
            physical_offsets=offsets,
            queue_offset=queue_offset,
            wrote_bytes=total,
            store_timestamp=now,
        )

    def _file_with_room(self, size: int) -> MappedFile:
        """The last file if `size` bytes plus the minimal filler fit, else the next one."""
        mapped = self.files.last_file_for_write()
        free = mapped.free_bytes
        if size + END_FILE_MIN_BLANK_LENGTH > free:
            # RocketMQ's END_OF_FILE: fill the rest with a blank record and move on.
            encode_blank(mapped.buffer, mapped.wrote_position, free)
            mapped.wrote_position = mapped.file_size
            mapped = self.files.last_file_for_write()
        self.files.warm_ahead(mapped)
        return mapped

    def append_raw(self, offset: int, data: bytes | memoryview) -> None:
        """Appends bytes that another replica encoded, at exactly `offset`.

        The data must continue the log (offset == max_offset) and respect file boundaries as
        the source wrote them (same file size): replicas copy files byte for byte.

        Raises:
            ValueError: the offset does not continue the log or the data crosses a file end.
        """
        if not self.files.files and offset:
            self.files.reset_start(offset)
        if offset != self.max_offset:
            raise ValueError(
                f"raw append at {offset} does not continue the log at {self.max_offset}"
            )
        view = memoryview(data)
        while view:
            mapped = self.files.last_file_for_write(offset)
            n = min(len(view), mapped.free_bytes)
            mapped.write(view[:n])
            view = view[n:]

    def truncate(self, offset: int) -> None:
        """Cuts the log back to `offset` (which must be a record boundary)."""
        log.info("truncating commit log from %d to %d", self.max_offset, offset)
        self.files.truncate(offset)

    # -- reading ---------------------------------------------------------------------------
    def read(self, offset: int, size: int) -> bytes | None:
        """A copy of `size` bytes at `offset`, or None when they are not (all) in the log."""
        mapped = self.files.find(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        if position + size > mapped.wrote_position:
            return None
        return mapped.read(position, size)

    def read_record(self, offset: int) -> bytes | None:
        """The whole stored record at `offset`, or None when no record starts there."""
        mapped = self.files.find(offset)
        if mapped is None:
            return None
        position = offset - mapped.file_from_offset
        if position + 8 > mapped.wrote_position:
            return None
        size, _ = peek_size_and_magic(mapped.buffer, position)
        if size <= 0 or position + size > mapped.wrote_position:
            return None
        return mapped.read(position, size)

    def note_read(self, start: int, end: int) -> None:
        """Tells the file table that a reader mapped [start, end), so that pages a reader far
        behind maps again are let go of again (`MappedFileQueue.release_pages`)."""
        files = self.files
        if start < files.released_to:
            files.note_read_back(start, end)

    def view_from(self, offset: int) -> tuple[memoryview, int] | None:
        """A view of the written bytes of the file holding `offset`, and `offset`'s position.

        The dispatcher and replication read through this without copying.
        """
        mapped = self.files.find(offset)
        if mapped is None:
            return None
        return mapped.view(0, mapped.wrote_position), offset - mapped.file_from_offset

    def next_file_offset(self, offset: int) -> int:
        """The start of the file after the one holding `offset` (to skip a blank filler)."""
        return offset + self.file_size - offset % self.file_size

    def close(self) -> None:
        self.files.close()
