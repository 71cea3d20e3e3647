"""The timer log: an append-only run of fixed-size entries, one per timer message enqueued.

Each entry is 48 bytes, big-endian:

    magic (short)          ENTRY_MAGIC
    flags (short)          FLAG_DELETE, FLAG_ROLL, FLAG_IMMEDIATE
    prev_pos (long)        the previous entry of the same slot, or -1 (the slot's chain)
    time_ms (long)         the slot time the entry is linked into
    commit_offset (long)   where the timer message is in the CommitLog
    commit_size (int)      its size there
    queue_offset (long)    its offset in the timer topic's ConsumeQueue
    key_hash (int)         CRC32 of its delete key (`messages.delete_key`), for recall
    crc (int)              CRC32 of the 44 bytes before it

Entries live in mapped files named by their start offset (`MappedFileQueue`); an entry never
spans two files, so the last `file_size % 48` bytes of a file stay unused. A position is the
logical offset of an entry. The CRC lets a scan after a crash find the end of what was written
(a torn or never-written entry fails it), and `queue_offset` tells recovery how far the timer
topic was enqueued, so no timer is enqueued twice or lost.

`FLAG_IMMEDIATE` entries record timers that were already due when enqueued and were delivered
at once; they are in no chain. Their only purpose is that `queue_offset` record.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.store.mapped_file import MappedFile, MappedFileQueue

ENTRY_SIZE: Final = 48
ENTRY_MAGIC: Final = 0x71E7
FLAG_DELETE: Final = 0x1
"""A delete marker (recall): the entry's message names another message not to deliver."""
FLAG_ROLL: Final = 0x2
"""Linked into an earlier slot than its message's time: at that slot it goes round again."""
FLAG_IMMEDIATE: Final = 0x4
"""Delivered when enqueued (its time had passed); linked into no slot."""
_ENTRY: Final = struct.Struct(">HHqqqiqII")
_CRC_COVERED: Final = ENTRY_SIZE - 4
_SCAN_CHUNK_ENTRIES: Final = 4096


@dataclass(frozen=True, slots=True)
class TimerEntry:
    """One decoded entry; see the module docstring."""

    flags: int
    prev_pos: int
    time_ms: int
    commit_offset: int
    commit_size: int
    queue_offset: int
    key_hash: int

    @property
    def is_delete(self) -> bool:
        return bool(self.flags & FLAG_DELETE)

    @property
    def is_roll(self) -> bool:
        return bool(self.flags & FLAG_ROLL)

    @property
    def is_immediate(self) -> bool:
        return bool(self.flags & FLAG_IMMEDIATE)


def encode_entry(entry: TimerEntry) -> bytes:
    """The 48 bytes of `entry`, CRC included."""
    buffer = bytearray(ENTRY_SIZE)
    pack_entry_into(buffer, 0, entry)
    return bytes(buffer)


def pack_entry_into(buffer: bytearray | mmap.mmap, offset: int, entry: TimerEntry) -> None:
    """Writes `entry` with its CRC at `buffer[offset:]` (a bytearray or an mmap)."""
    head = _ENTRY.pack(
        ENTRY_MAGIC,
        entry.flags,
        entry.prev_pos,
        entry.time_ms,
        entry.commit_offset,
        entry.commit_size,
        entry.queue_offset,
        entry.key_hash,
        0,
    )[:_CRC_COVERED]
    data = head + zlib.crc32(head).to_bytes(4, "big")
    buffer[offset : offset + ENTRY_SIZE] = data


def decode_entry(data: bytes | bytearray | mmap.mmap, offset: int = 0) -> TimerEntry | None:
    """The entry at `data[offset:]`, or None when its magic or CRC is wrong (torn, unwritten)."""
    fields = _ENTRY.unpack_from(data, offset)
    if fields[0] != ENTRY_MAGIC:
        return None
    if zlib.crc32(data[offset : offset + _CRC_COVERED]) != fields[8]:
        return None
    return TimerEntry(*fields[1:8])


