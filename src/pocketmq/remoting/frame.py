"""Remoting frames: length-prefixed commands on a byte stream.

Layout (big-endian, `NettyEncoder` / `NettyDecoder` in apache/rocketmq):

    length i4 = 4 + H + B | headerWord i4 = (serializeType << 24) | H | header (H) | body (B)

`length` does not count itself. The body length is implicit. `frame_bytes_max` bounds a whole
frame including its length prefix, as Netty's `LengthFieldBasedFrameDecoder(16 MiB)` does.

`FrameDecoder` is incremental and pure: feed it any chunking of the stream and it hands back
complete commands. It checks the length prefix as soon as its 4 bytes arrive and the header
word as soon as its 4 bytes arrive, so garbage fails fast instead of waiting for 2 GiB. After a
`RemoteProtocolError` the decoder is dead: every later call raises again.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NoReturn

from pocketmq.common.codes import SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.headers import decode_header, encode_header

FRAME_BYTES_MAX_DEFAULT: Final = 16 << 20
"""Netty's `maxFrameLength` default (`com.rocketmq.remoting.frameMaxLength`)."""

LENGTH_PREFIX_BYTES: Final = 4
HEADER_WORD_BYTES: Final = 4
HEADER_BYTES_MAX: Final = (1 << 24) - 1
"""The header length is the low 24 bits of the header word."""

_INT: Final = struct.Struct(">i")
_PREFIX: Final = struct.Struct(">iI")  # length, header word
_FRAME_LENGTH_MAX: Final = (1 << 31) - 1
_MIN_FRAME_BYTES: Final = LENGTH_PREFIX_BYTES + HEADER_WORD_BYTES


def encode_frame(
    command: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON
) -> bytes:
    """Encode `command` as one frame.

    Args:
        command: The command; its opaque must already be set.
        serialize_type: Header serialization. JSON writes a 0 high byte, which the C++ client
            needs (it reads the header word as a plain length).

    Returns:
        The frame bytes, length prefix included.

    Raises:
        LocalProtocolError: The header cannot be encoded, is 16 MiB or longer, or the frame
            does not fit a 32-bit length.
    """
    header = encode_header(command, serialize_type)
    header_size = len(header)
    if header_size > HEADER_BYTES_MAX:
        raise LocalProtocolError(
            f"header of {header_size} bytes exceeds the {HEADER_BYTES_MAX}-byte limit of the "
            "24-bit header length"
        )
    body = command.body
    length = HEADER_WORD_BYTES + header_size + len(body)
    if length > _FRAME_LENGTH_MAX:
        raise LocalProtocolError(f"frame length {length} does not fit a 32-bit length field")
    prefix = _PREFIX.pack(length, (int(serialize_type) << 24) | header_size)
    return b"".join((prefix, header, body))


def decode_frame(frame: bytes, frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT) -> RemotingCommand:
    """Decode exactly one complete frame (length prefix included).

    Args:
        frame: The frame bytes; nothing may follow the frame.
        frame_bytes_max: The largest frame accepted, prefix included.

    Returns:
        The decoded command.

    Raises:
        RemoteProtocolError: The bytes are not exactly one valid frame.
    """
    decoder = FrameDecoder(frame_bytes_max)
    decoder.feed(frame)
    command = decoder.next_command()
    if command is None:
        raise RemoteProtocolError(
            f"truncated frame: {decoder.buffered_bytes} bytes do not hold a whole frame"
        )
    if decoder.buffered_bytes:
        raise RemoteProtocolError(f"{decoder.buffered_bytes} bytes follow the frame")
    return command


class FrameDecoder:
    """Splits a byte stream into commands; pure and incremental.

    Usage: `feed(chunk)` whenever bytes arrive, then call `next_command()` until it returns
    None (or iterate `commands()`). A partial frame stays buffered for the next `feed`.
    """

    __slots__ = ("_buffer", "_error", "_frame_bytes_max")

    def __init__(self, frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT) -> None:
        """Create a decoder.

        Args:
            frame_bytes_max: The largest frame accepted, length prefix included.

        Raises:
            LocalProtocolError: `frame_bytes_max` cannot hold even an empty frame.
        """
        if frame_bytes_max < _MIN_FRAME_BYTES:
            raise LocalProtocolError(
                f"frame_bytes_max={frame_bytes_max} is below the {_MIN_FRAME_BYTES}-byte "
                "minimum frame"
            )
        self._frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()
        self._error: str | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a command (a partial frame, or more)."""
        return len(self._buffer)

    @property
    def failed(self) -> bool:
        """Whether the decoder has seen invalid bytes; it then raises on every call."""
        return self._error is not None

    def feed(self, data: bytes) -> None:
        """Append received bytes; nothing is decoded until `next_command`.

        Raises:
            RemoteProtocolError: The decoder already failed.
        """
        self._raise_if_failed()
        self._buffer += data

    def next_command(self) -> RemotingCommand | None:
        """Decode and remove the next complete frame.

        Returns:
            The next command, or None when the buffer holds no complete frame yet.

        Raises:
            RemoteProtocolError: The stream is invalid; the decoder is dead from now on.
        """
        self._raise_if_failed()
        buffer = self._buffer
        available = len(buffer)
        if available < LENGTH_PREFIX_BYTES:
            return None
        (length,) = _INT.unpack_from(buffer, 0)
        if length < HEADER_WORD_BYTES:
            self._fail(
                f"frame length {length} is below the {HEADER_WORD_BYTES} bytes of the header word"
            )
        frame_size = LENGTH_PREFIX_BYTES + length
        if frame_size > self._frame_bytes_max:
            self._fail(
                f"frame of {frame_size} bytes exceeds frame_bytes_max={self._frame_bytes_max}"
            )
        if available < _MIN_FRAME_BYTES:
            return None
        (_, header_word) = _PREFIX.unpack_from(buffer, 0)
        serialize_type = header_word >> 24
        header_size = header_word & HEADER_BYTES_MAX
        if serialize_type not in (SerializeType.JSON, SerializeType.ROCKETMQ):
            self._fail(f"unknown serialize type {serialize_type} in header word {header_word:#x}")
        if header_size > length - HEADER_WORD_BYTES:
            self._fail(
                f"header length {header_size} exceeds the {length - HEADER_WORD_BYTES} bytes "
                "the frame has after its header word"
            )
        if available < frame_size:
            return None
        header_end = _MIN_FRAME_BYTES + header_size
        # Through a view, each part is copied once (a slice of the bytearray would copy it
        # twice: a bytearray, then bytes).
        with memoryview(buffer) as view:
            header = bytes(view[_MIN_FRAME_BYTES:header_end])
            body = bytes(view[header_end:frame_size])
        del buffer[:frame_size]  # bytearray drops a prefix without moving the rest
        try:
            command = decode_header(header, serialize_type)
        except RemoteProtocolError as error:
            self._fail(str(error))
        command.body = body
        return command

    def commands(self) -> Iterator[RemotingCommand]:
        """Yield every complete command buffered so far.

        Raises:
            RemoteProtocolError: The stream is invalid (raised during iteration).
        """
        while (command := self.next_command()) is not None:
            yield command

    def _fail(self, message: str) -> NoReturn:
        self._error = message
        self._buffer.clear()
        raise RemoteProtocolError(message)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RemoteProtocolError(self._error)
