"""ConsumeQueue: the per-(topic, queueId) index into the CommitLog.

Entry `i` of a queue is 20 bytes at byte `i * 20` (`ConsumeQueue.CQ_STORE_UNIT_SIZE`): the
CommitLog offset (long), the record size (int) and the tag hash code (long). Files are named by
their start byte offset and hold a whole number of entries, so an entry never spans files.

Invariants:
- entries are written in queue-offset order by the dispatcher; `put` of an entry that is
  already there is a no-op, so re-dispatch after a crash is safe;
- a valid entry has a size > 0; the first zero entry marks the end during recovery;
- `min_offset` is the first entry whose message is still in the CommitLog (after retention).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from pocketmq.common.constants import CONSUME_QUEUE_UNIT_SIZE
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, Buffer, FileSystem
from pocketmq.store.mapped_file import MappedFileQueue

log = logging.getLogger(__name__)

UNIT: Final = CONSUME_QUEUE_UNIT_SIZE
ENTRY: Final = struct.Struct(">qiq")
"""An entry: CommitLog offset, record size, tag code."""
_ZERO_CHUNK: Final = bytes(64 * 1024)


class ConsumeQueue:
    """One logical queue's index of CommitLog positions."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        queue_id: int,
        *,
        file_size: int,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        if file_size % UNIT:
            raise ValueError(f"consume queue file size {file_size} is not a multiple of {UNIT}")
        self.topic = topic
        self.queue_id = queue_id
        self.files = MappedFileQueue(directory, file_size, derived=True, fs=fs)
        self.file_size = file_size
        self._min_logic_offset = 0  # in bytes
        # CommitLog end (offset + size) of the newest entry: where re-dispatch may resume.
        self.max_physical_end = 0

    # -- positions (in entries) ------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return max(self._min_logic_offset, self.files.min_offset) // UNIT

    @property
    def max_offset(self) -> int:
        """The queue offset the next message will get (one past the last entry)."""
        return self.files.max_offset // UNIT

    # -- loading and recovery --------------------------------------------------------------
    def load(self) -> None:
        self.files.load()

    def recover(self) -> None:
        """Finds the real end: just past the last entry with any non-zero byte.

        Entries are written in order into zeroed files, so whatever follows the last written
        entry is zero; blank entries inside the queue (gaps) do not end it.
        """
        files = self.files.files
        end = 0
        index = len(files) - 1
        while index >= 0:
            used = _written_length(files[index].buffer)
            if used:
                end = -(-used // UNIT) * UNIT
                break
            index -= 1
        if index < 0:
            self.files.truncate(self.files.min_offset)
            return
        mapped = files[index]
        mapped.wrote_position = end
        offset, size, _ = ENTRY.unpack_from(mapped.buffer, end - UNIT)
        self.max_physical_end = offset + size
        for later in files[index + 1 :]:
            later.wrote_position = 0
        self.files.truncate(mapped.file_from_offset + end)

    def truncate_entries(self, count: int) -> None:
        """Keeps the entries before queue offset `count`."""
        self._cut_to(min(count * UNIT, self.files.max_offset))

    def truncate_to_physical(self, commit_log_max: int) -> None:
        """Drops entries pointing at or beyond `commit_log_max` (the recovered CommitLog end)."""
        cut_to = self.files.max_offset
        while cut_to > self.files.min_offset:
            offset, size, _ = self._entry_at(cut_to - UNIT)
            if offset + size <= commit_log_max:
                break
            cut_to -= UNIT
        self._cut_to(cut_to)

    def _cut_to(self, end: int) -> None:
        """Cuts the queue at byte `end` (durably) and finds its new last entry."""
        if end < self.files.max_offset:
            log.info(
                "consume queue %s/%d truncated from %d to %d entries",
                self.topic,
                self.queue_id,
                self.max_offset,
                end // UNIT,
            )
            self.files.truncate(end)
        self.max_physical_end = 0
        if end > self.files.min_offset:
            offset, size, _ = self._entry_at(end - UNIT)
            self.max_physical_end = offset + size

    # -- writing ---------------------------------------------------------------------------
    def put(
        self,
        queue_offset: int,
        physical_offset: int,
        size: int,
        tags_code: int,
        *,
        overwrite: bool = False,
    ) -> None:
        """Writes the entry for `queue_offset`; an entry already present is left as it is,
        or with `overwrite` (repair after an unclean stop) written again."""
        position = queue_offset * UNIT
        last = self.files.files[-1] if self.files.files else None
        if last is not None and position == last.wrote_offset and not last.is_full:
            # The common case: the next entry of the last file.
            ENTRY.pack_into(last.buffer, last.wrote_position, physical_offset, size, tags_code)
            last.wrote_position += UNIT
            self.max_physical_end = physical_offset + size
            return
        end = self.files.max_offset
        if position < end:
            if overwrite and position >= self.files.min_offset:
                mapped = self.files.find(position)
                assert mapped is not None
                within = position - mapped.file_from_offset
                ENTRY.pack_into(mapped.buffer, within, physical_offset, size, tags_code)
            return
        if not self.files.files and position:
            self.files.reset_start(position)
            self._min_logic_offset = end = position
        if position > end:
            log.warning(
                "consume queue %s/%d: gap from entry %d to %d filled with blanks",
                self.topic,
                self.queue_id,
                end // UNIT,
                queue_offset,
            )
            while end < position:
                mapped = self.files.last_file_for_write()
                n = min(position - end, mapped.free_bytes)
                mapped.write(bytes(n))
                end += n
        mapped = self.files.last_file_for_write()
        ENTRY.pack_into(mapped.buffer, mapped.wrote_position, physical_offset, size, tags_code)
        mapped.wrote_position += UNIT
        self.max_physical_end = physical_offset + size

    def put_run(self, first: int, entries: list[bytes], max_physical_end: int) -> None:
        """`put` for the packed entries (`ENTRY`) of consecutive queue offsets from `first`:
        written with one copy when they continue the last file and fit in it, one by one
        otherwise. `max_physical_end`: where the last one's record ends in the CommitLog."""
        last = self.files.files[-1] if self.files.files else None
        size = len(entries) * UNIT
        if last is not None and first * UNIT == last.wrote_offset and size <= last.free_bytes:
            position = last.wrote_position
            last.buffer[position : position + size] = b"".join(entries)
            last.wrote_position = position + size
            self.max_physical_end = max_physical_end
            return
        for number, (offset, length, tags_code) in enumerate(ENTRY.iter_unpack(b"".join(entries))):
            self.put(first + number, offset, length, tags_code)

    # -- reading ---------------------------------------------------------------------------
    def _entry_at(self, byte_offset: int) -> tuple[int, int, int]:
        mapped = self.files.find(byte_offset)
        assert mapped is not None
        offset, size, tags = ENTRY.unpack_from(mapped.buffer, byte_offset - mapped.file_from_offset)
        return offset, size, tags

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(CommitLog offset, size, tag code) of one entry, or None outside the queue."""
        if not self.min_offset <= queue_offset < self.max_offset:
            return None
        return self._entry_at(queue_offset * UNIT)

    def entries(self, queue_offset: int, max_count: int) -> Iterator[tuple[int, int, int, int]]:
        """(queue offset, CommitLog offset, size, tag code) from `queue_offset` on, within one file.

        Stops at the end of the file holding `queue_offset`; callers loop for more.
        """
        for i, (offset, size, tags) in enumerate(self.entry_run(queue_offset, max_count)):
            yield queue_offset + i, offset, size, tags

    def entry_run(self, queue_offset: int, max_count: int) -> Iterator[tuple[int, int, int]]:
        """(CommitLog offset, size, tag code) of the entries from `queue_offset` on, within one
        file (the queue offsets count on from `queue_offset`): `entries` without a generator's
        step an entry, for reads by queue."""
        start = queue_offset * UNIT
        mapped = self.files.find(start)
        if mapped is None:
            return iter(())
        position = start - mapped.file_from_offset
        end = min(mapped.wrote_position, position + max_count * UNIT)
        return ENTRY.iter_unpack(mapped.view(position, end - position))

    # -- retention -------------------------------------------------------------------------
    def delete_expired(self, commit_log_min_offset: int) -> int:
        """Deletes files whose entries all point below the CommitLog's min offset.

        Also moves `min_offset` to the first entry still backed by the CommitLog.
        """
        deleted = 0
        files = self.files.files
        while len(files) > 1:
            first = files[0]
            offset, size, _ = ENTRY.unpack_from(first.buffer, first.file_size - UNIT)
            if offset + size > commit_log_min_offset:
                break
            self.files.delete_first()
            deleted += 1
        self._correct_min_offset(commit_log_min_offset)
        return deleted

    def _correct_min_offset(self, commit_log_min_offset: int) -> None:
        if not self.files.files:
            return
        first = self.files.files[0]
        low, high = 0, first.wrote_position // UNIT
        # Entries point at increasing CommitLog offsets: binary search the first one kept.
        while low < high:
            mid = (low + high) // 2
            offset, size, _ = ENTRY.unpack_from(first.buffer, mid * UNIT)
            if offset < commit_log_min_offset or size == 0:
                low = mid + 1
            else:
                high = mid
        self._min_logic_offset = first.file_from_offset + low * UNIT

    def flush(self) -> None:
        """Makes written entries durable. Blocking."""
        self.files.flush()

    def close(self) -> None:
        self.files.close()

    def destroy(self) -> None:
        for mapped in list(self.files.files):
            mapped.destroy()
        self.files.files.clear()


def _written_length(buffer: Buffer) -> int:
    """Just past the last byte of `buffer` that is not zero.

    Searched from the end in chunks, each copied and compared with zeros at memcmp speed: a
    queue file is mostly the zeros after its last entry (6 MB for RocketMQ's default), and a
    broker loads every queue's last file at start. `rstrip` over a whole copy of the file took
    10 ms a queue in memory; this takes 0.5 ms once the pages are mapped. Mapping the zero
    pages of the file's holes still costs about 8 ms a queue on first touch.
    """
    end = len(buffer)
    while end > 0:
        start = max(0, end - len(_ZERO_CHUNK))
        chunk = buffer[start:end]
        if chunk != _ZERO_CHUNK[: end - start]:
            return start + len(chunk.rstrip(b"\0"))
        end = start
    return 0
