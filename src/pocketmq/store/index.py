"""The message index: find messages by key or unique id within a time range (`IndexFile`).

RocketMQ's layout, byte for byte. Each file is a 40-byte header (beginTimestamp,
endTimestamp, beginPhyOffset, endPhyOffset: longs; hashSlotCount, indexCount: ints), then
`maxHashSlotNum` 4-byte slots, then `maxIndexNum` 20-byte entries (key hash int, CommitLog
offset long, seconds since beginTimestamp int, previous entry number int). A slot holds the
number of the newest entry whose key hashes to it; entries chain backwards through `previous`.
Entry 0 is never used, so 0 means "none". Files are named by their creation time
(`yyyyMMddHHmmssSSS`, UTC) under `index/`.

Keys indexed for a message: `topic#uniqKey` and `topic#key` for each of its KEYS. Hashes can
collide: a query returns candidate offsets, and the caller checks the real keys.

A file whose size or header does not make sense is set aside as `<name>.corrupt` with a
warning, never trusted: the index is derived data, and abnormal recovery rebuilds it from the
CommitLog from the safe point on.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Final

from pocketmq.common.java_hash import java_string_hash, java_string_hash_concat
from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)

HEADER_SIZE: Final = 40
SLOT_SIZE: Final = 4
ENTRY_SIZE: Final = 20
_HEADER: Final = struct.Struct(">qqqqii")
_SLOT: Final = struct.Struct(">i")
_ENTRY: Final = struct.Struct(">iqii")
_INT_MAX: Final = 0x7FFFFFFF


def key_hash(key: str) -> int:
    """RocketMQ's index hash: |String.hashCode()|, with Integer.MIN_VALUE mapped to 0."""
    return _abs_hash(java_string_hash(key))


def _abs_hash(h: int) -> int:
    return 0 if h == -(1 << 31) else abs(h)


@lru_cache(maxsize=1024)
def _topic_prefix_hash(topic: str) -> int:
    return java_string_hash(topic + "#")


class IndexFileError(ValueError):
    """An index file whose size or header cannot be right."""


