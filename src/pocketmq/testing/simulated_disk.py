"""A simulated disk: a `FileSystem` that remembers what was synced and can lose power.

Modelled on TigerBeetle's simulated storage and FoundationDB's "buggify": every file keeps the
bytes written so far (the page cache) and the bytes its last `sync` made durable; every
directory keeps its durable entries and the creations, renames and deletions made since its last
`sync_directory`. `power_loss()` (or `lose_power_at(n)`, at the n-th call) builds the disk that a
real machine could find after the power came back:

- a file keeps its durable bytes; each 4 KiB page written since then comes back old, new, or
  torn (a mix of old and new 512-byte sectors), chosen by the seeded random generator, as a
  kernel that wrote back some dirty pages and not others; a length changed since the last sync
  comes back old or new;
- a directory keeps its durable entries plus a random prefix of the changes made since (a
  journal replays metadata in order, and may have written any prefix of it).

After a power loss every call made through the old files raises EIO, and writes into old
mappings go nowhere, as they would in a process that died with the machine; `reboot()` then
returns the disk as found, for a new store to recover from. `crash_process()` is SIGKILL: the
page cache survives, synced or not, which is why SIGKILL alone can never prove an fsync.

Faults: `fail(operation, errno)` makes the next calls of one kind fail (EIO or ENOSPC on
`write`, `sync`, `create`, `rename`, `sync_directory`); `sync_delay_s` slows every sync.
"""

from __future__ import annotations

import errno as errnos
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from pocketmq.runtime.filesystem import Buffer, FileHandle, MappedRegion

PAGE_BYTES = 4096
SECTOR_BYTES = 512


@dataclass(eq=False)
class _Inode:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""


@dataclass(eq=False)
class _Directory:
    entries: dict[str, _Inode | _Directory] = field(default_factory=dict)
    durable: dict[str, _Inode | _Directory] = field(default_factory=dict)
    pending: list[tuple[str, _Inode | _Directory | None]] = field(default_factory=list)

    def put(self, name: str, node: _Inode | _Directory | None) -> None:
        if node is None:
            self.entries.pop(name, None)
        else:
            self.entries[name] = node
        self.pending.append((name, node))


@dataclass
class _Fault:
    operation: str
    code: int
    path_part: str
    remaining: int


class PowerLost(OSError):
    """A call on a disk that has lost power (EIO)."""


