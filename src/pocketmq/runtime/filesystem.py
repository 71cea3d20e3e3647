"""The file-system port: every file the store, the metadata, the timer log and Raft keep.

Durability claims rest on a handful of calls (`sync` of a file, `sync_directory` after a
creation, rename or deletion), so they all go through a `FileSystem`. `OsFileSystem` is the
real one; `pocketmq.testing.simulated_disk.SimulatedDisk` keeps, per file and directory, what
was written and what was synced, and on a simulated power loss keeps only what a real disk may
have kept. It also injects slow and failing calls (ENOSPC, EIO).

Hot paths stay direct: an append writes into the `buffer` of a `MappedRegion` (an `mmap`), so
the port costs nothing per message; only opening, syncing, renaming and deleting go through it.

Invariant the callers keep: a byte is reported durable only after a `sync` of its file returned,
and a file (or a deletion, or a rename) only after a `sync_directory` of its directory returned.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import Final, Protocol

log = logging.getLogger(__name__)

MADV_POPULATE_WRITE: Final = 23
"""Linux 5.14's madvise that faults pages in writable, as a write would, without writing."""


class _PageMaker:
    """Makes the pages of a shared mapping writable ahead of its writer, off the event loop.

    A first write to a page of a new file costs a fault that maps the page, allocates its block
    and marks it writable: about 1.8 us a 1 KiB write here, on the event loop. Pages read in
    beforehand (`POSIX_FADV_WILLNEED`) still fault, at about 0.7 us; `MADV_POPULATE_WRITE`
    takes the whole fault ahead (0.2 us a write left). It is called through ctypes, which lets
    go of the GIL for the call, as `mmap.madvise` does not: on the warming thread the faults
    then run beside the event loop instead of in turn with it. The call changes no byte."""

    def __init__(self) -> None:
        self._madvise: Callable[[int, int, int], int] | None = None
        try:
            madvise = ctypes.CDLL(None, use_errno=True).madvise
        except (OSError, AttributeError):
            return
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        madvise.restype = ctypes.c_int
        self._madvise = madvise

    def populate(self, address: int, length: int) -> bool:
        """Faults `length` bytes at `address` in writable; False where the kernel cannot."""
        if self._madvise is None:
            return False
        if self._madvise(address, length, MADV_POPULATE_WRITE) == 0:
            return True
        if ctypes.get_errno() == errno.EINVAL:  # a kernel before 5.14
            log.debug("MADV_POPULATE_WRITE is not supported; pages are read in ahead instead")
            self._madvise = None
        return False


_PAGE_MAKER: Final = _PageMaker()

Buffer = mmap.mmap | bytearray


class FileHandle(Protocol):
    """An open file, read and written at explicit positions."""

    def pread(self, size: int, offset: int) -> bytes: ...

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        """Writes all of `data` at `offset`. Raises OSError (ENOSPC, EIO)."""
        ...

    def size(self) -> int: ...

    def truncate(self, size: int) -> None:
        """Sets the length: cuts, or extends with zeros (sparse)."""
        ...

    def sync(self) -> None:
        """`fdatasync`: what was written (and the length) survives a power loss."""
        ...

    def close(self) -> None: ...


class MappedRegion(Protocol):
    """A whole file mapped into memory; writes to `buffer` land in the page cache."""

    buffer: Buffer

    def sync(self) -> None:
        """Makes every byte written to `buffer` durable. Blocking."""
        ...

    def drop_pages(self, start: int, end: int) -> None:
        """Lets go of this process's pages in [start, end), whole pages only (they stay in the
        page cache; a read maps them again). Ignored once closed."""
        ...

    def read_ahead(self, enabled: bool) -> None:
        """Whether a page fault reads the pages around it in (the default) or only its own."""
        ...

    def warm(self, start: int, end: int) -> None:
        """Brings the file's pages in [start, end) into the page cache by reading them, so a
        write through `buffer` there finds its page made. Only reads: safe beside writers.
        Blocking (call it from a thread); errors are ignored (it only saves time)."""
        ...

    def close(self) -> None:
        """Unmaps (when no view is left) and closes; idempotent."""
        ...


class FileSystem(Protocol):
    """The calls that make and keep files; paths are absolute or relative `Path`s."""

    def open(self, path: Path, *, create: bool = False) -> FileHandle:
        """Opens `path` for reading and writing. Raises FileNotFoundError without `create`."""
        ...

    def map(self, path: Path, size: int) -> MappedRegion:
        """Maps the existing file `path`, which must be exactly `size` bytes.

        Raises:
            ValueError: the file has another size (the message names both).
        """
        ...

    def read_bytes(self, path: Path) -> bytes: ...

    def exists(self, path: Path) -> bool: ...

    def is_dir(self, path: Path) -> bool: ...

    def list_dir(self, path: Path) -> list[str]:
        """Names in `path`, sorted; empty when it does not exist."""
        ...

    def make_dirs(self, path: Path, *, durable: bool = True) -> None:
        """Creates `path` and its missing parents, each creation made durable unless told
        otherwise (then the caller syncs the parents later)."""
        ...

    def remove(self, path: Path) -> None:
        """Deletes the file `path` if it exists (durable after `sync_directory`)."""
        ...

    def rename(self, source: Path, target: Path) -> None:
        """Atomically replaces `target` by `source` (durable after `sync_directory`)."""
        ...

    def link(self, source: Path, target: Path) -> None:
        """A second name for `source`. Raises OSError where hard links are not supported."""
        ...

    def sync_directory(self, path: Path) -> None:
        """Makes creations, renames and deletions in `path` durable."""
        ...

    def mtime_ms(self, path: Path) -> int: ...


# -- the real file system ------------------------------------------------------------------


