"""One index file: RocketMQ's IndexFile layout, byte for byte (big-endian, like Java's ByteBuffer).

A file is a 40-byte header (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset: longs;
hashSlotCount, indexCount: ints), then `maxHashSlotNum` 4-byte slots, then `maxIndexNum`
20-byte entries (key hash int, CommitLog offset long, seconds since beginTimestamp int,
previous entry number int). A slot holds the number of the newest entry whose key hashes to
it; entries chain backwards through `previous`. Entry 0 is never used, so 0 means "none" and
`indexCount` starts at 1. Files are created sparse (`ftruncate`) and mapped with `mmap`.

The key hash is |Java `String.hashCode`| (0 for Integer.MIN_VALUE) and the slot is
`hash % maxHashSlotNum`. Hashes collide, and entry times are stored in whole seconds, so a
select returns *candidates*: every entry whose hash matches and whose recorded second overlaps
the asked range.

Invariants:
- entries are appended in CommitLog order, so offsets only grow within a file;
- an entry, then the header that counts it, then the slot that links it are written in that
  order, so a process killed in between leaves at worst an unlinked entry, never a slot or a
  chain pointing at an entry the header does not count;
- readers trust no number read from a file: slot values and links outside `1..indexCount-1`,
  or links that do not go strictly backwards, end a chain.

`IndexFileError` (a size or header that cannot be right) is raised only here; the set of files,
their names, rolling and recovery belong to `index.py`. `flush` syncs a file written since its
last flush, or opened from disk (after a crash its pages may not be on disk yet); it never
touches the mapping, so a flush thread may call it while the event loop writes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from pocketmq.common.java_hash import java_string_hash, java_string_hash_concat_unsigned
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file

HEADER_SIZE: Final = 40
SLOT_SIZE: Final = 4
ENTRY_SIZE: Final = 20
JAVA_INT_MAX: Final = (1 << 31) - 1
_JAVA_INT_MIN: Final = -(1 << 31)
_HEADER: Final = struct.Struct(">qqqqii")
_SLOT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">iqii")
# Entries read per chunk when truncation looks for the slots it must repair: bounds the copy.
_TRUNCATE_CHUNK_ENTRIES: Final = 1 << 16


def key_hash(key: str) -> int:
    """RocketMQ's index hash: |String.hashCode()|, with Integer.MIN_VALUE mapped to 0."""
    return abs_hash(java_string_hash(key))


def index_key_hash(prefix_hash: int, key: str) -> int:
    """`key_hash(prefix + key)` from `java_string_hash(prefix)`: the dispatcher's hot path,
    where the prefix is a message's `topic#`."""
    h = java_string_hash_concat_unsigned(prefix_hash, key)
    # |h| of the signed int h stands for, with Integer.MIN_VALUE mapped to 0 (`abs_hash`).
    if h < 0x80000000:
        return h
    return 0 if h == 0x80000000 else 0x100000000 - h


def abs_hash(h: int) -> int:
    """|h| of a Java int hash, with Integer.MIN_VALUE mapped to 0 (as Java's `Math.abs` would
    leave it negative)."""
    return 0 if h == _JAVA_INT_MIN else abs(h)


def index_file_size(max_hash_slot_num: int, max_index_num: int) -> int:
    """Bytes of one index file: header, slots, entries."""
    return HEADER_SIZE + max_hash_slot_num * SLOT_SIZE + max_index_num * ENTRY_SIZE


class IndexFileError(ValueError):
    """An index file whose size or header cannot be right."""