class IndexFile:
    """One index file."""

    def __init__(self, path: Path, *, slots: int, max_index: int, create: bool) -> None:
        self.path = path
        self.slots = slots
        self.max_index = max_index
        self.size = HEADER_SIZE + slots * SLOT_SIZE + max_index * ENTRY_SIZE
        self._entries_pos = HEADER_SIZE + slots * SLOT_SIZE
        if create:
            # Sized under a temporary name first: a crash never leaves a short index file.
            temporary = path.with_name(path.name + ".tmp")
            fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(fd, self.size)
            finally:
                os.close(fd)
            os.replace(temporary, path)
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != self.size:
                raise IndexFileError(
                    f"{path} is {os.fstat(fd).st_size} bytes, expected {self.size} for "
                    f"maxHashSlotNum={slots}, maxIndexNum={max_index}"
                )
            self._buffer = mmap.mmap(fd, self.size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._dirty = create
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
        elif not 1 <= self.index_count <= max_index or not 0 <= self.hash_slot_count <= slots:
            self.close()
            raise IndexFileError(
                f"{path}: header says {self.index_count} entries and {self.hash_slot_count} "
                "used slots, which this file cannot hold"
            )

    @property
    def is_full(self) -> bool:
        return self.index_count >= self.max_index

    @property
    def is_empty(self) -> bool:
        return self.index_count <= 1

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

    def put_key(self, key: str, phys_offset: int, store_timestamp_ms: int) -> bool:
        """Adds one key; False when the file is full."""
        return self.put_hash(key_hash(key), phys_offset, store_timestamp_ms)

    def put_hash(self, h: int, phys_offset: int, store_timestamp_ms: int) -> bool:
        """Adds one key by its `key_hash`; False when the file is full."""
        return self.put_hashes((h,), phys_offset, store_timestamp_ms) == 1

    def put_hashes(self, hashes: Sequence[int], phys_offset: int, store_timestamp_ms: int) -> int:
        """Adds the keys of one message; returns how many fit (the rest go to the next file).

        Order of writes: entries, then the header that counts them, then the slots that link
        them. A process killed in between leaves unlinked entries at worst, never a slot
        pointing past the count, so every chain stays intact.
        """
        buf = self._buffer
        number = self.index_count
        room = self.max_index - number
        if room <= 0:
            return 0
        if number == 1:
            self.begin_timestamp = store_timestamp_ms
            self.begin_phy_offset = phys_offset
        diff_s = min(max((store_timestamp_ms - self.begin_timestamp) // 1000, 0), _INT_MAX)
        slots = self.slots
        entries_pos = self._entries_pos
        count = min(len(hashes), room)
        links: dict[int, int] = {}
        for h in hashes[:count]:
            slot_pos = HEADER_SIZE + (h % slots) * SLOT_SIZE
            previous = links.get(slot_pos)
            if previous is None:
                previous = _SLOT.unpack_from(buf, slot_pos)[0]
                if not 0 < previous < self.index_count:
                    previous = 0
                    self.hash_slot_count += 1
            _ENTRY.pack_into(
                buf, entries_pos + number * ENTRY_SIZE, h, phys_offset, diff_s, previous
            )
            links[slot_pos] = number
            number += 1
        self.index_count = number
        self.end_phy_offset = phys_offset
        self.end_timestamp = store_timestamp_ms
        self._write_header()
        for slot_pos, linked in links.items():
            _SLOT.pack_into(buf, slot_pos, linked)
        self._dirty = True
        return count

    def _entry(self, number: int) -> tuple[int, int, int, int]:
        h, phys, diff_s, previous = _ENTRY.unpack_from(
            self._buffer, self._entries_pos + number * ENTRY_SIZE
        )
        return h, phys, diff_s, previous

    def select(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """CommitLog offsets of entries whose key hash matches, newest first."""
        h = key_hash(key)
        slot_pos = HEADER_SIZE + (h % self.slots) * SLOT_SIZE
        number = _SLOT.unpack_from(self._buffer, slot_pos)[0]
        found: list[int] = []
        # A chain only goes backwards; the bound also stops a corrupt cycle.
        for _ in range(self.index_count):
            if not 0 < number < self.index_count or len(found) >= max_num:
                break
            entry_hash, phys, diff_s, previous = self._entry(number)
            stamp_ms = self.begin_timestamp + diff_s * 1000
            # Stored times are whole seconds: an entry matches if its second overlaps the range.
            if entry_hash == h and stamp_ms + 999 >= begin_ms and stamp_ms <= end_ms:
                found.append(phys)
            if previous >= number:
                break
            number = previous
        return found

    def truncate(self, phys_offset: int) -> None:
        """Drops every entry whose CommitLog offset is >= `phys_offset`, repairing chains."""
        low, high = 1, self.index_count
        while low < high:  # entries are in CommitLog order: find the first to drop
            mid = (low + high) // 2
            if self._entry(mid)[1] < phys_offset:
                low = mid + 1
            else:
                high = mid
        keep = low
        if keep >= self.index_count:
            return
        touched = {self._entry(n)[0] % self.slots for n in range(keep, self.index_count)}
        for slot in touched:
            slot_pos = HEADER_SIZE + slot * SLOT_SIZE
            number = _SLOT.unpack_from(self._buffer, slot_pos)[0]
            for _ in range(self.index_count):
                if number < keep:
                    break
                number = self._entry(number)[3]
            _SLOT.pack_into(self._buffer, slot_pos, number)
            if number == 0:
                self.hash_slot_count -= 1
        start = self._entries_pos + keep * ENTRY_SIZE
        end = self._entries_pos + self.index_count * ENTRY_SIZE
        self._buffer[start:end] = bytes(end - start)
        self.index_count = keep
        if keep > 1:
            _, phys, diff_s, _ = self._entry(keep - 1)
            self.end_phy_offset = phys
            self.end_timestamp = self.begin_timestamp + diff_s * 1000
        else:
            self.begin_timestamp = self.end_timestamp = 0
            self.begin_phy_offset = self.end_phy_offset = 0
        self._write_header()
        self._dirty = True

    def flush(self) -> None:
        """Makes the file durable. Blocking."""
        fd = self._fd
        if self._dirty and fd >= 0:
            self._dirty = False
            os.fdatasync(fd)

    def close(self) -> None:
        if self._fd < 0:
            return
        self._buffer.close()
        os.close(self._fd)
        self._fd = -1

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class IndexService:
    """All index files: building (from the dispatcher), queries, truncation and retention."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_hash_slot_num: int,
        max_index_num: int,
        clock: Clock,
    ) -> None:
        self.directory = Path(directory)
        self.slots = max_hash_slot_num
        self.max_index = max_index_num
        self._clock = clock
        self.files: list[IndexFile] = []
        # CommitLog offset of the newest indexed message; -1 when none (replays skip below it).
        self._indexed_through = -1

    def load(self) -> None:
        """Opens the existing files in name (creation time) order; sets bad ones aside."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.directory.iterdir()):
            if path.name.endswith(".tmp"):
                path.unlink()  # a creation cut short by a crash
                continue
            if not path.name.isdigit():
                continue
            try:
                self.files.append(
                    IndexFile(path, slots=self.slots, max_index=self.max_index, create=False)
                )
            except IndexFileError as exc:
                aside = path.with_name(path.name + ".corrupt")
                log.warning("index file set aside as %s: %s", aside.name, exc)
                path.rename(aside)
        self._recompute_indexed_through()

    def _recompute_indexed_through(self) -> None:
        self._indexed_through = -1
        for index_file in reversed(self.files):
            if not index_file.is_empty:
                self._indexed_through = index_file.end_phy_offset
                break

    @property
    def max_phy_offset(self) -> int:
        """CommitLog offset of the newest indexed message (0 when none)."""
        for index_file in reversed(self.files):
            if not index_file.is_empty:
                return index_file.end_phy_offset
        return 0

    def _writable(self) -> IndexFile:
        if self.files and not self.files[-1].is_full:
            return self.files[-1]
        now_ms = self._clock.now_ms()
        for attempt in range(1000):
            path = self.directory / _file_name(now_ms + attempt)
            if not path.exists():
                break
        self.directory.mkdir(parents=True, exist_ok=True)
        index_file = IndexFile(path, slots=self.slots, max_index=self.max_index, create=True)
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
        """Indexes one message; a message already indexed (a replay) is skipped."""
        if phys_offset <= self._indexed_through:
            return
        prefix = _topic_prefix_hash(topic)
        hashes = [
            _abs_hash(java_string_hash_concat(prefix, key))
            for key in (uniq_key, *keys.split(" "))
            if key
        ]
        if not hashes:
            return
        index_file = self.files[-1] if self.files else None
        while hashes:
            if index_file is None or index_file.is_full:
                index_file = self._writable()
            done = index_file.put_hashes(hashes, phys_offset, store_timestamp_ms)
            hashes = hashes[done:]
        self._indexed_through = phys_offset

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Candidate CommitLog offsets for `key` of `topic`, newest first, at most `max_num`."""
        full_key = f"{topic}#{key}"
        found: list[int] = []
        for index_file in reversed(self.files):
            if len(found) >= max_num:
                break
            if index_file.is_empty:
                continue
            if index_file.end_timestamp < begin_ms or index_file.begin_timestamp > end_ms:
                continue
            found.extend(index_file.select(full_key, max_num - len(found), begin_ms, end_ms))
        return found

    def truncate(self, phys_offset: int) -> None:
        """Drops every entry for CommitLog offsets >= `phys_offset`."""
        keep = []
        for index_file in self.files:
            if not index_file.is_empty and index_file.begin_phy_offset >= phys_offset:
                index_file.destroy()
                continue
            index_file.truncate(phys_offset)
            keep.append(index_file)
        self.files = keep
        self._recompute_indexed_through()

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Deletes files that only point below the CommitLog's min offset (never the last)."""
        deleted = 0
        while len(self.files) > 1 and self.files[0].end_phy_offset < min_commit_log_offset:
            self.files.pop(0).destroy()
            deleted += 1
        return deleted

    def flush(self) -> None:
        """Makes every file durable. Blocking."""
        for index_file in list(self.files):
            index_file.flush()

    def close(self) -> None:
        for index_file in self.files:
            index_file.close()


def _file_name(now_ms: int) -> str:
    seconds, millis = divmod(now_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(seconds)) + f"{millis:03d}"