class OsFile:
    """A file descriptor."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def pread(self, size: int, offset: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, offset)
            view = view[written:]
            offset += written

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def truncate(self, size: int) -> None:
        os.ftruncate(self._fd, size)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class OsMappedRegion:
    """An `mmap` of a file, synced with `fdatasync` on a descriptor opened for the sync.

    The mapping keeps a descriptor of its own (Python's `mmap` duplicates the one it is given),
    so the region holds no other: one open file per mapped file, as RocketMQ's broker holds,
    which is what lets a broker keep a ConsumeQueue file mapped for each of 16,000 queues.
    Opening for a sync costs microseconds against the sync's fraction of a millisecond.
    Linux writes back pages dirtied through a shared mapping on `fdatasync` of any descriptor
    of the file, and the call releases the GIL, so a flush thread never stalls the event loop.
    """

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        mapping = mmap.mmap(fd, size)
        self.buffer: Buffer = mapping
        os.close(fd)
        self._closed = False
        # Where the mapping starts, for `warm`: the ctypes view is dropped at once, as an
        # exported buffer would keep the mapping from closing.
        view = ctypes.c_char.from_buffer(mapping)
        self._address = ctypes.addressof(view)
        del view

    def sync(self) -> None:
        if self._closed:
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    def drop_pages(self, start: int, end: int) -> None:
        # `mmap.madvise` keeps the GIL for the call, so a close on another thread cannot unmap
        # the range under it (a closed mapping raises ValueError instead).
        start += -start % mmap.PAGESIZE
        end -= end % mmap.PAGESIZE
        if end <= start or not hasattr(mmap, "MADV_DONTNEED"):
            return
        if isinstance(self.buffer, mmap.mmap):
            with contextlib.suppress(ValueError):
                self.buffer.madvise(mmap.MADV_DONTNEED, start, end - start)

    def read_ahead(self, enabled: bool) -> None:
        # A fault in a hole of a sparse file reads in the whole read-ahead window as zero pages
        # (8 MiB on some disks): about 2 ms and the file's whole size in page cache, for each
        # queue's first entry. Files appended to in small pieces turn it off while written.
        if not self._closed and hasattr(mmap, "MADV_RANDOM") and isinstance(self.buffer, mmap.mmap):
            self.buffer.madvise(mmap.MADV_NORMAL if enabled else mmap.MADV_RANDOM)

    def warm(self, start: int, end: int) -> None:
        # See `_PageMaker`; where it cannot, the pages are read in (the kernel's read-ahead,
        # one call, no copy), which saves half the fault. Neither changes the file.
        start -= start % mmap.PAGESIZE
        if self._closed or _PAGE_MAKER.populate(self._address + start, end - start):
            return
        if not hasattr(os, "posix_fadvise"):
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_WILLNEED)
        except OSError as exc:
            log.debug("reading %s ahead of its writer failed: %s", self.path, exc)
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.buffer.close()  # type: ignore[union-attr]
        except BufferError:
            # A reader still holds a view; the mapping goes away when it drops the view.
            log.debug("mapping of %s still exported; left to the garbage collector", self.path)


class OsFileSystem:
    """The machine's file system (POSIX; directory syncs are skipped where unsupported)."""

    def open(self, path: Path, *, create: bool = False) -> FileHandle:
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        return OsFile(os.open(path, flags, 0o644))

    def map(self, path: Path, size: int) -> MappedRegion:
        fd = os.open(path, os.O_RDWR)
        try:
            actual = os.fstat(fd).st_size
            if actual != size:
                raise ValueError(f"{path} is {actual} bytes, expected {size}")
            return OsMappedRegion(path, fd, size)
        except BaseException:
            os.close(fd)
            raise

    def read_bytes(self, path: Path) -> bytes:
        return path.read_bytes()

    def exists(self, path: Path) -> bool:
        return path.exists()

    def is_dir(self, path: Path) -> bool:
        return path.is_dir()

    def list_dir(self, path: Path) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def make_dirs(self, path: Path, *, durable: bool = True) -> None:
        if path.is_dir():
            return
        missing = []
        current = path
        while not current.exists():
            missing.append(current)
            current = current.parent
        for directory in reversed(missing):
            directory.mkdir(exist_ok=True)
            if durable:
                self.sync_directory(directory.parent)

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def rename(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def link(self, source: Path, target: Path) -> None:
        os.link(source, target)

    def sync_directory(self, path: Path) -> None:
        if os.name != "posix":
            return  # Windows cannot open a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def mtime_ms(self, path: Path) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000


OS_FILE_SYSTEM = OsFileSystem()
"""Stateless; shared by everything that is not given another file system."""


# -- durable patterns ----------------------------------------------------------------------


def create_sized_file(fs: FileSystem, path: Path, size: int, *, durable: bool = True) -> None:
    """Creates `path` as `size` zero bytes, durably, and never as a short file.

    Sized and synced under a temporary name, renamed, then the directory synced: after a
    crash the file is either absent or whole (loaders delete leftover `.tmp` files). With
    `durable=False` nothing is synced: after a process crash the file is whole, after a power
    loss it may be absent or short until the caller syncs it and its directory.
    """
    temporary = path.with_name(path.name + ".tmp")
    handle = fs.open(temporary, create=True)
    try:
        handle.truncate(size)
        if durable:
            handle.sync()
    finally:
        handle.close()
    fs.rename(temporary, path)
    if durable:
        fs.sync_directory(path.parent)


def write_file_durably(fs: FileSystem, path: Path, content: bytes) -> None:
    """Writes `content` as the whole of `path` and syncs it (the name is not synced)."""
    handle = fs.open(path, create=True)
    try:
        handle.truncate(0)
        handle.pwrite(content, 0)
        handle.sync()
    finally:
        handle.close()
