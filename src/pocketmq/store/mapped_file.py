"""Mapped files: fixed-size files named by their 20-digit start offset, and the queue of them.

A `MappedFile` is one memory-mapped file with a write position (what has been appended) and a
flushed position (what `fdatasync` has made durable). A `MappedFileQueue` is the ordered run of
such files that together form one logical log (the CommitLog, or one ConsumeQueue).

Invariants:
- files are contiguous: file i+1 starts where file i starts plus the file size;
- only the last file is written to; earlier files are full (their tail may be filler);
- bytes past a file's write position are zero or stale, and truncation zeroes what it cuts, so
  a later recovery scan never mistakes old records for new ones.

Files are made, mapped, synced and deleted through a `FileSystem` (`runtime/filesystem.py`),
so a simulated disk can lose power under them. Durability:
- `flushed_position` is what a `sync` made by this process proved durable;
  files found on disk start at 0, so the first flush syncs them whatever a crash left unsynced;
- a new file is synced and its directory synced before it is used, and deleting files
  (truncation, retention) syncs the directory, so files never come back after a power loss;
- truncation syncs the zeros it writes, so cut records never come back either.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file

log = logging.getLogger(__name__)

_NAME_DIGITS = 20
WARM_AHEAD_BYTES = 16 << 20
"""How far ahead of its writer the CommitLog's pages are read in (`MappedFileQueue.warm_ahead`)."""
RELEASE_STEP_BYTES = 8 << 20
"""The least a `MappedFileQueue.release_pages` lets go of at once: fewer, larger calls."""


def offset_to_file_name(offset: int) -> str:
    """RocketMQ's file name for a file starting at `offset`: 20 zero-padded digits."""
    return f"{offset:0{_NAME_DIGITS}d}"


class MappedFileError(RuntimeError):
    """The files on disk do not form a valid log (wrong size, gap, unparsable name)."""


class MappedFile:
    """One fixed-size memory-mapped file of a log."""

    def __init__(
        self,
        path: Path,
        file_size: int,
        *,
        create: bool,
        durable: bool = True,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self._fs = fs
        if create and not fs.exists(path):
            create_sized_file(fs, path, file_size, durable=durable)
        try:
            self._region = fs.map(path, file_size)
        except ValueError as exc:
            raise MappedFileError(
                f"{exc}: the configured file size is {file_size}; restore the file or set the "
                "size it was written with"
            ) from exc
        self.buffer = self._region.buffer
        self.wrote_position = 0
        self.flushed_position = 0
        self._closed = False

    @property
    def end_offset(self) -> int:
        """The logical offset just past this file."""
        return self.file_from_offset + self.file_size

    @property
    def wrote_offset(self) -> int:
        """The logical offset of the write position."""
        return self.file_from_offset + self.wrote_position

    @property
    def free_bytes(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def write(self, data: bytes | memoryview) -> int:
        """Appends `data` at the write position; returns the logical offset it was written at."""
        pos = self.wrote_position
        end = pos + len(data)
        assert end <= self.file_size, "caller must check free_bytes"
        self.buffer[pos:end] = data
        self.wrote_position = end
        return self.file_from_offset + pos

    def view(self, position: int, size: int) -> memoryview:
        """A view of `size` bytes at `position` (relative to this file); valid until close."""
        return memoryview(self.buffer)[position : position + size]

    def read(self, position: int, size: int) -> bytes:
        """A copy of `size` bytes at `position` (relative to this file)."""
        return bytes(self.buffer[position : position + size])

    def flush(self) -> int:
        """Makes everything written so far durable; returns the flushed position.

        Blocking (fdatasync): call it from a flush thread, not the event loop.

        Raises:
            OSError: the sync failed; nothing more is known durable (the caller must not
                retry and trust a later success: the kernel may have dropped the pages).
        """
        target = self.wrote_position
        if target > self.flushed_position and not self._closed:
            self._region.sync()
            self.flushed_position = target
        return self.flushed_position

    def sync(self) -> None:
        """Syncs the whole file now, whatever the positions say (recovery, truncation)."""
        if not self._closed:
            self._region.sync()
            self.flushed_position = self.wrote_position

    def sync_created(self) -> None:
        """A new file's first sync, whatever the positions say: its length and what was
        written before it started."""
        target = self.wrote_position
        if not self._closed:
            self._region.sync()
            if target > self.flushed_position:
                self.flushed_position = target

    def truncate_to(self, position: int) -> None:
        """Moves the write position back to `position`, zeroing the bytes it cuts, durably.

        The zeros are synced at once: a cut record that came back after a power loss would
        carry its true offset and pass recovery's checks.
        """
        old = self.wrote_position
        self.wrote_position = position
        if position < old:
            self.buffer[position:old] = bytes(old - position)
            self.sync()
        self.flushed_position = min(self.flushed_position, position)

    def drop_pages(self, start: int, end: int) -> None:
        """Lets go of this process's pages in [start, end) (see `MappedRegion.drop_pages`)."""
        if not self._closed:
            self._region.drop_pages(start, end)

    def read_ahead(self, enabled: bool) -> None:
        """See `MappedRegion.read_ahead`."""
        if not self._closed:
            self._region.read_ahead(enabled)

    def warm(self, start: int, end: int) -> None:
        """See `MappedRegion.warm`."""
        if not self._closed:
            self._region.warm(start, end)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._region.close()

    def destroy(self) -> None:
        """Closes and deletes the file (durable once the caller syncs the directory)."""
        self.close()
        self._fs.remove(self.path)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position})"


