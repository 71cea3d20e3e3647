"""The timer checkpoint: how far the timer store has enqueued and delivered, in one small file.

Fields (`TimerProgress`): the next ConsumeQueue offset of the timer topic to enqueue, the next
slot time to deliver and how many entries of that slot are done, the timer log's end at a clean
stop, the count of pending timers, the wheel's geometry (precision and slot count, which decide
whether the wheel file can be reused), and the clean-stop flag.

The file is one mapped page holding two copies, A at byte 0 and B at byte 128, each with a
sequence number and a CRC. `save` writes the copy the last save did not write, so a write cut
short (a crash in the middle of it) leaves the other copy intact; `open` takes the valid copy
with the higher sequence number. Saving is a memory write (cheap enough after every delivered
message, and it survives a killed process because the page cache does); `flush` (msync) makes
it survive a power loss and is blocking.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file

PAGE_SIZE: Final = 4096
_COPY_OFFSETS: Final = (0, 128)
_MAGIC: Final = 0x71C4EC01
_FLAG_CLEAN: Final = 0x1
# magic, flags, seq, enqueue_offset, read_time_ms, slot_done, log_end, pending, precision_ms,
# slot_count, crc
_LAYOUT: Final = struct.Struct(">IIqqqqqqiiI")
_CRC_COVERED: Final = _LAYOUT.size - 4


@dataclass(frozen=True, slots=True)
class TimerProgress:
    """What the checkpoint records.

    Attributes:
        enqueue_offset: Next ConsumeQueue offset of `rmq_sys_wheel_timer` queue 0 to enqueue.
        read_time_ms: The next slot time to deliver; every earlier slot is delivered.
        slot_done: Entries of the `read_time_ms` slot already handled, in chain order.
        log_end: The timer log's end position (trusted only after a clean stop).
        pending: Timers linked into the wheel and not delivered yet.
        precision_ms: The wheel's precision when this was written.
        slot_count: The wheel's slot count when this was written.
        clean: The store was stopped cleanly after this was written.
    """

    enqueue_offset: int = 0
    read_time_ms: int = 0
    slot_done: int = 0
    log_end: int = 0
    pending: int = 0
    precision_ms: int = 0
    slot_count: int = 0
    clean: bool = False


class TimerCheckpoint:
    """The checkpoint file; `progress` is the last saved value."""

    def __init__(self, path: Path, *, fs: FileSystem = OS_FILE_SYSTEM) -> None:
        """Opens the checkpoint at `path` (created empty when missing)."""
        fs.make_dirs(path.parent)
        self.path = path
        if not fs.exists(path):
            create_sized_file(fs, path, PAGE_SIZE)
        else:
            handle = fs.open(path)
            try:
                if handle.size() != PAGE_SIZE:
                    handle.truncate(PAGE_SIZE)
                    handle.sync()
            finally:
                handle.close()
        self._region = fs.map(path, PAGE_SIZE)
        self._buffer = self._region.buffer
        self._closed = False
        self._seq = 0
        self._next_copy = 0
        self.found = False
        """Whether a valid copy was read (False for a new or unreadable file)."""
        self.progress = TimerProgress()
        self._read()

    def _read(self) -> None:
        best: tuple[int, int, TimerProgress] | None = None
        for index, offset in enumerate(_COPY_OFFSETS):
            fields = _LAYOUT.unpack_from(self._buffer, offset)
            if fields[0] != _MAGIC:
                continue
            if zlib.crc32(self._buffer[offset : offset + _CRC_COVERED]) != fields[10]:
                continue
            seq = fields[2]
            progress = TimerProgress(
                enqueue_offset=fields[3],
                read_time_ms=fields[4],
                slot_done=fields[5],
                log_end=fields[6],
                pending=fields[7],
                precision_ms=fields[8],
                slot_count=fields[9],
                clean=bool(fields[1] & _FLAG_CLEAN),
            )
            if best is None or seq > best[0]:
                best = (seq, index, progress)
        if best is not None:
            self._seq, index, self.progress = best
            self._next_copy = 1 - index
            self.found = True

    def save(self, progress: TimerProgress) -> None:
        """Records `progress` in the copy not written last (a memory write; see `flush`)."""
        self._seq += 1
        offset = _COPY_OFFSETS[self._next_copy]
        head = _LAYOUT.pack(
            _MAGIC,
            _FLAG_CLEAN if progress.clean else 0,
            self._seq,
            progress.enqueue_offset,
            progress.read_time_ms,
            progress.slot_done,
            progress.log_end,
            progress.pending,
            progress.precision_ms,
            progress.slot_count,
            0,
        )[:_CRC_COVERED]
        self._buffer[offset : offset + _LAYOUT.size] = head + zlib.crc32(head).to_bytes(4, "big")
        self._next_copy = 1 - self._next_copy
        self.progress = progress

    def update(self, **changes: int | bool) -> None:
        """Saves the last progress with `changes` applied."""
        self.save(replace(self.progress, **changes))  # type: ignore[arg-type]

    def flush(self) -> None:
        """Makes the last save durable. Blocking."""
        if not self._closed:
            self._region.sync()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._region.close()
