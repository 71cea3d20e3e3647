"""The timer wheel: one memory-mapped file of fixed-size slots, one slot per `precision_ms`.

A slot covers the delivery times of one precision step. Slot `i` of a wheel with `slot_count`
slots serves the times `t` with `t // precision_ms % slot_count == i`; the slot records which
time it currently serves, so a slot left over from an earlier turn of the wheel reads as empty.
Each slot is 32 bytes, big-endian (the shape of RocketMQ's `Slot`):

    time_ms (long)   the slot's time, a multiple of precision_ms
    first_pos (long) timer log position of the slot's first entry
    last_pos (long)  timer log position of its last entry (the head of its chain)
    count (int)      entries linked, delete markers subtracted (for statistics)
    magic (int)      SLOT_MAGIC once written

The wheel holds only pointers into the timer log (`log.py`): a slot's entries form a chain from
`last_pos` backwards through each entry's `prev_pos`. Memory is the mapped file, never a Python
object per timer. The wheel can always be rebuilt from the log (`recovery.py`), so it is written
in place without a journal; `flush` (msync) is blocking and runs on a flush thread.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, create_sized_file

SLOT_SIZE: Final = 32
SLOT_MAGIC: Final = 0x7157E1F0
NO_POSITION: Final = -1
_SLOT: Final = struct.Struct(">qqqiI")


class WheelGeometryError(ValueError):
    """A wheel file whose size does not match the configured slot count."""


@dataclass(frozen=True, slots=True)
class Slot:
    """One slot as read: empty slots have `first_pos == last_pos == NO_POSITION`."""

    time_ms: int
    first_pos: int
    last_pos: int
    count: int

    @property
    def empty(self) -> bool:
        return self.last_pos == NO_POSITION


class TimerWheel:
    """The slots of one wheel file; see the module docstring for the layout."""

    def __init__(
        self, path: Path, slot_count: int, precision_ms: int, *, fs: FileSystem = OS_FILE_SYSTEM
    ) -> None:
        """Opens (creating it sparse when missing) the wheel file at `path`.

        Raises:
            WheelGeometryError: the file exists with another size; `recreate` it and rebuild
                the wheel from the log.
        """
        assert slot_count > 0, "a wheel has slots"
        assert precision_ms > 0, "precision is positive"
        self.path = path
        self.slot_count = slot_count
        self.precision_ms = precision_ms
        self.size_bytes = slot_count * SLOT_SIZE
        fs.make_dirs(path.parent)
        # A new file holds no pointers: a wheel that should have some must be rebuilt.
        self.created = not fs.exists(path)
        if self.created:
            create_sized_file(fs, path, self.size_bytes)
        try:
            self._region = fs.map(path, self.size_bytes)
        except ValueError as exc:
            raise WheelGeometryError(
                f"{exc}: the wheel file was written for another slot count than the "
                f"configured {slot_count}"
            ) from exc
        self._buffer = self._region.buffer
        self._closed = False

    @classmethod
    def recreate(
        cls, path: Path, slot_count: int, precision_ms: int, *, fs: FileSystem = OS_FILE_SYSTEM
    ) -> TimerWheel:
        """An all-empty wheel at `path`, replacing whatever was there (before a rebuild).

        The file is cut to zero and extended again, so its slots are zero without writing
        every page.
        """
        fs.remove(path)
        return cls(path, slot_count, precision_ms, fs=fs)

    # -- slots -----------------------------------------------------------------------------
    def slot_time(self, time_ms: int) -> int:
        """The time of the slot serving `time_ms`: `time_ms` rounded down to the precision."""
        return time_ms - time_ms % self.precision_ms

    def _index(self, slot_time_ms: int) -> int:
        return slot_time_ms // self.precision_ms % self.slot_count

    def get(self, slot_time_ms: int) -> Slot:
        """The slot of `slot_time_ms`; empty when the slot serves another time."""
        time_ms, first, last, count, magic = _SLOT.unpack_from(
            self._buffer, self._index(slot_time_ms) * SLOT_SIZE
        )
        if magic != SLOT_MAGIC or time_ms != slot_time_ms:
            return Slot(slot_time_ms, NO_POSITION, NO_POSITION, 0)
        return Slot(time_ms, first, last, count)

    def raw_time(self, slot_time_ms: int) -> int | None:
        """The time the slot index of `slot_time_ms` currently serves, or None if unwritten."""
        time_ms, _, _, _, magic = _SLOT.unpack_from(
            self._buffer, self._index(slot_time_ms) * SLOT_SIZE
        )
        return time_ms if magic == SLOT_MAGIC else None

    def put(self, slot_time_ms: int, first_pos: int, last_pos: int, count: int) -> None:
        """Writes the slot of `slot_time_ms` (taking its index over from any older time)."""
        assert slot_time_ms % self.precision_ms == 0, "slot times are multiples of precision"
        _SLOT.pack_into(
            self._buffer,
            self._index(slot_time_ms) * SLOT_SIZE,
            slot_time_ms,
            first_pos,
            last_pos,
            count,
            SLOT_MAGIC,
        )

    def link(self, slot: Slot, position: int, *, delete_marker: bool) -> None:
        """Makes the log entry at `position` the new head of `slot`'s chain.

        `slot` is the slot as read (`get`) before the entry was written with `slot.last_pos`
        as its `prev_pos`; nothing else may have changed the slot in between.
        """
        first = position if slot.empty else slot.first_pos
        self.put(slot.time_ms, first, position, slot.count + (-1 if delete_marker else 1))

    def max_span_ms(self) -> int:
        """How far ahead of the oldest undelivered slot a time may lie and keep its own slot."""
        return self.slot_count * self.precision_ms

    # -- durability ------------------------------------------------------------------------
    def flush(self) -> None:
        """Writes the mapped pages back to disk. Blocking."""
        if not self._closed:
            self._region.sync()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._region.close()