class TimerLog:
    """The entries of one timer log directory."""

    def __init__(self, directory: Path, file_size: int, *, fs: FileSystem = OS_FILE_SYSTEM) -> None:
        if file_size < ENTRY_SIZE:
            raise ValueError(f"timer log file size {file_size} is below one entry")
        self.files = MappedFileQueue(directory, file_size, fs=fs)
        self.file_size = file_size
        # The part of each file that holds entries; the rest of the file stays unused.
        self.usable_bytes = file_size - file_size % ENTRY_SIZE

    # -- positions -------------------------------------------------------------------------
    @property
    def min_position(self) -> int:
        return self.files.min_offset

    @property
    def end_position(self) -> int:
        """Where the next entry goes (or the end of a full file: the next one starts after)."""
        return self.files.max_offset

    def _file(self, position: int) -> MappedFile | None:
        return self.files.find(position)

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Opens the files on disk; each counts as full until `set_end` or `recover_end`."""
        self.files.load()

    def set_end(self, position: int) -> bool:
        """Takes `position` as the end of the log, as recorded at a clean stop.

        Returns:
            False when `position` is not a possible end of these files (then scan instead).
        """
        files = self.files.files
        if not files:
            return position == 0
        last = files[-1]
        within = position - last.file_from_offset
        if not 0 <= within <= self.file_size or (within % ENTRY_SIZE and within != self.file_size):
            return False
        if within > self.usable_bytes:
            within = self.file_size
        last.wrote_position = within
        return True

    def recover_end(self) -> int:
        """Scans for the first entry that is not valid, cuts the log there, and returns it.

        Bytes from the cut to the first all-zero entry are zeroed, so a later scan never
        takes stale entries after a cut for new ones. Later files are deleted.
        """
        end = self.files.min_offset
        for position, _ in self.scan(self.files.min_offset):
            end = position + ENTRY_SIZE
        self._cut(end)
        return end

    def _cut(self, end: int) -> None:
        keep: list[MappedFile] = []
        for mapped in self.files.files:
            start = mapped.file_from_offset
            if start > end or (start == end and keep):
                mapped.destroy()
                continue
            if start <= end <= start + self.file_size:
                within = end - start
                if self._zero_stale(mapped, within):
                    mapped.sync()  # stale entries must not come back after a power loss
                mapped.wrote_position = self.file_size if within >= self.usable_bytes else within
            keep.append(mapped)
        if len(keep) < len(self.files.files):
            self.files.fs.sync_directory(self.files.directory)
        self.files.files = keep

    def _zero_stale(self, mapped: MappedFile, within: int) -> bool:
        """Zeroes entries from `within` to the first all-zero one; True if any was zeroed."""
        zero = bytes(ENTRY_SIZE)
        buffer = mapped.buffer
        start = within
        while within + ENTRY_SIZE <= self.usable_bytes:
            if buffer[within : within + ENTRY_SIZE] == zero:
                break
            buffer[within : within + ENTRY_SIZE] = zero
            within += ENTRY_SIZE
        return within > start

    # -- entries ---------------------------------------------------------------------------
    def append(self, entry: TimerEntry) -> int:
        """Writes `entry` at the end; returns its position."""
        mapped = self.files.last_file_for_write()
        if mapped.wrote_position + ENTRY_SIZE > self.usable_bytes:
            mapped.wrote_position = self.file_size  # full: the next append rolls over
            mapped = self.files.last_file_for_write()
        position = mapped.wrote_position
        pack_entry_into(mapped.buffer, position, entry)
        mapped.wrote_position = position + ENTRY_SIZE
        return mapped.file_from_offset + position

    def read(self, position: int) -> TimerEntry | None:
        """The valid entry at `position`, or None (outside the log, unwritten, corrupt)."""
        mapped = self._file(position)
        if mapped is None:
            return None
        within = position - mapped.file_from_offset
        if within % ENTRY_SIZE or within + ENTRY_SIZE > min(
            mapped.wrote_position, self.usable_bytes
        ):
            return None
        return decode_entry(mapped.buffer, within)

    def rewrite(self, position: int, entry: TimerEntry) -> None:
        """Replaces the entry at `position` (recovery relinks chains and re-rolls entries)."""
        mapped = self._file(position)
        assert mapped is not None, "rewrite of a position outside the log"
        pack_entry_into(mapped.buffer, position - mapped.file_from_offset, entry)

    def scan(self, start: int) -> Iterator[tuple[int, TimerEntry]]:
        """Valid entries from `start` on, in order, up to the first invalid one."""
        for mapped in list(self.files.files):
            base = mapped.file_from_offset
            if base + self.file_size <= start:
                continue
            within = max(start - base, 0)
            limit = min(mapped.wrote_position, self.usable_bytes)
            buffer = mapped.buffer
            while within + ENTRY_SIZE <= limit:
                chunk_end = min(limit, within + _SCAN_CHUNK_ENTRIES * ENTRY_SIZE)
                chunk = buffer[within:chunk_end]
                for index in range(0, len(chunk) - ENTRY_SIZE + 1, ENTRY_SIZE):
                    entry = decode_entry(chunk, index)
                    if entry is None:
                        return
                    yield base + within + index, entry
                within = chunk_end
            if limit < self.usable_bytes and mapped.wrote_position < self.file_size:
                return  # this file is not full, so nothing follows it

    # -- retention and durability ----------------------------------------------------------
    def file_count(self) -> int:
        return len(self.files.files)

    def first_file_range(self) -> tuple[int, int] | None:
        """(start, end) positions of the oldest file, or None without files."""
        if not self.files.files:
            return None
        first = self.files.files[0]
        return first.file_from_offset, first.file_from_offset + self.file_size

    def delete_first_file(self) -> None:
        """Deletes the oldest file (every entry in it is delivered); never the last one."""
        assert len(self.files.files) > 1, "the file being written is never deleted"
        self.files.delete_first()

    def flush(self) -> None:
        """Makes every written entry durable, then lets go of their pages. Blocking.

        Entries are read again only when their slot is due, hours later perhaps, so the pages
        of durable entries are dropped from this process's mappings (`MADV_DONTNEED`): they
        stay in the page cache and on disk, and a read maps them again. Without this the
        process's resident memory would grow by 48 bytes per pending timer.
        """
        self.files.flush()
        for mapped in list(self.files.files):
            mapped.drop_pages(0, mapped.flushed_position)

    def close(self) -> None:
        self.files.close()
