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
- past the entries counted lie zeros or entries written since (truncation and recovery zero
  what they drop), so after a power loss an entry that is, or reaches into, an all-zero
  sector is known to be torn (`recover`).

`IndexFileError` (a size or header that cannot be right) is raised only here; the set of files,
their names, rolling and recovery belong to `index.py`. `flush` syncs a file written since its
last flush, or opened from disk (after a crash its pages may not be on disk yet); it never
touches the mapping, so a flush thread may call it while the event loop writes.
"""

from __future__ import annotations

import array
import struct
import sys
from functools import lru_cache
from pathlib import Path
from typing import Final

from pocketmq.common.java_hash import index_hash, java_string_hash
from pocketmq.common.kernels import compiled
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file
from pocketmq.store import index_kernel, index_loops

HEADER_SIZE: Final = 40
SLOT_SIZE: Final = 4
ENTRY_SIZE: Final = 20
JAVA_INT_MAX: Final = (1 << 31) - 1
_JAVA_INT_MIN: Final = -(1 << 31)
_HEADER: Final = struct.Struct(">qqqqii")
_SLOT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">iqii")
_SECTOR: Final = 512
"""What a disk writes whole (or not at all) when the power goes."""
_ZERO_SECTOR: Final = bytes(_SECTOR)
_ZERO_ENTRY: Final = bytes(ENTRY_SIZE)
KERNEL_COMPILED: Final = compiled(index_kernel)
"""Whether runs of entries are linked by `index_kernel` compiled by mypyc."""
_SWAP: Final = sys.byteorder == "little"
"""Whether a native word of the slot table is byte-swapped from the file's big-endian int."""


@lru_cache(maxsize=64)
def _entries_struct(count: int) -> struct.Struct:
    """`count` entries back to back: a run's entries go in with one pack."""
    return struct.Struct(">" + "iqii" * count)


# Entries read per chunk when truncation looks for the slots it must repair: bounds the copy.
_TRUNCATE_CHUNK_ENTRIES: Final = 1 << 16


def key_hash(key: str) -> int:
    """RocketMQ's index hash: |String.hashCode()|, with Integer.MIN_VALUE mapped to 0."""
    return abs_hash(java_string_hash(key))


