"""The `checkpoint` file: how far each structure was durable at the last flush.

One 4 KiB page (`StoreCheckpoint`): physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp,
masterFlushedOffset, confirmPhyOffset, each a big-endian long. Abnormal recovery starts its scan
at the newest CommitLog file whose first record is no newer than the oldest of the timestamps,
so everything before that point is known to be durable and dispatched.

The page is written whole with `pwrite` and made durable with `fdatasync` (blocking: the flush
thread calls `flush`). The fields lie in the first 40 bytes, inside one 512-byte sector, which
a disk writes whole, so a power loss leaves the old values or the new ones.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem

PAGE_SIZE: Final = 4096
SAFETY_MARGIN_MS: Final = 3_000
_LAYOUT: Final = struct.Struct(">qqqqq")


@dataclass
class Checkpoint:
    """The checkpoint's fields, and the file they live in."""

    path: Path
    fs: FileSystem = field(default=OS_FILE_SYSTEM, repr=False)
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @classmethod
    def open(cls, path: Path, fs: FileSystem = OS_FILE_SYSTEM) -> Checkpoint:
        """Reads the checkpoint at `path`; a missing or short file reads as all zeros."""
        checkpoint = cls(path, fs)
        try:
            raw = fs.read_bytes(path)
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
        """The time before which every structure was durable, less RocketMQ's margin.

        A timestamp says a message of that millisecond was flushed, not that every message
        of it was: others stored in the same millisecond, or dispatched just after the flush
        read the time, may not be. RocketMQ takes 3 s off for this (`getMinTimestamp`).
        """
        stamps = [self.physic_msg_timestamp, self.logics_msg_timestamp]
        if with_index:
            stamps.append(self.index_msg_timestamp)
        return max(min(stamps) - SAFETY_MARGIN_MS, 0)

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
        created = not self.fs.exists(self.path)
        handle = self.fs.open(self.path, create=True)
        try:
            handle.pwrite(page, 0)
            handle.sync()
        finally:
            handle.close()
        if created:
            self.fs.sync_directory(self.path.parent)
