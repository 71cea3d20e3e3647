"""A node's Raft state on disk: log segments with a CRC per entry, the hard state in two
alternating checksummed slots, and the latest snapshot. Recovery keeps the longest valid prefix
of the log and stops at the first bad entry.

Files go through a `FileSystem`, so a simulated disk can lose power under them. What `sync`
returns from is durable: the log entries appended so far (a segment that fills up is synced
before the next one starts), the hard state when its term or vote moved, every segment created
or deleted (its directory is synced), and the snapshot.
"""

from __future__ import annotations

import logging
import struct
import zlib
from pathlib import Path

from pocketmq.raft.messages import Entry, EntryKind, HardState, Snapshot
from pocketmq.raft.storage import Restored
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileHandle, FileSystem, write_file_durably

log = logging.getLogger(__name__)

_RECORD = struct.Struct(">IIQQB")  # crc, data length, term, index, kind
_STATE = struct.Struct(">QQQQI")  # generation, term, vote, commit, crc
_SNAPSHOT = struct.Struct(">QQI")  # index, term, crc of the image
SEGMENT_BYTES = 64 << 20


def _crc(*parts: bytes) -> int:
    crc = 0
    for part in parts:
        crc = zlib.crc32(part, crc)
    return crc


class DiskStorage:
    """Implements `LogStorage` in a directory of its own."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = SEGMENT_BYTES,
        fs: FileSystem = OS_FILE_SYSTEM,
        fsync_entries: bool = True,
    ) -> None:
        self.directory = directory
        self._fs = fs
        # Off, appended entries reach the page cache only: they survive a process crash, not
        # a power loss (a DLedger group with ASYNC_FLUSH). Votes and terms are fsynced anyway.
        self._fsync_entries = fsync_entries
        self._segments_dir = directory / "log"
        fs.make_dirs(self._segments_dir)
        self._segment_bytes = segment_bytes
        self._state_path = directory / "hardstate"
        self._generation = 0
        self._state = HardState()
        self._state_dirty = False
        self._vote_changed = False
        self._snapshot = Snapshot()
        self._first = 1
        self._locations: list[tuple[int, int]] = []
        """(segment first index, byte offset) of every stored entry from `_first` on."""
        self._segments: list[int] = []
        """First index of each segment file, in order."""
        self._active: int | None = None  # the segment being appended to, its file open
        self._file: FileHandle | None = None
        self._file_bytes = 0  # the active segment's length, pending bytes included
        self._pending = bytearray()  # appended to the active segment, not yet written

    # -- recovery ----------------------------------------------------------------------------
    def load(self) -> Restored:
        self._close()
        self._state = self._load_state()
        self._snapshot = self._load_snapshot()
        entries = self._load_segments()
        kept = [e for e in entries if e.index > self._snapshot.index]
        if entries and entries[0].index > self._snapshot.index + 1:
            log.error(
                "raft log in %s starts at %d but the snapshot ends at %d: entries are missing; "
                "starting from the snapshot alone",
                self.directory,
                entries[0].index,
                self._snapshot.index,
            )
            kept = []
        return Restored(self._state, self._snapshot, kept)

    def _load_state(self) -> HardState:
        try:
            raw = self._fs.read_bytes(self._state_path)
        except FileNotFoundError:
            return HardState()
        best: tuple[int, HardState] | None = None
        for slot in range(2):
            chunk = raw[slot * _STATE.size : (slot + 1) * _STATE.size]
            if len(chunk) < _STATE.size:
                continue
            generation, term, vote, commit, crc = _STATE.unpack(chunk)
            if crc != _crc(chunk[:-4]):
                continue
            if best is None or generation > best[0]:
                best = (generation, HardState(term, vote, commit))
        if best is None:
            raise ValueError(f"{self._state_path}: both hard state slots are corrupt")
        self._generation = best[0]
        return best[1]

    def _load_snapshot(self) -> Snapshot:
        path = self.directory / "snapshot"
        try:
            raw = self._fs.read_bytes(path)
        except FileNotFoundError:
            return Snapshot()
        index, term, crc = _SNAPSHOT.unpack_from(raw)
        data = raw[_SNAPSHOT.size :]
        if crc != _crc(raw[:16], data):
            raise ValueError(f"{path}: snapshot checksum mismatch")
        return Snapshot(index, term, data)

    def _load_segments(self) -> list[Entry]:
        names = [
            self._segments_dir / name
            for name in self._fs.list_dir(self._segments_dir)
            if name.endswith(".seg")
        ]
        entries: list[Entry] = []
        self._segments, self._locations = [], []
        for number, path in enumerate(names):
            first = int(path.stem)
            if entries and first != entries[-1].index + 1:
                log.warning(
                    "%s does not follow the previous segment: dropping it and later ones", path
                )
                self._drop_files(names[number:])
                break
            raw = self._fs.read_bytes(path)
            offset, good = 0, True
            while offset < len(raw):
                entry, size = _decode(raw, offset)
                expected = entries[-1].index + 1 if entries else first
                if entry is None or entry.index != expected:
                    good = False
                    break
                entries.append(entry)
                self._locations.append((first, offset))
                offset += size
            self._segments.append(first)
            if not good:
                log.warning(
                    "%s: bad entry at byte %d of %d: keeping the %d entries before it",
                    path,
                    offset,
                    len(raw),
                    len(entries),
                )
                self._cut_file(path, offset)
                self._drop_files(names[number + 1 :])
                break
        self._first = entries[0].index if entries else self._snapshot.index + 1
        if self._segments and not entries:
            self._drop_files(names)
            self._segments = []
        return entries

    # -- writing -----------------------------------------------------------------------------
    def append(self, entries: list[Entry]) -> None:
        if not entries:
            return
        first = entries[0].index
        last = self._first + len(self._locations) - 1
        if first <= last:
            self._truncate_from(first)
        elif not self._locations:
            self._first = first
        assert first == self._first + len(self._locations), (first, self._first)
        for entry in entries:
            if self._active is None or self._file_size() >= self._segment_bytes:
                self._open_segment(entry.index)
            assert self._active is not None
            record = _encode(entry)
            self._locations.append((self._active, self._file_size()))
            self._write(record)

    def set_hard_state(self, state: HardState) -> None:
        if (state.term, state.vote) != (self._state.term, self._state.vote):
            self._vote_changed = True
        self._state = state
        self._state_dirty = True

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        self.sync()
        path = self.directory / "snapshot"
        header = struct.pack(">QQ", snapshot.index, snapshot.term)
        content = header + struct.pack(">I", _crc(header, snapshot.data)) + snapshot.data
        self._replace_durably(path, content)
        holds = self._term_at(snapshot.index) == snapshot.term
        self._snapshot = snapshot
        if holds:
            self._compact_to(snapshot.index)
        else:
            self._truncate_from(self._first)
            self._first = snapshot.index + 1

    def sync(self) -> None:
        """Flushes and fsyncs the log; then the hard state (fsynced when term or vote moved;
        a commit index alone may be lost and learned again)."""
        self._sync_active()
        if self._state_dirty:
            self._write_state(durable=self._vote_changed)
            self._state_dirty = self._vote_changed = False

    def close(self) -> None:
        self.sync()
        self._close()

    # -- internals ---------------------------------------------------------------------------
    def _write_state(self, *, durable: bool) -> None:
        self._generation += 1
        state = self._state
        body = struct.pack(">QQQQ", self._generation, state.term, state.vote, state.commit)
        slot = self._generation % 2
        record = body + struct.pack(">I", _crc(body))
        if not self._fs.exists(self._state_path):
            # Whole or not at all: a name made durable before its first slot would, after a
            # power loss, be a file of no valid slot, which load refuses.
            self._replace_durably(self._state_path, bytes(slot * _STATE.size) + record)
            return
        out = self._fs.open(self._state_path)
        try:
            out.pwrite(record, slot * _STATE.size)
            if durable:
                out.sync()
        finally:
            out.close()

    def _replace_durably(self, path: Path, content: bytes) -> None:
        """`path` holds `content` after a power loss, or what it held before."""
        tmp = path.with_suffix(".tmp")
        # A fresh file, never one a power loss left under the temporary name: that name can
        # still point at the file now called `path`, which truncating would empty.
        if self._fs.exists(tmp):
            self._fs.remove(tmp)
        write_file_durably(self._fs, tmp, content)
        self._fs.rename(tmp, path)
        self._fs.sync_directory(self.directory)

    def _term_at(self, index: int) -> int | None:
        position = index - self._first
        if not 0 <= position < len(self._locations):
            return None
        segment, offset = self._locations[position]
        source = self._fs.open(self._segment_path(segment))
        try:
            header = source.pread(_RECORD.size, offset)
        finally:
            source.close()
        return int(_RECORD.unpack(header)[2]) if len(header) == _RECORD.size else None

    def _truncate_from(self, index: int) -> None:
        """Drops the stored entries at and after `index`."""
        self.sync()
        position = index - self._first
        if position >= len(self._locations):
            return
        segment, offset = self._locations[max(position, 0)]
        del self._locations[max(position, 0) :]
        later = [s for s in self._segments if s > segment]
        self._drop_files([self._segment_path(s) for s in later])
        self._segments = [s for s in self._segments if s <= segment]
        if offset == 0 or position < 0:
            self._drop_files([self._segment_path(segment)])
            self._segments.remove(segment)
        else:
            if self._active != segment:
                self._close()
                self._cut_file(self._segment_path(segment), offset)
            else:
                assert self._file is not None
                assert not self._pending
                self._file.truncate(offset)
                self._file.sync()
                self._file_bytes = offset
        if self._active is not None and self._active not in self._segments:
            self._close()

    def _compact_to(self, index: int) -> None:
        """Deletes segments holding only entries up to `index`."""
        keep_from = 0
        for number, first in enumerate(self._segments):
            next_first = (
                self._segments[number + 1]
                if number + 1 < len(self._segments)
                else self._first + len(self._locations)
            )
            if next_first - 1 <= index and first != self._active:
                keep_from = number + 1
        dropped = self._segments[:keep_from]
        if not dropped:
            return
        self._drop_files([self._segment_path(s) for s in dropped])
        self._segments = self._segments[keep_from:]
        new_first = self._segments[0] if self._segments else index + 1
        del self._locations[: max(0, new_first - self._first)]
        self._first = new_first

    def _open_segment(self, first: int) -> None:
        self._sync_active()  # a full segment is durable before the next one starts
        self._close()
        path = self._segment_path(first)
        self._file = self._fs.open(path, create=True)
        self._file_bytes = self._file.size()
        self._active = first
        if first not in self._segments:
            self._segments.append(first)
            self._fs.sync_directory(self._segments_dir)

    def _file_size(self) -> int:
        assert self._file is not None
        return self._file_bytes

    def _write(self, data: bytes) -> None:
        assert self._file is not None
        self._pending += data
        self._file_bytes += len(data)

    def _sync_active(self) -> None:
        if self._file is None:
            return
        if self._pending:
            self._file.pwrite(self._pending, self._file_bytes - len(self._pending))
            self._pending.clear()
        if self._fsync_entries:
            self._file.sync()

    def _cut_file(self, path: Path, length: int) -> None:
        handle = self._fs.open(path)
        try:
            handle.truncate(length)
            handle.sync()
        finally:
            handle.close()

    def _close(self) -> None:
        if self._file is not None:
            if self._pending:
                # Written, not synced: `sync` is what makes entries durable.
                self._file.pwrite(self._pending, self._file_bytes - len(self._pending))
                self._pending.clear()
            self._file.close()
        self._file = None
        self._active = None

    def _segment_path(self, first: int) -> Path:
        return self._segments_dir / f"{first:020d}.seg"

    def _drop_files(self, paths: list[Path]) -> None:
        """Deletes segment files durably: a deleted segment that came back after a power loss
        could continue the log with stale entries."""
        for path in paths:
            if self._active is not None and path == self._segment_path(self._active):
                self._close()
            self._fs.remove(path)
        if paths:
            self._fs.sync_directory(self._segments_dir)


def _encode(entry: Entry) -> bytes:
    header = _RECORD.pack(0, len(entry.data), entry.term, entry.index, entry.kind)
    crc = _crc(header[4:], entry.data)
    return struct.pack(">I", crc) + header[4:] + entry.data


def _decode(raw: bytes, offset: int) -> tuple[Entry | None, int]:
    if len(raw) - offset < _RECORD.size:
        return None, 0
    crc, length, term, index, kind = _RECORD.unpack_from(raw, offset)
    end = offset + _RECORD.size + length
    if end > len(raw) or kind not in (0, 1):
        return None, 0
    data = raw[offset + _RECORD.size : end]
    if crc != _crc(raw[offset + 4 : offset + _RECORD.size], data):
        return None, 0
    return Entry(term, index, data, EntryKind(kind)), end - offset
