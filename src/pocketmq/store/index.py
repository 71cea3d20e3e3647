"""The message index: find messages by key or unique id within a time range.

The index is a list of `IndexFile`s (`index_file.py` owns the layout of one), oldest first,
named by their creation time (`yyyyMMddHHmmssSSS`, UTC) under `index/`. A file that would be
named like or before the last one (two files in one millisecond, a clock stepped back) takes the
millisecond after the last name instead of a suffix: names stay 17 digits and their sort order
stays the creation order, which loading relies on. When the newest file is full, the next one
is created (rolling).

Keys indexed for a message: `topic#uniqKey` and `topic#key` for each of its KEYS (split on
spaces). A query returns *candidates* (hashes collide, times are whole seconds): the caller
reads each message and checks its real keys (and time, if exact bounds matter).

Invariant: entries are appended in CommitLog order (the dispatcher's order), so within and
across files offsets only grow; `build_index` of an offset at or below the newest indexed one is
a replay after recovery and is ignored.

Bad files at `load`: a file whose size does not match the configured slot and entry counts, or
whose header cannot be right (indexCount outside `1..maxIndexNum`, offsets that go backwards),
is set aside as `<name>.corrupt` with a warning and never read again (listed in
`IndexService.corrupt_files`). The index is derived data: the caller re-dispatches from the
CommitLog (from `max_phy_offset`, or its own safe point) to rebuild what was lost.

Durability: `flush` syncs files written since their last flush, and files opened from disk; the
store's flush thread may call it while the event loop writes. Files go through a `FileSystem`.

Not here: reading messages, checking real keys, deciding when to delete (retention) or where
recovery resumes (the store).
"""

from __future__ import annotations

import calendar
import logging
import os
import time
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Final, NamedTuple, Protocol

from pocketmq.common.java_hash import java_string_hash
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.store import index_kernel, index_loops
from pocketmq.store.index_file import (
    JAVA_INT_MAX,
    KERNEL_COMPILED,
    IndexFile,
    IndexFileError,
    key_hash,
)

log = logging.getLogger(__name__)

CORRUPT_SUFFIX: Final = ".corrupt"
_TEMPORARY_SUFFIX: Final = ".tmp"
_NAME_DIGITS: Final = 17
# Names tried when two files would be created in the same millisecond (only a stuck or
# manual clock gets near this).
_NAME_ATTEMPTS: Final = 1000


class IndexedRecord(Protocol):
    """What the index reads of a record (a dispatch request has these fields)."""

    @property
    def topic(self) -> str: ...
    @property
    def keys(self) -> str: ...
    @property
    def uniq_key(self) -> str | None: ...
    @property
    def commit_log_offset(self) -> int: ...
    @property
    def store_timestamp(self) -> int: ...


class KeyedRecord(NamedTuple):
    """An `IndexedRecord` of its own, for callers that have no dispatch request."""

    topic: str
    keys: str
    uniq_key: str | None
    commit_log_offset: int
    store_timestamp: int


@lru_cache(maxsize=1024)
def _topic_prefix_hash(topic: str) -> int:
    # A pure function cached: topics repeat on every message, and `topic#` is hashed once.
    return java_string_hash(topic + "#")


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
        if not 1 <= max_hash_slot_num <= JAVA_INT_MAX:
            raise ValueError(
                f"maxHashSlotNum must be in 1..{JAVA_INT_MAX}, not {max_hash_slot_num}"
            )
        if not 2 <= max_index_num <= JAVA_INT_MAX:
            raise ValueError(f"maxIndexNum must be in 2..{JAVA_INT_MAX}, not {max_index_num}")
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
        self.build_index_many(
            (KeyedRecord(topic, keys, uniq_key, phys_offset, store_timestamp_ms),)
        )

    def build_index_many(self, records: Iterable[IndexedRecord]) -> None:
        """`build_index` for many records (dispatch requests, as they are) in CommitLog
        order: their entries are written in one pass."""
        hashes: list[int] = []
        offsets: list[int] = []
        times: list[int] = []
        collect = index_kernel.collect if KERNEL_COMPILED else index_loops.collect
        through = collect(
            records, self._indexed_through, _topic_prefix_hash, hashes, offsets, times
        )
        if hashes:
            files = self.files
            done = files[-1].put_run(hashes, offsets, times) if files else 0
            while done < len(hashes):  # each new file takes at least one entry: bounded
                done += self._new_file().put_run(hashes, offsets, times, done)
        self._indexed_through = through

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

    def recover(self, phys_offset: int) -> int:
        """`truncate` after an unclean stop, when a power loss may have kept some of the
        newest pages and lost others.

        Only the newest non-empty file, and the empty ones after it, can have been written
        since the last flush (a file is written only while it is the last); they keep what
        `IndexFile.recover` proves was synced. Older files were synced whole and are truncated
        as usual. Files that start at or after `phys_offset` are deleted.

        Returns:
            Where re-dispatch must start for the index to be whole: `phys_offset`, or the
            offset of a message whose entries were dropped with the torn ones.
        """
        keep: list[IndexFile] = []
        for index_file in self.files:
            if not index_file.is_empty and index_file.begin_phy_offset >= phys_offset:
                log.info("index file %s deleted by recovery", index_file.path.name)
                index_file.destroy()
                continue
            keep.append(index_file)
        if len(keep) < len(self.files):
            self._fs.sync_directory(self.directory)
        newest = max((i for i, f in enumerate(keep) if not f.is_empty), default=0)
        resume = phys_offset
        for position, index_file in enumerate(keep):
            if position < newest:
                index_file.truncate(phys_offset)
            else:
                resume = min(resume, index_file.recover(phys_offset))
        self.files = keep
        self._recompute_indexed_through()
        return resume

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