index_key_hash: Final = index_hash
"""`key_hash(prefix + key)` from `java_string_hash(prefix)`: the dispatcher's hot path, where the
prefix is a message's `topic#` (compiled where the build could, `java_hash`)."""


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
        self._words: memoryview | None = None
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
        return self.put_run([h], [phys_offset], [store_timestamp_ms]) == 1

    def put_run(
        self, hashes: list[int], offsets: list[int], times: list[int], start: int = 0
    ) -> int:
        """Adds the entries from `start` of the parallel lists (key hash, CommitLog offset,
        store time ms) in CommitLog order: the dispatcher's bulk path, one header write for
        all of them.

        The entries are written first, then the header that counts them,
        then the slots that point at them: a process killed in between leaves a file whose
        header and slots never name an entry that is not there.

        Returns:
            How many fit; the caller puts the rest in a new file.
        """
        first = self.index_count
        count = min(len(hashes) - start, self.max_index - first)
        if count <= 0:
            return 0
        if first == 1:
            self.begin_phy_offset = offsets[start]
            self.begin_timestamp = times[start]
        # The entries' fields, flat, for one pack of them all; slot: newest entry of this run
        # in it (the run's entries chain through it, not through what the file holds).
        fields: list[int] = []
        links: dict[int, int] = {}
        if KERNEL_COMPILED:
            words = self._slot_words()
            new_slots, newest = index_kernel.link(
                words, _SWAP, self.slots, first, self.begin_timestamp, hashes, offsets,
                times, start, count, fields, links,
            )  # fmt: skip
        else:
            new_slots, newest = index_loops.link(
                self._buffer, HEADER_SIZE, self.slots, first, self.begin_timestamp, hashes,
                offsets, times, start, count, fields, links,
            )  # fmt: skip
        buf = self._buffer
        _entries_struct(count).pack_into(buf, self._entries_pos + first * ENTRY_SIZE, *fields)
        self.index_count = first + count
        self.hash_slot_count += new_slots
        self.end_phy_offset = offsets[start + count - 1]
        self.end_timestamp = max(self.end_timestamp, newest)
        self._write_header()
        if KERNEL_COMPILED:
            index_kernel.write_slots(words, _SWAP, links)
        else:
            pack_slot = _SLOT.pack_into
            for slot, linked in links.items():
                pack_slot(buf, HEADER_SIZE + slot * SLOT_SIZE, linked)
        self._dirty = True
        return count

    def _slot_words(self) -> memoryview:
        """The slot table as native unsigned 32-bit words (for `index_kernel`), made once."""
        words = self._words
        if words is None:
            table = memoryview(self._buffer)[HEADER_SIZE : self._entries_pos]
            words = self._words = table.cast("I")
            table.release()
        return words

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

        The entries dropped are zeroed: after a power loss, what lies past the synced entries
        must be zeros or entries written since (`recover` relies on it).
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
        self._zero_entries_from(keep)
        self.index_count = keep
        self._set_end_from_entries()
        self._write_header()
        self._dirty = True

    def recover(self, phys_offset: int) -> int:
        """After an unclean stop: keeps the entries for CommitLog offsets below `phys_offset`
        that are sure to be whole, whatever a power loss left of the rest.

        Entries below `phys_offset` were synced before the checkpoint recovery starts from.
        The header, the slots and later entries each reached the disk or not, sector by
        sector: the header may count entries that are zeros or torn, and a slot may point at
        such an entry, or past the count. So the entries kept end at the first that is not
        below `phys_offset` or not sound (`_sound`); every slot that points at or past that
        end is walked back to a kept entry through sound links, and the slots whose walk
        meets an entry that is not sound are set from the kept entries themselves.

        Returns:
            The CommitLog offset from which this file needs its entries re-dispatched:
            `phys_offset`, or earlier when the kept entries end inside a message whose other
            keys may be lost (its entries are dropped too, and it is indexed again).
        """
        low, high = 1, self.index_count
        while low < high:
            mid = (low + high) // 2
            entry = self._sound(mid)
            if entry is None or entry[1] >= phys_offset:
                high = mid
            else:
                low = mid + 1
        keep = low
        resume = phys_offset
        if keep > 1 and keep < self.index_count and self._sound(keep) is None:
            # The entry after the last kept one may be a later key of the same message.
            resume = self._entry(keep - 1)[1]
            while keep > 1 and self._entry(keep - 1)[1] == resume:
                keep -= 1
        lost: list[int] = []
        for slot, head in self._slots_at_or_past(keep):
            number = max(head, 0)
            while number >= keep:
                entry = self._sound(number) if number < self.max_index else None
                if entry is None or entry[0] % self.slots != slot or not 0 <= entry[3] < number:
                    lost.append(slot)
                    break
                number = entry[3]
            else:
                _SLOT.pack_into(self._buffer, HEADER_SIZE + slot * SLOT_SIZE, number)
        self._relink(lost, keep)
        self._zero_entries_from(keep)
        self.index_count = keep
        self._set_end_from_entries()
        self._write_header()
        self._dirty = True
        return resume

    def _sound(self, number: int) -> tuple[int, int, int, int] | None:
        """Entry `number` when its bytes are sure to be the ones written, else None.

        A disk writes a sector whole or not at all, and what lies past the synced entries was
        zeros before (`_zero_entries_from` keeps it so), so a sector with a byte other than
        zero was written. An entry all zeros, or one that reaches into an all-zero sector,
        may have lost its bytes, or some of them (an entry may straddle two sectors).
        """
        pos = self._entries_pos + number * ENTRY_SIZE
        raw = self._buffer[pos : pos + ENTRY_SIZE]
        if raw == _ZERO_ENTRY:
            return None
        first_end = (pos // _SECTOR + 1) * _SECTOR
        if first_end < pos + ENTRY_SIZE:
            for sector in (first_end - _SECTOR, first_end):
                if self._zeros_in_sector(sector):
                    return None
        entry: tuple[int, int, int, int] = _ENTRY.unpack(raw)
        return entry

    def _slots_at_or_past(self, keep: int) -> list[tuple[int, int]]:
        """Every slot holding an entry number >= `keep`, or a negative one, with its value."""
        table = array.array("i", self._buffer[HEADER_SIZE : HEADER_SIZE + self.slots * SLOT_SIZE])
        if sys.byteorder == "little":
            table.byteswap()
        if not table:
            return []
        highest, lowest = max(table), min(table)  # at C speed
        if highest < keep and lowest >= 0:
            return []
        count = self.index_count
        if highest < count and lowest >= 0 and self._all_written(keep, count):
            # After a crash without power loss: every slot points at a counted entry, so the
            # slots to walk are those of the entries dropped.
            touched = self._slots_of_entries(keep, count)
            return [(slot, table[slot]) for slot in touched if table[slot] >= keep]
        return [(slot, head) for slot, head in enumerate(table) if head >= keep or head < 0]

    def _all_written(self, first: int, stop: int) -> bool:
        """Whether entries `first..stop-1` are all sound: none reads as zeros, nor touches a
        sector of zeros (none was lost).

        A sector synced while half full comes back half zeros: its later entries are lost in
        a sector that is not all zeros.
        """
        start = self._entries_pos + first * ENTRY_SIZE
        end = self._entries_pos + stop * ENTRY_SIZE
        # Twenty zero bytes anywhere (also across two entries) take the careful path.
        if _ZERO_ENTRY in self._buffer[start:end]:
            return False
        sector = start - start % _SECTOR
        while sector < end:
            if self._zeros_in_sector(sector):
                return False
            sector += _SECTOR
        return True

    def _zeros_in_sector(self, sector: int) -> bool:
        """Whether the file's bytes in the sector at `sector` are all zeros. A file's size is
        no multiple of a sector, so its last sector holds fewer bytes: compared whole with a
        sector of zeros, a lost last sector would read as written."""
        data = self._buffer[sector : sector + _SECTOR]
        return data == _ZERO_SECTOR[: len(data)]

    def _relink(self, slots: list[int], keep: int) -> None:
        """Points each of `slots` at its newest entry below `keep` (0 when none), read from
        the entries, newest first: for slots whose chain crossed a lost entry."""
        wanted = set(slots)
        for slot in slots:
            _SLOT.pack_into(self._buffer, HEADER_SIZE + slot * SLOT_SIZE, 0)
        stop = keep
        while wanted and stop > 1:
            first = max(1, stop - _TRUNCATE_CHUNK_ENTRIES)
            start_pos = self._entries_pos + first * ENTRY_SIZE
            end_pos = start_pos + (stop - first) * ENTRY_SIZE
            chunk = list(_ENTRY.iter_unpack(self._buffer[start_pos:end_pos]))
            for offset in range(len(chunk) - 1, -1, -1):
                slot = chunk[offset][0] % self.slots
                if slot in wanted:
                    wanted.discard(slot)
                    _SLOT.pack_into(self._buffer, HEADER_SIZE + slot * SLOT_SIZE, first + offset)
            stop = first

    def _zero_entries_from(self, first: int) -> None:
        """Zeroes the entries from `first` up to the first all-zero chunk, so that what a
        later power loss leaves past the kept entries is zeros or new entries, never old ones
        that look kept."""
        chunk = _TRUNCATE_CHUNK_ENTRIES * ENTRY_SIZE
        pos = self._entries_pos + first * ENTRY_SIZE
        end = self._entries_pos + self.max_index * ENTRY_SIZE
        zeros = bytes(chunk)
        while pos < end:
            size = min(chunk, end - pos)
            if self._buffer[pos : pos + size] == zeros[:size]:
                break
            self._buffer[pos : pos + size] = zeros[:size]
            pos += size

    def _set_end_from_entries(self) -> None:
        """The header's end fields (and begin fields when nothing is left) from the entries."""
        if self.index_count > 1:
            _, phys, diff_s, _ = self._entry(self.index_count - 1)
            self.end_phy_offset = phys
            # The last kept entry's real time is at most its recorded second's end.
            stamp_ms = self.begin_timestamp + diff_s * 1000
            self.end_timestamp = min(self.end_timestamp, stamp_ms + 999)
        else:
            self.begin_timestamp = self.end_timestamp = 0
            self.begin_phy_offset = self.end_phy_offset = 0

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
        if self._words is not None:  # an exported view would keep the mapping from closing
            self._words.release()
            self._words = None
        self._region.close()

    def destroy(self) -> None:
        """Closes and deletes the file (durable once the caller syncs the directory)."""
        self.close()
        self._fs.remove(self.path)