class MappedFileQueue:
    """The ordered files of one log, with roll-over, lookup by offset and truncation.

    File creation can be handed to a background thread (`preallocate=True`): the next file is
    created and mapped while the current one fills, so a roll-over does not stall an append.

    A log rebuilt from the CommitLog after a crash (`derived=True`: the ConsumeQueues) creates
    its files without a sync; `flush`, on the flush thread, makes their names and sizes durable
    before their bytes, so whatever the store records as flushed has durable files. A power
    loss before that may leave such a file empty or missing: `load` drops it and those after
    it, and recovery re-dispatches their entries. A broker with thousands of queues would
    otherwise make three syncs on the event loop for each queue's first entry.

    A derived log's file reads ahead only once it is full: its entries come a few bytes at a
    time, and a fault in the sparse rest of the file would read the whole read-ahead window in
    as zeros, milliseconds for each new queue (RocketMQ writes these files with `write`, not
    through the mapping, for the same reason).
    """

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        preallocate: bool = False,
        derived: bool = False,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        assert file_size > 0
        self.directory = directory
        self.fs = fs
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self._allocator = ThreadPoolExecutor(1, "pocketmq-alloc") if preallocate else None
        # The log written in large appends (the CommitLog) reads its pages in ahead of them.
        warms = preallocate and not derived
        self._warmer = ThreadPoolExecutor(1, "pocketmq-warm") if warms else None
        self._warming: MappedFile | None = None
        self._warmed_to = 0
        self._next: Future[MappedFile] | None = None
        self._derived = derived
        # Files created without a sync, oldest first; taken by the flush thread.
        self._unsynced: list[MappedFile] = []
        self._names_lock = threading.Lock()
        # Logical offset below which this process's pages were let go of (`release_pages`),
        # and the span that reads mapped again below it since ([low, high), empty when equal).
        self.released_to = 0
        self._read_back = (0, 0)

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Opens the files on disk in offset order; every file is first marked full, and none
        flushed (what a crash left in the page cache may not be on disk yet).

        Recovery then sets the real write position of the last files by scanning them.
        """
        fs = self.fs
        fs.make_dirs(self.directory, durable=not self._derived)
        names = []
        for name in fs.list_dir(self.directory):
            if name.endswith(".tmp"):
                fs.remove(self.directory / name)
                continue
            if not name.isdigit() or len(name) != _NAME_DIGITS:
                log.warning("ignoring unexpected file %s in %s", name, self.directory)
                continue
            names.append(name)
        expected = None
        for index, name in enumerate(names):
            start = int(name)
            if start % self.file_size:
                raise MappedFileError(
                    f"{self.directory / name} does not start on a {self.file_size}-byte boundary"
                )
            problem = None
            if expected is not None and start != expected:
                problem = f"gap in {self.directory}: expected a file at {expected}, found {name}"
            elif self._derived and self._is_empty(self.directory / name):
                # Only what a power loss leaves of a file created unsynced: a file of another
                # size (a changed `mappedFileSizeConsumeQueue`) still stops the load below.
                problem = f"{self.directory / name} is empty"
            if problem is not None:
                if not self._derived:
                    raise MappedFileError(problem)
                self._drop_unsynced_tail(names[index:], problem)
                break
            mapped = MappedFile(self.directory / name, self.file_size, create=False, fs=fs)
            mapped.wrote_position = self.file_size
            self.files.append(mapped)
            expected = start + self.file_size
        if self._derived and self.files:
            self.files[-1].read_ahead(False)

    def _is_empty(self, path: Path) -> bool:
        handle = self.fs.open(path)
        try:
            return handle.size() == 0
        finally:
            handle.close()

    def _drop_unsynced_tail(self, names: list[str], problem: str) -> None:
        """A derived log's file that is empty or after a gap was created after the last flush
        and lost to a power loss: it and the files after it go, to be re-dispatched."""
        log.warning("%s; dropping %s (rebuilt from the CommitLog)", problem, ", ".join(names))
        for name in names:
            self.fs.remove(self.directory / name)
        self.fs.sync_directory(self.directory)

    # -- positions -------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """The logical write position of the log."""
        return self.files[-1].wrote_offset if self.files else 0

    @property
    def flushed_offset(self) -> int:
        for mapped in reversed(self.files):
            if mapped.flushed_position:
                return mapped.file_from_offset + mapped.flushed_position
        return self.min_offset

    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find(self, offset: int) -> MappedFile | None:
        """The file that holds logical `offset`, or None when it is outside the log."""
        if not self.files:
            return None
        first = self.files[0].file_from_offset
        index = (offset - first) // self.file_size
        if 0 <= index < len(self.files):
            return self.files[index]
        return None

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(self.files)

    # -- writing ---------------------------------------------------------------------------
    def last_file_for_write(self, start_offset: int = 0) -> MappedFile:
        """The file to append to, creating the next one when the last is full (or none exists)."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full:
            return last
        start = (
            last.end_offset if last is not None else start_offset - start_offset % self.file_size
        )
        mapped = self._take_preallocated(start) or self._create(start)
        if last is not None and self._derived:
            last.read_ahead(True)
        self.files.append(mapped)
        if self._allocator is not None:
            self._next = self._allocator.submit(self._create, start + self.file_size)
        return mapped

    def warm_ahead(self, mapped: MappedFile) -> None:
        """Keeps `WARM_AHEAD_BYTES` after `mapped`'s write position in the page cache, read in
        on a thread (`MappedRegion.warm`), so appends do not stop on page faults."""
        if self._warmer is None:
            return
        position = mapped.wrote_position
        if mapped is self._warming:
            if position + WARM_AHEAD_BYTES // 2 < self._warmed_to:
                return  # the common case: far enough ahead
            start = max(position, self._warmed_to)
        else:
            start = position
        end = min(mapped.file_size, position + WARM_AHEAD_BYTES)
        if start >= end:
            return
        self._warming, self._warmed_to = mapped, end
        self._warmer.submit(mapped.warm, start, end)

    def _create(self, start: int) -> MappedFile:
        durable = not self._derived
        self.fs.make_dirs(self.directory, durable=durable)
        path = self.directory / offset_to_file_name(start)
        mapped = MappedFile(path, self.file_size, create=True, durable=durable, fs=self.fs)
        if not durable:
            mapped.read_ahead(False)
            with self._names_lock:
                self._unsynced.append(mapped)
        log.debug("created mapped file %s", path)
        return mapped

    def distrust_loaded_files(self) -> None:
        """After an unclean stop: counts every loaded file as created without a sync, so the
        next `flush` makes its name, length and directories durable.

        A file that a killed process created reaches the next start through the page cache,
        its directory entry perhaps never written. Recovery trusts its entries, and the next
        checkpoint vouches for them: a power loss after that must not take the file away.
        """
        with self._names_lock:
            self._unsynced = [*self.files, *self._unsynced]  # a file twice is synced twice

    def take_new_files(self) -> list[MappedFile]:
        """The files created without a sync since the last call; the caller syncs them with
        `sync_new_files` before it flushes their bytes."""
        with self._names_lock:
            created, self._unsynced = self._unsynced, []
        return created

    def _take_preallocated(self, start: int) -> MappedFile | None:
        future, self._next = self._next, None
        if future is None:
            return None
        try:
            mapped = future.result()
        except OSError:
            log.warning("preallocating %s failed; creating it now", offset_to_file_name(start))
            return None
        if mapped.file_from_offset == start:
            return mapped
        mapped.destroy()
        return None

    def _drop_preallocated(self) -> None:
        """Deletes the file made ahead for the next start (the log now starts elsewhere)."""
        future, self._next = self._next, None
        if future is None:
            return
        try:
            future.result().destroy()
        except OSError as exc:
            # Harmless: recovery deletes an empty file past the end of the log.
            log.warning("could not drop the file made ahead for the next start: %s", exc)

    def flush(self) -> int:
        """Makes every written byte durable; returns the flushed logical offset. Blocking."""
        sync_new_files(self.fs, self.take_new_files())
        # A snapshot: the event loop may append a file meanwhile; it is caught next time.
        pending = []
        for mapped in reversed(list(self.files)):
            if mapped.flushed_position == mapped.file_size:
                break  # full and durable: so is every file before it
            pending.append(mapped)
        # Oldest first: if a sync fails, what is marked flushed is still a prefix of the log.
        for mapped in reversed(pending):
            mapped.flush()
        return self.flushed_offset

    def release_pages(self, keep: int) -> None:
        """Lets go of this process's mapped pages more than `keep` bytes behind the durable
        end, in steps of at least `RELEASE_STEP_BYTES`, and of those that reads mapped again
        there (`note_read_back`). Blocking (call it after `flush`, on the flush thread).

        Every page a write or a read touched would otherwise stay mapped until its file is
        closed, so the broker's resident memory would grow by what it stored and what lagging
        consumers read, up to whole CommitLog files, though the page cache holds those pages
        whether mapped or not. Only durable pages well behind the writer are let go of: the
        readers that keep up read near the end, and a read further back maps its pages again
        from the page cache (a fault every 16 pages), or from disk where the kernel evicted
        them, as it may sooner once no process maps them.
        """
        low, high = self._read_back
        if high - low >= RELEASE_STEP_BYTES:
            # A note made between the read and this reset is lost: its pages only stay mapped.
            self._read_back = (0, 0)
            self._drop(low, min(high, self.released_to))
        limit = self.flushed_offset - keep
        if limit - self.released_to >= RELEASE_STEP_BYTES:
            self._drop(self.released_to, limit)
            self.released_to = limit

    def note_read_back(self, start: int, end: int) -> None:
        """Records that a read mapped [start, end) again below `released_to`; the next
        `release_pages` lets go of them once they add up to a step. Called by readers."""
        low, high = self._read_back
        if low == high:
            self._read_back = (start, end)
        else:
            self._read_back = (min(low, start), max(high, end))

    def _drop(self, start: int, end: int) -> None:
        for mapped in list(self.files):
            if mapped.end_offset <= start:
                continue
            if mapped.file_from_offset >= end:
                break
            base = mapped.file_from_offset
            mapped.drop_pages(max(start - base, 0), min(end - base, mapped.file_size))

    # -- truncation and deletion -----------------------------------------------------------
    def truncate(self, offset: int) -> None:
        """Cuts the log back to `offset`: later files deleted, the spanning file zeroed past
        it; durable when it returns. Blocking."""
        keep = []
        deleted = False
        for mapped in self.files:
            if mapped.file_from_offset >= offset and not (
                mapped.file_from_offset == offset == self.min_offset
            ):
                mapped.destroy()
                deleted = True
                continue
            if mapped.file_from_offset <= offset < mapped.end_offset:
                mapped.truncate_to(offset - mapped.file_from_offset)
            keep.append(mapped)
        self.files = keep
        # What is written again past `offset` is let go of again once durable and behind.
        self.released_to = min(self.released_to, offset)
        if not self.files:
            self._drop_preallocated()
        if deleted:
            self.fs.sync_directory(self.directory)

    def delete_first(self) -> MappedFile:
        """Removes and deletes the oldest file (retention), durably."""
        mapped = self.files.pop(0)
        mapped.destroy()
        self.fs.sync_directory(self.directory)
        return mapped

    def reset_start(self, offset: int) -> None:
        """Makes an empty log start at `offset` (a replica joining mid-stream, a trimmed queue)."""
        assert not self.files, "reset_start is for empty logs"
        mapped = self._create(offset - offset % self.file_size)
        mapped.wrote_position = mapped.flushed_position = offset % self.file_size
        self.files.append(mapped)

    def close(self) -> None:
        self._drop_preallocated()
        if self._allocator is not None:
            self._allocator.shutdown(wait=True)
        if self._warmer is not None:
            self._warmer.shutdown(wait=True, cancel_futures=True)
            self._warmer = None  # an append after close reads nothing in ahead
        self._warming = None
        for mapped in self.files:
            mapped.close()


def sync_new_files(fs: FileSystem, created: list[MappedFile]) -> None:
    """Makes files created without a sync durable: their lengths, names and the directories
    leading to them (a new queue's directory, and its topic's, may be new too). Blocking.

    Each directory is synced once, after every file: one flush of thousands of new queues of a
    topic syncs that topic's directory once, not once for each queue.
    """
    directories: dict[Path, None] = {}
    for mapped in created:
        mapped.sync_created()  # a file deleted since (truncation, expiry) is closed: skipped
        queue = mapped.path.parent
        directories.update(dict.fromkeys((queue, queue.parent, queue.parent.parent)))
    for directory in directories:
        fs.sync_directory(directory)