class IndexFile:
    """One index file: a hash table of chains of (key hash, CommitLog offset, time) entries.

    Header fields are plain attributes, mirrored into the file on every put; treat them as
    read-only. `begin_timestamp`/`begin_phy_offset` are those of the first entry,
    `end_phy_offset` that of the last, `end_timestamp` the newest store time seen.
    """

    def __init__(
        self,
        path: Path,
        *,
        slots: int,
        max_index: int,
        create: bool,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        """Creates (sparse, all zero) or opens one index file.

        Prefer `IndexFile.create` and `IndexFile.open`.

        Raises:
            IndexFileError: opening a file whose size or header does not fit.
            OSError: the file cannot be created, opened or mapped.
        """
        self.path = path
        self.slots = slots
        self.max_index = max_index
        self.size = index_file_size(slots, max_index)
        self._entries_pos = HEADER_SIZE + slots * SLOT_SIZE
        self._fs = fs
        if create:
            create_sized_file(fs, path, self.size)
        try:
            self._region = fs.map(path, self.size)
        except ValueError as exc:
            raise IndexFileError(
                f"{path.name}: {exc} for maxHashSlotNum={slots}, maxIndexNum={max_index}"
            ) from exc
        self._buffer = self._region.buffer
        self._closed = False
        # A file opened from disk counts as unsynced: a crash may have left its pages unwritten.
        self._dirty = True
        header: tuple[int, int, int, int, int, int] = _HEADER.unpack_from(self._buffer, 0)
        (
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        ) = header
        if create:
            self.index_count = 1
            self._write_header()
            return
        problem = self._header_problem()
        if problem:
            self.close()
            raise IndexFileError(f"{path.name}: {problem}")
        # A usage statistic only (RocketMQ never reads it back): keep it in range, not reject.
        self.hash_slot_count = min(max(self.hash_slot_count, 0), slots)

    @classmethod
    def create(
        cls, path: Path, *, slots: int, max_index: int, fs: FileSystem = OS_FILE_SYSTEM
    ) -> IndexFile:
        """Creates an empty file at `path` (replacing any file there), durably."""
        return cls(path, slots=slots, max_index=max_index, create=True, fs=fs)

    @classmethod
    def open(
        cls, path: Path, *, slots: int, max_index: int, fs: FileSystem = OS_FILE_SYSTEM
    ) -> IndexFile:
        """Opens an existing file.

        Raises:
            IndexFileError: its size or header does not fit; the caller sets it aside.
        """
        return cls(path, slots=slots, max_index=max_index, create=False, fs=fs)

    def _header_problem(self) -> str:
        count = self.index_count
        if not 1 <= count <= self.max_index:
            return f"indexCount {count} outside 1..{self.max_index}"
        if count > 1 and not 0 <= self.begin_phy_offset <= self.end_phy_offset:
            return (
                f"offsets go backwards: beginPhyOffset {self.begin_phy_offset}, "
                f"endPhyOffset {self.end_phy_offset}"
            )
        return ""

    # -- state -----------------------------------------------------------------------------
    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_index

    @property
    def is_empty(self) -> bool:
        return self.index_count <= 1

    @property
    def is_closed(self) -> bool:
        return self._closed

    def _write_header(self) -> None:
        _HEADER.pack_into(
            self._buffer,
            0,
            self.begin_timestamp,
            self.end_timestamp,
            self.begin_phy_offset,
            self.end_phy_offset,
            self.hash_slot_count,
            self.index_count,
        )

    # -- writing ---------------------------------------------------------------------------
    def put_key(self, key: str, phys_offset: int, store_timestamp_ms: int) -> bool:
        """Adds one key of the message at `phys_offset`.

        Returns:
            False when the file is full (nothing written): the caller rolls to a new file.
        """
        return self.put_hash(key_hash(key), phys_offset, store_timestamp_ms)

    def put_hash(self, h: int, phys_offset: int, store_timestamp_ms: int) -> bool:
        """Adds one key by its `key_hash`; False when the file is full (nothing written)."""
        return self.put_entries(((h, phys_offset, store_timestamp_ms),)) == 1

    def put_entries(self, entries: Sequence[tuple[int, int, int]], start: int = 0) -> int:
        """Adds `entries[start:]`, each (key hash, CommitLog offset, store time ms), in
        CommitLog order: the dispatcher's bulk path, one header write for all of them.

        The entries are written first, then the header that counts them,
        then the slots that point at them: a process killed in between leaves a file whose
        header and slots never name an entry that is not there.

        Returns:
            How many fit; the caller puts the rest in a new file.
        """
        buf = self._buffer
        number = first = self.index_count
        count = min(len(entries) - start, self.max_index - number)
        if count <= 0:
            return 0
        if number == 1:
            _, self.begin_phy_offset, self.begin_timestamp = entries[start]
        begin_ms = self.begin_timestamp
        slots = self.slots
        entry_pos = self._entries_pos + number * ENTRY_SIZE
        pack_entry = _ENTRY.pack_into
        unpack_slot = _SLOT.unpack_from
        # Slot -> newest entry in it so far: entries of this call chain through it, not
        # through what the buffer holds.
        links: dict[int, int] = {}
        new_slots = 0
        end_ms = self.end_timestamp
        phys_offset = 0
        for h, phys_offset, store_ms in entries[start : start + count]:
            slot_pos = HEADER_SIZE + (h % slots) * SLOT_SIZE
            previous = links.get(slot_pos)
            if previous is None:
                previous = unpack_slot(buf, slot_pos)[0]
                if not 0 < previous < first:
                    previous = 0
                    new_slots += 1
            diff_s = (store_ms - begin_ms) // 1000
            if not 0 <= diff_s <= JAVA_INT_MAX:
                diff_s = 0 if diff_s < 0 else JAVA_INT_MAX
            pack_entry(buf, entry_pos, h, phys_offset, diff_s, previous)
            entry_pos += ENTRY_SIZE
            links[slot_pos] = number
            number += 1
            if store_ms > end_ms:
                end_ms = store_ms
        self.index_count = number
        self.hash_slot_count += new_slots
        self.end_phy_offset = phys_offset
        self.end_timestamp = end_ms
        self._write_header()
        pack_slot = _SLOT.pack_into
        for slot_pos, linked in links.items():
            pack_slot(buf, slot_pos, linked)
        self._dirty = True
        return count

    # -- reading ---------------------------------------------------------------------------
    def _entry(self, number: int) -> tuple[int, int, int, int]:
        h, phys, diff_s, previous = _ENTRY.unpack_from(
            self._buffer, self._entries_pos + number * ENTRY_SIZE
        )
        return h, phys, diff_s, previous

    def time_overlaps(self, begin_ms: int, end_ms: int) -> bool:
        """Whether this file may hold entries stored within `[begin_ms, end_ms]`."""
        return (
            not self.is_empty and self.begin_timestamp <= end_ms and self.end_timestamp >= begin_ms
        )

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries for `key` stored within `[begin_ms, end_ms]`.

        Returns:
            At most `max_num` offsets, newest first. Candidates: entries whose key hash
            matches and whose recorded second overlaps the range; the caller checks the real
            key of each message.
        """
        return self.select_hash(key_hash(key), max_num, begin_ms, end_ms)

    def select_hash(self, h: int, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """`select` by the key's `key_hash`."""
        found: list[int] = []
        if max_num <= 0:
            return found
        buf = self._buffer
        entries_pos = self._entries_pos
        count = self.index_count
        begin_timestamp = self.begin_timestamp
        number = _SLOT.unpack_from(buf, HEADER_SIZE + (h % self.slots) * SLOT_SIZE)[0]
        # Each link must go strictly backwards, so the walk ends within `count` steps even in a
        # corrupt file.
        while 0 < number < count:
            entry_hash, phys, diff_s, previous = _ENTRY.unpack_from(
                buf, entries_pos + number * ENTRY_SIZE
            )
            if entry_hash == h:
                stamp_ms = begin_timestamp + diff_s * 1000
                # Stored times are whole seconds: the real time is in [stamp, stamp + 999].
                if stamp_ms + 999 >= begin_ms and stamp_ms <= end_ms:
                    found.append(phys)
                    if len(found) >= max_num:
                        break
            if previous >= number:
                break
            number = previous
        return found

    # -- truncation ------------------------------------------------------------------------
    def truncate(self, phys_offset: int) -> None:
        """Drops every entry whose CommitLog offset is >= `phys_offset`, repairing chains.

        The entries dropped are left as they are (never read again: readers stop at
        indexCount, and no slot or kept link points at them); new puts overwrite them.
        """
        count = self.index_count
        low, high = 1, count
        while low < high:  # entries are in CommitLog order: find the first to drop
            mid = (low + high) // 2
            if self._entry(mid)[1] < phys_offset:
                low = mid + 1
            else:
                high = mid
        keep = low
        if keep >= count:
            return
        for slot in self._slots_of_entries(keep, count):
            self._repair_slot(slot, keep, count)
        self.index_count = keep
        if keep > 1:
            _, phys, diff_s, _ = self._entry(keep - 1)
            self.end_phy_offset = phys
            # The last kept entry's real time is at most its recorded second's end.
            stamp_ms = self.begin_timestamp + diff_s * 1000
            self.end_timestamp = min(self.end_timestamp, stamp_ms + 999)
        else:
            self.begin_timestamp = self.end_timestamp = 0
            self.begin_phy_offset = self.end_phy_offset = 0
        self._write_header()
        self._dirty = True

    def _slots_of_entries(self, first: int, stop: int) -> set[int] | range:
        """The slots that entries `first..stop-1` hash to (every slot when that is cheaper)."""
        if stop - first >= self.slots:
            return range(self.slots)
        slots = self.slots
        touched: set[int] = set()
        for chunk_first in range(first, stop, _TRUNCATE_CHUNK_ENTRIES):
            chunk_stop = min(chunk_first + _TRUNCATE_CHUNK_ENTRIES, stop)
            start = self._entries_pos + chunk_first * ENTRY_SIZE
            end = self._entries_pos + chunk_stop * ENTRY_SIZE
            touched.update(h % slots for h, _, _, _ in _ENTRY.iter_unpack(self._buffer[start:end]))
        return touched

    def _repair_slot(self, slot: int, keep: int, count: int) -> None:
        """Points `slot` at its newest entry below `keep` (0 when none)."""
        slot_pos = HEADER_SIZE + slot * SLOT_SIZE
        head = _SLOT.unpack_from(self._buffer, slot_pos)[0]
        number = head
        while keep <= number < count:
            previous = self._entry(number)[3]
            if previous >= number:  # a corrupt link: drop the rest of the chain
                previous = 0
            number = previous
        if not 0 < number < keep:
            number = 0
        if number != head:
            _SLOT.pack_into(self._buffer, slot_pos, number)
            if number == 0 and 0 < head < count and self.hash_slot_count > 0:
                self.hash_slot_count -= 1

    # -- durability and life cycle ---------------------------------------------------------
    def flush(self) -> None:
        """Makes the file durable if it was written since the last flush. Blocking.

        Safe to call from a flush thread while the event loop writes: it only syncs the fd.
        """
        if not self._dirty or self._closed:
            return
        self._dirty = False  # cleared first: a write racing with the sync marks it again
        try:
            self._region.sync()
        except OSError:
            if self._closed:
                return  # closed (deleted or truncated away) while we were about to sync
            self._dirty = True
            raise

    def close(self) -> None:
        """Unmaps and closes the file (without syncing it); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._region.close()

    def destroy(self) -> None:
        """Closes and deletes the file (durable once the caller syncs the directory)."""
        self.close()
        self._fs.remove(self.path)