class SimulatedDisk:
    """An in-memory `FileSystem` with durability, power loss and fault injection.

    Args:
        seed: drives every random choice of a power loss, so a failure replays exactly.
    """

    def __init__(self, seed: int = 0) -> None:
        self.random = random.Random(seed)
        self._root = _Directory()
        self._lock = threading.RLock()
        self._epoch = 0
        self._powered = True
        self._faults: list[_Fault] = []
        self._lose_power_at: int | None = None
        self._process_only = False
        self._crashed_root: _Directory | None = None
        self._names_kept: bool | None = None
        self.calls = 0
        self.sync_delay_s = 0.0
        self.synced_paths: list[str] = []
        """Every path synced, in order (what a test checks a flush touched)."""
        self.warmed: list[tuple[Path, int, int]] = []
        """Every (path, start, end) read in ahead of a writer (`MappedRegion.warm`)."""

    # -- power ----------------------------------------------------------------------------
    def lose_power_at(self, call: int, *, process_only: bool = False) -> None:
        """Loses power (or, with `process_only`, crashes the process) just before the
        `call`-th call from now (1 is the next one)."""
        self._lose_power_at = self.calls + call
        self._process_only = process_only

    def power_loss(self, *, unsynced_names_kept: bool | None = None) -> None:
        """The power goes now: later calls raise EIO until `reboot`.

        Args:
            unsynced_names_kept: whether the directory changes made since each directory's
                last sync survive: all (True), none (False), or a random prefix (None).
        """
        with self._lock:
            if self._powered:
                self._names_kept = unsynced_names_kept
                self._crashed_root = self._crash_directory(self._root, {})
                self._powered = False

    def crash_process(self) -> None:
        """The process dies now (SIGKILL): later calls raise EIO until `reboot`, and the page
        cache, synced or not, stays as it is."""
        with self._lock:
            self._powered = False

    @property
    def powered(self) -> bool:
        return self._powered

    def reboot(self) -> None:
        """Brings the disk back as the power loss left it, or after a process crash as the
        page cache was; files opened before stay dead."""
        with self._lock:
            if self._crashed_root is not None:
                self._root = self._crashed_root
                self._crashed_root = None
            self._epoch += 1
            self._powered = True
            self._lose_power_at = None

    def _crash_directory(self, directory: _Directory, done: dict[int, _Inode]) -> _Directory:
        entries = dict(directory.durable)
        pending = directory.pending
        if self._names_kept is None:
            kept = self.random.randint(0, len(pending))
        else:
            kept = len(pending) if self._names_kept else 0
        for name, node in pending[:kept]:
            if node is None:
                entries.pop(name, None)
            else:
                entries[name] = node
        crashed = _Directory()
        for name, node in entries.items():
            if isinstance(node, _Directory):
                crashed.entries[name] = self._crash_directory(node, done)
            else:
                if id(node) not in done:
                    done[id(node)] = self._crash_inode(node)
                crashed.entries[name] = done[id(node)]
        crashed.durable = dict(crashed.entries)
        return crashed

    def _crash_inode(self, inode: _Inode) -> _Inode:
        old, new = inode.durable, bytes(inode.data)
        length = len(new) if len(new) == len(old) or self.random.random() < 0.5 else len(old)
        image = bytearray(old[:length].ljust(length, b"\0"))
        for start in range(0, length, PAGE_BYTES):
            end = min(start + PAGE_BYTES, length)
            new_page = new[start:end].ljust(end - start, b"\0")
            if new_page == image[start:end]:
                continue
            choice = self.random.randrange(3)
            if choice == 1:
                image[start:end] = new_page
            elif choice == 2:
                for sector in range(start, end, SECTOR_BYTES):
                    if self.random.random() < 0.5:
                        stop = min(sector + SECTOR_BYTES, end)
                        image[sector:stop] = new_page[sector - start : stop - start]
        return _Inode(image, bytes(image))

    # -- faults ---------------------------------------------------------------------------
    def fail(
        self, operation: str, code: int = errnos.EIO, *, path_part: str = "", count: int = 1
    ) -> None:
        """The next `count` calls of `operation` on a path containing `path_part` fail.

        Operations: write (pwrite, growing truncate), sync, create, rename, sync_directory.
        """
        self._faults.append(_Fault(operation, code, path_part, count))

    def clear_faults(self) -> None:
        self._faults.clear()

    def _call(self, operation: str, path: PurePosixPath | Path, epoch: int | None = None) -> None:
        """Counts a call; raises for a lost power or an injected fault."""
        self.calls += 1
        if self._lose_power_at is not None and self.calls >= self._lose_power_at:
            self._lose_power_at = None
            if self._process_only:
                self.crash_process()
            else:
                self.power_loss()
        if not self._powered or (epoch is not None and epoch != self._epoch):
            raise PowerLost(errnos.EIO, "simulated power loss", str(path))
        for fault in self._faults:
            if fault.operation == operation and fault.path_part in str(path):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                raise OSError(fault.code, os.strerror(fault.code), str(path))

    # -- paths ----------------------------------------------------------------------------
    def _parts(self, path: Path) -> tuple[str, ...]:
        return PurePosixPath(os.path.abspath(path)).parts[1:]

    def _lookup(self, path: Path) -> _Inode | _Directory | None:
        node: _Inode | _Directory = self._root
        for part in self._parts(path):
            if not isinstance(node, _Directory) or part not in node.entries:
                return None
            node = node.entries[part]
        return node

    def _parent(self, path: Path) -> tuple[_Directory, str]:
        parts = self._parts(path)
        parent = self._lookup(Path("/", *parts[:-1]))
        if not isinstance(parent, _Directory):
            raise FileNotFoundError(errnos.ENOENT, "no such directory", str(path.parent))
        return parent, parts[-1]

    def _inode(self, path: Path) -> _Inode:
        node = self._lookup(path)
        if node is None:
            raise FileNotFoundError(errnos.ENOENT, "no such file", str(path))
        if isinstance(node, _Directory):
            raise IsADirectoryError(errnos.EISDIR, "is a directory", str(path))
        return node

    # -- FileSystem -----------------------------------------------------------------------
    def open(self, path: Path, *, create: bool = False) -> FileHandle:
        with self._lock:
            node = self._lookup(path)
            if node is None and create:
                self._call("create", path)
                parent, name = self._parent(path)
                node = _Inode()
                parent.put(name, node)
            else:
                self._call("open", path)
            if node is None:
                raise FileNotFoundError(errnos.ENOENT, "no such file", str(path))
            if isinstance(node, _Directory):
                raise IsADirectoryError(errnos.EISDIR, "is a directory", str(path))
            return _SimulatedFile(self, node, path, self._epoch)

    def map(self, path: Path, size: int) -> MappedRegion:
        with self._lock:
            self._call("map", path)
            inode = self._inode(path)
            if len(inode.data) != size:
                raise ValueError(f"{path} is {len(inode.data)} bytes, expected {size}")
            return _SimulatedRegion(self, inode, path, self._epoch)

    def read_bytes(self, path: Path) -> bytes:
        with self._lock:
            self._call("read", path)
            return bytes(self._inode(path).data)

    def exists(self, path: Path) -> bool:
        with self._lock:
            self._call("stat", path)
            return self._lookup(path) is not None

    def is_dir(self, path: Path) -> bool:
        with self._lock:
            self._call("stat", path)
            return isinstance(self._lookup(path), _Directory)

    def list_dir(self, path: Path) -> list[str]:
        with self._lock:
            self._call("list", path)
            node = self._lookup(path)
            return sorted(node.entries) if isinstance(node, _Directory) else []

    def make_dirs(self, path: Path, *, durable: bool = True) -> None:
        with self._lock:
            node: _Inode | _Directory = self._root
            for part in self._parts(path):
                if not isinstance(node, _Directory):
                    raise NotADirectoryError(errnos.ENOTDIR, "not a directory", str(path))
                child = node.entries.get(part)
                if child is None:
                    self._call("create", path)
                    child = _Directory()
                    node.put(part, child)
                    if durable:
                        node.durable = dict(node.entries)  # the real one syncs the parent
                        node.pending.clear()
                node = child

    def remove(self, path: Path) -> None:
        with self._lock:
            self._call("remove", path)
            parent, name = self._parent(path)
            if isinstance(parent.entries.get(name), _Inode):
                parent.put(name, None)

    def rename(self, source: Path, target: Path) -> None:
        with self._lock:
            self._call("rename", target)
            inode = self._inode(source)
            source_parent, source_name = self._parent(source)
            target_parent, target_name = self._parent(target)
            target_parent.put(target_name, inode)
            source_parent.put(source_name, None)

    def link(self, source: Path, target: Path) -> None:
        with self._lock:
            self._call("create", target)
            inode = self._inode(source)
            parent, name = self._parent(target)
            if name in parent.entries:
                raise FileExistsError(errnos.EEXIST, "file exists", str(target))
            parent.put(name, inode)

    def sync_directory(self, path: Path) -> None:
        with self._lock:
            self._call("sync_directory", path)
            node = self._lookup(path)
            if not isinstance(node, _Directory):
                raise FileNotFoundError(errnos.ENOENT, "no such directory", str(path))
            node.durable = dict(node.entries)
            node.pending.clear()
            self.synced_paths.append(str(path))

    def mtime_ms(self, path: Path) -> int:
        with self._lock:
            self._inode(path)
            return 0

    def _sync(self, inode: _Inode, path: Path, epoch: int) -> None:
        if self.sync_delay_s:
            time.sleep(self.sync_delay_s)
        with self._lock:
            self._call("sync", path, epoch)
            inode.durable = bytes(inode.data)
            self.synced_paths.append(str(path))


