"""The HA stream's bytes (RocketMQ's `DefaultHAService`), sans-IO.

Slave to master: an 8-byte big-endian offset, the slave's CommitLog max offset, sent when it
connects, after each append and as a heartbeat. Master to slave: frames of a 12-byte header
(8-byte CommitLog offset of the data, 4-byte data length) and the data; a frame with no data is
a heartbeat. The master starts at the offset of the slave's first report.

Controller mode starts the stream with a handshake: the slave says who it is (`HELLO`: a
magic word and its broker id), the master answers with its epochs and CommitLog end
(`EPOCHS`), and the slave cuts its log back to the last point both agree on (`epochs.py`)
before its first report.
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


_HELLO: Final = struct.Struct(">iq")
_EPOCHS_HEADER: Final = struct.Struct(">iiq")
_EPOCH_ENTRY: Final = struct.Struct(">iq")
HELLO_MAGIC: Final = 0x504D4831
"""`PMH1`: a slave of controller mode, not a master/slave report (those start with an offset
whose high bytes are 0)."""
EPOCHS_MAGIC: Final = 0x504D4532
HELLO_SIZE: Final = _HELLO.size
EPOCHS_HEADER_SIZE: Final = _EPOCHS_HEADER.size
MAX_EPOCHS: Final = 1 << 16


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


def encode_hello(broker_id: int) -> bytes:
    return _HELLO.pack(HELLO_MAGIC, broker_id)


def decode_hello(data: bytes) -> int:
    """The slave's broker id.

    Raises:
        HAProtocolError: not a controller-mode slave's hello.
    """
    magic, broker_id = _HELLO.unpack(data)
    if magic != HELLO_MAGIC:
        raise HAProtocolError(
            "the slave did not start with a controller-mode handshake: is it in controller mode "
            "(enableControllerMode=true)?"
        )
    return int(broker_id)


def encode_epochs(entries: list[tuple[int, int]], max_offset: int) -> bytes:
    parts = [_EPOCHS_HEADER.pack(EPOCHS_MAGIC, len(entries), max_offset)]
    parts.extend(_EPOCH_ENTRY.pack(epoch, start) for epoch, start in entries)
    return b"".join(parts)


def decode_epochs_header(data: bytes) -> tuple[int, int]:
    """(number of entries that follow, the master's CommitLog end).

    Raises:
        HAProtocolError: not the master's epochs, or an impossible count.
    """
    magic, count, max_offset = _EPOCHS_HEADER.unpack(data)
    if magic != EPOCHS_MAGIC or not 0 <= count <= MAX_EPOCHS or max_offset < 0:
        raise HAProtocolError("the master did not answer with its epochs: not in controller mode?")
    return count, max_offset


def decode_epoch_entries(data: bytes) -> list[tuple[int, int]]:
    return [
        _EPOCH_ENTRY.unpack_from(data, position)
        for position in range(0, len(data), _EPOCH_ENTRY.size)
    ]


EPOCH_ENTRY_SIZE: Final = _EPOCH_ENTRY.size
