"""The message index: find messages by key or unique id within a time range.

RocketMQ's IndexFile layout, byte for byte (big-endian, like Java's ByteBuffer). Each file is a
40-byte header (beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset: longs;
hashSlotCount, indexCount: ints), then `maxHashSlotNum` 4-byte slots, then `maxIndexNum`
20-byte entries (key hash int, CommitLog offset long, seconds since beginTimestamp int,
previous entry number int). A slot holds the number of the newest entry whose key hashes to
it; entries chain backwards through `previous`. Entry 0 is never used, so 0 means "none" and
`indexCount` starts at 1. Files are created sparse (`ftruncate`), mapped with `mmap`, and named
by their creation time (`yyyyMMddHHmmssSSS`, UTC) under `index/`. A file that would be named
like or before the last one (two files in one millisecond, a clock stepped back) takes the
millisecond after the last name instead of a suffix: names stay 17 digits and their sort order
stays the creation order, which loading relies on.

Keys indexed for a message: `topic#uniqKey` and `topic#key` for each of its KEYS (split on
spaces). The key hash is |Java `String.hashCode`| (0 for Integer.MIN_VALUE) and the slot is
`hash % maxHashSlotNum`. Hashes collide, and entry times are stored in whole seconds, so a
query returns *candidates*: every entry whose hash matches and whose recorded second overlaps
the asked range. The caller reads each message and checks its real keys (and time, if exact
bounds matter).

Invariants:
- entries are appended in CommitLog order (the dispatcher's order), so within and across files
  offsets only grow; `build_index` of an offset at or below the newest indexed one is a replay
  after recovery and is ignored;
- an entry, then the header that counts it, then the slot that links it are written in that
  order, so a process killed in between leaves at worst an unlinked entry, never a slot or a
  chain pointing at an entry the header does not count;
- readers trust no number read from a file: slot values and links outside `1..indexCount-1`,
  or links that do not go strictly backwards, end a chain.

Bad files at `load`: a file whose size does not match the configured slot and entry counts, or
whose header cannot be right (indexCount outside `1..maxIndexNum`, offsets that go backwards),
is set aside as `<name>.corrupt` with a warning and never read again (listed in
`IndexService.corrupt_files`). The index is derived data: the caller re-dispatches from the
CommitLog (from `max_phy_offset`, or its own safe point) to rebuild what was lost.
`IndexFileError` is raised only by `IndexFile` itself.

Durability: `flush` syncs files written since their last flush, and files opened from disk
(after a crash their pages may not be on disk yet); it never touches a mapping, so the store's
flush thread may call it while the event loop writes. Files go through a `FileSystem`.

Not here: reading messages, checking real keys, deciding when to delete (retention) or where
recovery resumes (the store).
"""

from __future__ import annotations

import calendar
import logging
import os
import struct
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Final

from pocketmq.common.java_hash import java_string_hash, java_string_hash_concat
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file

log = logging.getLogger(__name__)

HEADER_SIZE: Final = 40
SLOT_SIZE: Final = 4
ENTRY_SIZE: Final = 20
KEY_SEPARATOR: Final = " "
CORRUPT_SUFFIX: Final = ".corrupt"
_TEMPORARY_SUFFIX: Final = ".tmp"
_HEADER: Final = struct.Struct(">qqqqii")
_SLOT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">iqii")
_INT_MIN: Final = -(1 << 31)
_INT_MAX: Final = (1 << 31) - 1
_NAME_DIGITS: Final = 17
# Entries read per chunk when truncation looks for the slots it must repair: bounds the copy.
_TRUNCATE_CHUNK_ENTRIES: Final = 1 << 16
# Names tried when two files would be created in the same millisecond (only a stuck or
# manual clock gets near this).
_NAME_ATTEMPTS: Final = 1000


def key_hash(key: str) -> int:
    """RocketMQ's index hash: |String.hashCode()|, with Integer.MIN_VALUE mapped to 0."""
    return _abs_hash(java_string_hash(key))


