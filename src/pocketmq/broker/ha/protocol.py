"""The HA stream's bytes (RocketMQ's `DefaultHAService`), sans-IO.

Slave to master: an 8-byte big-endian offset, the slave's CommitLog max offset, sent when it
connects, after each append and as a heartbeat. Master to slave: frames of a 12-byte header
(8-byte CommitLog offset of the data, 4-byte data length) and the data; a frame with no data is
a heartbeat. The master starts at the offset of the slave's first report.

Controller mode adds epochs to this stream (a handshake, and truncation to the last common
epoch before a slave follows a new master): they belong here, next to the frames.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NamedTuple

_OFFSET: Final = struct.Struct(">q")
_HEADER: Final = struct.Struct(">qi")
REPORT_SIZE: Final = _OFFSET.size
HEADER_SIZE: Final = _HEADER.size
MAX_FRAME_DATA: Final = 64 << 20
"""A larger frame length means a corrupt or foreign stream, not data."""


class HAProtocolError(Exception):
    """The peer sent bytes that are not an HA stream; the connection must be dropped."""


class Transfer(NamedTuple):
    """A frame from the master: `data` belongs at CommitLog offset `offset`."""

    offset: int
    data: bytes


def encode_report(max_offset: int) -> bytes:
    """A slave's progress report."""
    return _OFFSET.pack(max_offset)


def encode_transfer_header(offset: int, length: int) -> bytes:
    """The header of a frame of `length` bytes at `offset` (the data follows it)."""
    return _HEADER.pack(offset, length)


class ReportDecoder:
    """The master's reader of slave reports: the latest complete offset of what arrived."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> int | None:
        """Takes received bytes; returns the last whole report among them, if any.

        Raises:
            HAProtocolError: a negative offset.
        """
        buffer = self._pending + data
        whole = len(buffer) - len(buffer) % REPORT_SIZE
        self._pending = buffer[whole:]
        if not whole:
            return None
        offset: int = _OFFSET.unpack_from(buffer, whole - REPORT_SIZE)[0]
        if offset < 0:
            raise HAProtocolError(f"a slave reported the negative offset {offset}")
        return offset


class TransferDecoder:
    """The slave's reader of master frames."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> Iterator[Transfer]:
        """Takes received bytes; yields each complete frame (heartbeats included).

        Raises:
            HAProtocolError: a negative offset or an impossible length.
        """
        self._buffer += data
        position = 0
        buffer = self._buffer
        while len(buffer) - position >= HEADER_SIZE:
            offset, length = _HEADER.unpack_from(buffer, position)
            if offset < 0 or not 0 <= length <= MAX_FRAME_DATA:
                raise HAProtocolError(f"a frame at offset {offset} with length {length}")
            end = position + HEADER_SIZE + length
            if len(buffer) < end:
                break
            yield Transfer(offset, bytes(buffer[position + HEADER_SIZE : end]))
            position = end
        del buffer[:position]