class _SimulatedFile:
    def __init__(self, disk: SimulatedDisk, inode: _Inode, path: Path, epoch: int) -> None:
        self._disk = disk
        self._inode = inode
        self._path = path
        self._epoch = epoch

    def pread(self, size: int, offset: int) -> bytes:
        with self._disk._lock:
            self._disk._call("read", self._path, self._epoch)
            return bytes(self._inode.data[offset : offset + size])

    def pwrite(self, data: bytes | bytearray | memoryview, offset: int) -> None:
        with self._disk._lock:
            self._disk._call("write", self._path, self._epoch)
            content = self._inode.data
            end = offset + len(data)
            if end > len(content):
                content.extend(bytes(end - len(content)))
            content[offset:end] = data

    def size(self) -> int:
        with self._disk._lock:
            self._disk._call("stat", self._path, self._epoch)
            return len(self._inode.data)

    def truncate(self, size: int) -> None:
        with self._disk._lock:
            content = self._inode.data
            self._disk._call("write" if size > len(content) else "cut", self._path, self._epoch)
            if size < len(content):
                del content[size:]
            else:
                content.extend(bytes(size - len(content)))

    def sync(self) -> None:
        self._disk._sync(self._inode, self._path, self._epoch)

    def close(self) -> None:
        pass


class _SimulatedRegion:
    def __init__(self, disk: SimulatedDisk, inode: _Inode, path: Path, epoch: int) -> None:
        self._disk = disk
        self._inode = inode
        self._path = path
        self._epoch = epoch
        self.buffer: Buffer = inode.data

    def sync(self) -> None:
        self._disk._sync(self._inode, self._path, self._epoch)

    def drop_pages(self, start: int, end: int) -> None:
        pass

    def read_ahead(self, enabled: bool) -> None:
        pass

    def warm(self, start: int, end: int) -> None:
        self._disk.warmed.append((self._path, start, end))

    def close(self) -> None:
        pass