def _abs_hash(h: int) -> int:
    return 0 if h == _INT_MIN else abs(h)


@lru_cache(maxsize=1024)
def _topic_prefix_hash(topic: str) -> int:
    # A pure function cached: topics repeat on every message, and `topic#` is hashed once.
    return java_string_hash(topic + "#")


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
        number = self.index_count
        if number >= self.max_index:
            return False
        buf = self._buffer
        if number == 1:
            self.begin_timestamp = store_timestamp_ms
            self.begin_phy_offset = phys_offset
        diff_s = (store_timestamp_ms - self.begin_timestamp) // 1000
        if not 0 <= diff_s <= _INT_MAX:  # a clock stepped back, or a file kept for 68 years
            diff_s = 0 if diff_s < 0 else _INT_MAX
        slot_pos = HEADER_SIZE + (h % self.slots) * SLOT_SIZE
        previous = _SLOT.unpack_from(buf, slot_pos)[0]
        if not 0 < previous < number:
            previous = 0
            self.hash_slot_count += 1
        _ENTRY.pack_into(
            buf, self._entries_pos + number * ENTRY_SIZE, h, phys_offset, diff_s, previous
        )
        self.index_count = number + 1
        self.end_phy_offset = phys_offset
        if store_timestamp_ms > self.end_timestamp:
            self.end_timestamp = store_timestamp_ms
        self._write_header()
        _SLOT.pack_into(buf, slot_pos, number)
        self._dirty = True
        return True

    def put_hashes(self, hashes: Sequence[int], phys_offset: int, store_timestamp_ms: int) -> int:
        """Adds the keys of one message by their `key_hash`.

        Returns:
            How many of `hashes` (from the front) fit; the caller puts the rest in a new file.
        """
        if len(hashes) == 1:
            return 1 if self.put_hash(hashes[0], phys_offset, store_timestamp_ms) else 0
        buf = self._buffer
        number = self.index_count
        count = min(len(hashes), self.max_index - number)
        if count <= 0:
            return 0
        if number == 1:
            self.begin_timestamp = store_timestamp_ms
            self.begin_phy_offset = phys_offset
        diff_s = min(max((store_timestamp_ms - self.begin_timestamp) // 1000, 0), _INT_MAX)
        slots = self.slots
        entries_pos = self._entries_pos
        first = number
        # Slot -> newest entry of this message in it: two keys of one message may share a slot.
        links: dict[int, int] = {}
        for i in range(count):
            h = hashes[i]
            slot_pos = HEADER_SIZE + (h % slots) * SLOT_SIZE
            previous = links.get(slot_pos)
            if previous is None:
                previous = _SLOT.unpack_from(buf, slot_pos)[0]
                if not 0 < previous < first:
                    previous = 0
                    self.hash_slot_count += 1
            _ENTRY.pack_into(
                buf, entries_pos + number * ENTRY_SIZE, h, phys_offset, diff_s, previous
            )
            links[slot_pos] = number
            number += 1
        self.index_count = number
        self.end_phy_offset = phys_offset
        if store_timestamp_ms > self.end_timestamp:
            self.end_timestamp = store_timestamp_ms
        self._write_header()
        for slot_pos, linked in links.items():
            _SLOT.pack_into(buf, slot_pos, linked)
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


class IndexService:
    """All index files, oldest first: building, queries, truncation and retention.

    Called from one thread (the event loop), except `flush`, which a flush thread may call.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_hash_slot_num: int,
        max_index_num: int,
        clock: Clock,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        """Describes the index under `directory`; nothing is read until `load`.

        Raises:
            ValueError: a slot or entry count the format cannot hold (entry numbers and slot
                values are Java ints; entry 0 is unused, so a file needs 2 entries at least).
        """
        if not 1 <= max_hash_slot_num <= _INT_MAX:
            raise ValueError(f"maxHashSlotNum must be in 1..{_INT_MAX}, not {max_hash_slot_num}")
        if not 2 <= max_index_num <= _INT_MAX:
            raise ValueError(f"maxIndexNum must be in 2..{_INT_MAX}, not {max_index_num}")
        self.directory = Path(directory)
        self._fs = fs
        self.slots = max_hash_slot_num
        self.max_index = max_index_num
        self._clock = clock
        self.files: list[IndexFile] = []
        # Files the last `load` set aside as `<name>.corrupt` (their new paths).
        self.corrupt_files: list[Path] = []
        # CommitLog offset of the newest indexed message; -1 when none (replays skip below it).
        self._indexed_through = -1

    def load(self) -> None:
        """Opens the existing files in name (creation time) order.

        Files that cannot be right are renamed `<name>.corrupt` and logged; leftovers of a
        creation cut short (`.tmp`) are deleted. Afterwards `max_phy_offset` tells the caller
        where re-dispatching must resume.
        """
        assert not self.files, "load once, before any put"
        fs = self._fs
        fs.make_dirs(self.directory)
        for name in fs.list_dir(self.directory):
            path = self.directory / name
            if fs.is_dir(path):
                continue
            if name.endswith(_TEMPORARY_SUFFIX):
                fs.remove(path)
                continue
            if not (name.isascii() and name.isdigit()):
                continue
            try:
                self.files.append(
                    IndexFile.open(path, slots=self.slots, max_index=self.max_index, fs=fs)
                )
            except IndexFileError as exc:
                aside = path.with_name(name + CORRUPT_SUFFIX)
                log.warning(
                    "index file %s set aside as %s (the index is rebuilt from the commit log): %s",
                    name,
                    aside.name,
                    exc,
                )
                fs.rename(path, aside)
                fs.sync_directory(self.directory)
                self.corrupt_files.append(aside)
        self._recompute_indexed_through()

    def _recompute_indexed_through(self) -> None:
        self._indexed_through = -1
        for index_file in reversed(self.files):
            if not index_file.is_empty:
                self._indexed_through = index_file.end_phy_offset
                break

    @property
    def max_phy_offset(self) -> int:
        """CommitLog offset of the newest indexed message (0 when none).

        Re-dispatching from here is safe: messages at or below it are ignored.
        """
        return max(self._indexed_through, 0)

    def _new_file(self) -> IndexFile:
        """Creates the next file, named after the clock but always after the last file."""
        now_ms = self._clock.now_ms()
        if self.files:
            last_ms = _file_time_ms(self.files[-1].path.name)
            if last_ms is not None and now_ms <= last_ms:
                # Two files in one millisecond, or a clock stepped back: names must keep the
                # creation order, which `load` restores by sorting them.
                now_ms = last_ms + 1
        self._fs.make_dirs(self.directory)
        for attempt in range(_NAME_ATTEMPTS):
            path = self.directory / _file_name(now_ms + attempt)
            if not self._fs.exists(path):
                break
        else:
            raise FileExistsError(f"no free index file name from {_file_name(now_ms)} on")
        index_file = IndexFile.create(path, slots=self.slots, max_index=self.max_index, fs=self._fs)
        self.files.append(index_file)
        log.debug("created index file %s", path.name)
        return index_file

    def build_index(
        self,
        topic: str,
        keys: str,
        uniq_key: str | None,
        phys_offset: int,
        store_timestamp_ms: int,
    ) -> None:
        """Indexes the keys of the message at `phys_offset`; the dispatcher's hot path.

        Args:
            topic: the message's topic.
            keys: its KEYS property, keys separated by spaces ("" when none).
            uniq_key: its UNIQ_KEY property (the client message id), if any.
            phys_offset: its CommitLog offset; calls come in increasing offset order, and an
                offset at or below `max_phy_offset` is a replay and is ignored.
            store_timestamp_ms: its store time.
        """
        if phys_offset <= self._indexed_through:
            return
        prefix = _topic_prefix_hash(topic)
        files = self.files
        if not keys:  # the common case: only the unique id
            if not uniq_key:
                return
            h = _abs_hash(java_string_hash_concat(prefix, uniq_key))
            index_file = files[-1] if files else None
            if index_file is None or not index_file.put_hash(h, phys_offset, store_timestamp_ms):
                self._new_file().put_hash(h, phys_offset, store_timestamp_ms)
            self._indexed_through = phys_offset
            return
        hashes = [
            _abs_hash(java_string_hash_concat(prefix, key))
            for key in keys.split(KEY_SEPARATOR)
            if key
        ]
        if uniq_key:
            hashes.insert(0, _abs_hash(java_string_hash_concat(prefix, uniq_key)))
        if not hashes:
            return
        done = files[-1].put_hashes(hashes, phys_offset, store_timestamp_ms) if files else 0
        while done < len(hashes):  # each new file takes at least one key: bounded
            rest = hashes[done:]
            done += self._new_file().put_hashes(rest, phys_offset, store_timestamp_ms)
        self._indexed_through = phys_offset

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidate CommitLog offsets of messages of `topic` with `key` stored in a range.

        Args:
            topic: the topic.
            key: one of the messages' KEYS, or a unique id.
            max_num: at most this many offsets are returned.
            begin_ms: start of the store-time range (inclusive).
            end_ms: end of the store-time range (inclusive).

        Returns:
            Offsets, newest first, of entries whose key hash matches and whose recorded second
            overlaps the range. Hashes collide: the caller reads each message and checks its
            real topic and keys.
        """
        h = key_hash(f"{topic}#{key}")
        found: list[int] = []
        for index_file in reversed(self.files):
            if len(found) >= max_num:
                break
            if index_file.time_overlaps(begin_ms, end_ms):
                found.extend(index_file.select_hash(h, max_num - len(found), begin_ms, end_ms))
        return found

    def truncate(self, phys_offset: int) -> None:
        """Drops every entry for CommitLog offsets >= `phys_offset`.

        Files that start at or after it are deleted; the file spanning it keeps its earlier
        entries (its count goes back and its slot chains are repaired). New puts then carry on
        from there.
        """
        keep: list[IndexFile] = []
        for index_file in self.files:
            if not index_file.is_empty and index_file.begin_phy_offset >= phys_offset:
                log.info(
                    "index file %s deleted by truncation at %d", index_file.path.name, phys_offset
                )
                index_file.destroy()
                continue
            index_file.truncate(phys_offset)
            keep.append(index_file)
        if len(keep) < len(self.files):
            self._fs.sync_directory(self.directory)
        self.files = keep
        self._recompute_indexed_through()

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Deletes the oldest files whose entries all point below the CommitLog's min offset.

        The last file is never deleted (it is the one being written).

        Returns:
            How many files were deleted.
        """
        deleted = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_commit_log_offset:
            self.files.pop(0).destroy()
            deleted += 1
        if deleted:
            self._fs.sync_directory(self.directory)
        return deleted

    def flush(self) -> None:
        """Makes every file written since its last flush durable. Blocking (fdatasync)."""
        for index_file in list(self.files):  # a snapshot: the loop may roll or delete files
            index_file.flush()

    def close(self) -> None:
        """Closes every file (without syncing; `flush` first for a clean stop)."""
        for index_file in self.files:
            index_file.close()


def _file_name(now_ms: int) -> str:
    seconds, millis = divmod(now_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(seconds)) + f"{millis:03d}"


def _file_time_ms(name: str) -> int | None:
    """The creation time (UTC) a file name encodes; None for a name we did not make."""
    if len(name) != _NAME_DIGITS or not (name.isascii() and name.isdigit()):
        return None
    try:
        seconds = calendar.timegm(time.strptime(name[:14], "%Y%m%d%H%M%S"))
    except ValueError:
        return None
    return seconds * 1000 + int(name[14:])
