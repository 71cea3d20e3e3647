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
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file

log = logging.getLogger(__name__)

_NAME_DIGITS = 20


def offset_to_file_name(offset: int) -> str:
    """RocketMQ's file name for a file starting at `offset`: 20 zero-padded digits."""
    return f"{offset:0{_NAME_DIGITS}d}"


class MappedFileError(RuntimeError):
    """The files on disk do not form a valid log (wrong size, gap, unparsable name)."""


class MappedFile:
    """One fixed-size memory-mapped file of a log."""

    def __init__(
        self, path: Path, file_size: int, *, create: bool, fs: FileSystem = OS_FILE_SYSTEM
    ) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        self._fs = fs
        if create and not fs.exists(path):
            create_sized_file(fs, path, file_size)
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

    def drop_pages(self, end: int) -> None:
        """Lets go of this process's pages before `end` (see `MappedRegion.drop_pages`)."""
        self._region.drop_pages(end)

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
    """

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        preallocate: bool = False,
        fs: FileSystem = OS_FILE_SYSTEM,
    ) -> None:
        assert file_size > 0
        self.directory = directory
        self.fs = fs
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self._allocator = ThreadPoolExecutor(1, "pocketmq-alloc") if preallocate else None
        self._next: Future[MappedFile] | None = None

    # -- loading ---------------------------------------------------------------------------
    def load(self) -> None:
        """Opens the files on disk in offset order; every file is first marked full, and none
        flushed (what a crash left in the page cache may not be on disk yet).

        Recovery then sets the real write position of the last files by scanning them.
        """
        fs = self.fs
        fs.make_dirs(self.directory)
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
        for name in names:
            start = int(name)
            if start % self.file_size:
                raise MappedFileError(
                    f"{self.directory / name} does not start on a {self.file_size}-byte boundary"
                )
            if expected is not None and start != expected:
                raise MappedFileError(
                    f"gap in {self.directory}: expected a file at {expected}, found {name}"
                )
            mapped = MappedFile(self.directory / name, self.file_size, create=False, fs=fs)
            mapped.wrote_position = self.file_size
            self.files.append(mapped)
            expected = start + self.file_size

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
        self.files.append(mapped)
        if self._allocator is not None:
            self._next = self._allocator.submit(self._create, start + self.file_size)
        return mapped

    def _create(self, start: int) -> MappedFile:
        self.fs.make_dirs(self.directory)
        path = self.directory / offset_to_file_name(start)
        mapped = MappedFile(path, self.file_size, create=True, fs=self.fs)
        log.debug("created mapped file %s", path)
        return mapped

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

    def flush(self) -> int:
        """Makes every written byte durable; returns the flushed logical offset. Blocking."""
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
        if not self.files and self._next is not None:
            self._take_preallocated(-1)
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
        if self._next is not None:
            try:
                self._take_preallocated(-1)
            except OSError as error:
                # Harmless: recovery deletes an empty file past the end of the log.
                log.warning("could not delete the preallocated file: %s", error)
        if self._allocator is not None:
            self._allocator.shutdown(wait=True)
        for mapped in self.files:
            mapped.close()
