"""The `checkpoint` file: how far each structure was durable at the last flush.

One 4 KiB page (`StoreCheckpoint`): physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp,
masterFlushedOffset, confirmPhyOffset, each a big-endian long. Abnormal recovery starts its scan
at the newest CommitLog file whose first record is no newer than the oldest of the timestamps,
so everything before that point is known to be durable and dispatched.

The page is written whole with `pwrite` and made durable with `fdatasync` (blocking: the flush
thread calls `flush`).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

PAGE_SIZE: Final = 4096
_LAYOUT: Final = struct.Struct(">qqqqq")


@dataclass
class Checkpoint:
    """The checkpoint's fields, and the file they live in."""

    path: Path
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @classmethod
    def open(cls, path: Path) -> Checkpoint:
        """Reads the checkpoint at `path`; a missing or short file reads as all zeros."""
        checkpoint = cls(path)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return checkpoint
        if len(raw) >= _LAYOUT.size:
            (
                checkpoint.physic_msg_timestamp,
                checkpoint.logics_msg_timestamp,
                checkpoint.index_msg_timestamp,
                checkpoint.master_flushed_offset,
                checkpoint.confirm_phy_offset,
            ) = _LAYOUT.unpack_from(raw)
        return checkpoint

    def min_timestamp(self, *, with_index: bool) -> int:
        """The time before which every structure was durable."""
        stamps = [self.physic_msg_timestamp, self.logics_msg_timestamp]
        if with_index:
            stamps.append(self.index_msg_timestamp)
        return min(stamps)

    def flush(self) -> None:
        """Writes the page and makes it durable. Blocking."""
        page = bytearray(PAGE_SIZE)
        _LAYOUT.pack_into(
            page,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
            self.master_flushed_offset,
            self.confirm_phy_offset,
        )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, page, 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
