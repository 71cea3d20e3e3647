"""Frames: layout, round trips, any chunking of a stream, and malformed length prefixes.

References are to rocketmq-wire.md section 1.1.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.codes import RequestCode, SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.frame import (
    FRAME_BYTES_MAX_DEFAULT,
    FrameDecoder,
    decode_frame,
    encode_frame,
)
from tests.unit.remoting.strategies import chunks_of, split_points, typed_commands


def raw_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    return (
        struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header))
        + header
        + body
    )


def drain(decoder: FrameDecoder) -> list[RemotingCommand]:
    return list(decoder.commands())


# -- layout and round trips --------------------------------------------------------------------


def test_json_frame_has_length_prefix_and_a_plain_header_length_word() -> None:
    """The C++ client reads the header word as a plain length: high byte must be 0."""
    command = RemotingCommand(code=RequestCode.HEART_BEAT, opaque=3, body=b"{}")
    frame = encode_frame(command)
    length, header_word = struct.unpack_from(">iI", frame)
    assert length == len(frame) - 4
    assert header_word >> 24 == 0
    header_size = header_word
    assert frame[8 + header_size :] == b"{}"
    assert frame[8:9] == b"{"


def test_binary_frame_sets_serialize_type_one_in_the_high_byte() -> None:
    frame = encode_frame(RemotingCommand(code=1), SerializeType.ROCKETMQ)
    (header_word,) = struct.unpack_from(">I", frame, 4)
    assert header_word >> 24 == 1
    assert header_word & 0xFFFFFF == 21


@given(typed_commands())
def test_frame_round_trip_returns_the_same_command(
    typed: tuple[SerializeType, RemotingCommand],
) -> None:
    serialize_type, command = typed
    assert decode_frame(encode_frame(command, serialize_type)) == command


@given(st.lists(typed_commands(), max_size=6), st.data())
def test_any_chunking_of_a_stream_yields_the_same_commands(
    typed: list[tuple[SerializeType, RemotingCommand]], data: st.DataObject
) -> None:
    stream = b"".join(encode_frame(command, serialize_type) for serialize_type, command in typed)
    cuts = data.draw(split_points(stream))
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    for chunk in chunks_of(stream, cuts):
        decoder.feed(chunk)
        decoded += drain(decoder)
    assert decoded == [command for _, command in typed]
    assert decoder.buffered_bytes == 0


def test_byte_by_byte_feeding_yields_the_command_only_when_complete() -> None:
    frame = encode_frame(RemotingCommand(code=1, ext_fields={"a": "b"}, body=b"xyz"))
    decoder = FrameDecoder()
    for byte in frame[:-1]:
        decoder.feed(bytes([byte]))
        assert decoder.next_command() is None
    decoder.feed(frame[-1:])
    assert decoder.next_command() == decode_frame(frame)
    assert decoder.next_command() is None


def test_frame_with_an_empty_header_is_rejected_by_the_header_codec_not_the_framer() -> None:
    with pytest.raises(RemoteProtocolError, match="does not parse"):
        decode_frame(raw_frame(b""))


def test_body_is_everything_after_the_header() -> None:
    command = decode_frame(raw_frame(b'{"code":5}', body=b"\x00\x01body"))
    assert command.code == 5
    assert command.body == b"\x00\x01body"


def test_frame_exactly_at_the_limit_is_accepted() -> None:
    frame = encode_frame(RemotingCommand(code=1, body=b"x" * 100))
    assert decode_frame(frame, frame_bytes_max=len(frame)).body == b"x" * 100
    with pytest.raises(RemoteProtocolError, match="exceeds frame_bytes_max"):
        decode_frame(frame, frame_bytes_max=len(frame) - 1)


# -- malformed frames --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (struct.pack(">i", -1), "frame length -1 is below"),
        (struct.pack(">i", -(1 << 31)), "is below"),
        (struct.pack(">i", 0), "frame length 0 is below"),
        (struct.pack(">i", 3), "frame length 3 is below"),
        (struct.pack(">i", FRAME_BYTES_MAX_DEFAULT - 3), "exceeds frame_bytes_max"),
        (struct.pack(">i", (1 << 31) - 1), "exceeds frame_bytes_max"),
    ],
)
def test_bad_length_prefix_fails_as_soon_as_its_four_bytes_arrive(
    prefix: bytes, message: str
) -> None:
    decoder = FrameDecoder()
    decoder.feed(prefix)
    with pytest.raises(RemoteProtocolError, match=message):
        decoder.next_command()


@pytest.mark.parametrize(
    ("word", "message"),
    [
        (struct.pack(">iI", 10, 7), "header length 7 exceeds the 6 bytes"),
        (struct.pack(">iI", 4, 1), "header length 1 exceeds the 0 bytes"),
        (struct.pack(">iI", 100, 0xFFFFFF), "header length 16777215 exceeds"),
        (struct.pack(">iI", 100, (2 << 24) | 10), "unknown serialize type 2"),
        (struct.pack(">iI", 100, 0xFF000000), "unknown serialize type 255"),
    ],
)
def test_bad_header_word_fails_before_the_rest_of_the_frame_arrives(
    word: bytes, message: str
) -> None:
    decoder = FrameDecoder()
    decoder.feed(word)
    with pytest.raises(RemoteProtocolError, match=message):
        decoder.next_command()


def test_truncated_frames_do_not_decode() -> None:
    frame = encode_frame(RemotingCommand(code=1, ext_fields={"k": "v"}, body=b"body"))
    for size in range(len(frame)):
        with pytest.raises(RemoteProtocolError, match="truncated frame"):
            decode_frame(frame[:size])


def test_bytes_after_a_frame_are_rejected_by_decode_frame() -> None:
    with pytest.raises(RemoteProtocolError, match="2 bytes follow the frame"):
        decode_frame(encode_frame(RemotingCommand(code=1)) + b"\x00\x00")


def test_header_error_inside_a_frame_surfaces_as_remote_protocol_error() -> None:
    with pytest.raises(RemoteProtocolError, match="expected an object"):
        decode_frame(raw_frame(b"[1, 2]"))
    with pytest.raises(RemoteProtocolError, match="fixed part"):
        decode_frame(raw_frame(b"\x00" * 5, serialize_type=1))


def test_decoder_is_dead_after_an_error() -> None:
    decoder = FrameDecoder()
    decoder.feed(struct.pack(">i", -5))
    with pytest.raises(RemoteProtocolError):
        decoder.next_command()
    assert decoder.failed
    with pytest.raises(RemoteProtocolError, match="frame length -5"):
        decoder.feed(encode_frame(RemotingCommand(code=1)))
    with pytest.raises(RemoteProtocolError, match="frame length -5"):
        decoder.next_command()


def test_frames_before_a_bad_one_are_still_returned() -> None:
    good = encode_frame(RemotingCommand(code=1))
    decoder = FrameDecoder()
    decoder.feed(good + good + struct.pack(">i", 2))
    assert decoder.next_command() is not None
    assert decoder.next_command() is not None
    with pytest.raises(RemoteProtocolError):
        decoder.next_command()


@given(st.binary(max_size=300), st.data())
def test_arbitrary_bytes_either_decode_or_raise_remote_protocol_error(
    stream: bytes, data: st.DataObject
) -> None:
    decoder = FrameDecoder(frame_bytes_max=1024)
    try:
        for chunk in chunks_of(stream, data.draw(split_points(stream))):
            decoder.feed(chunk)
            for command in decoder.commands():
                assert isinstance(command, RemotingCommand)
    except RemoteProtocolError:
        assert decoder.failed


@given(typed_commands(), st.data())
def test_corrupted_frames_either_decode_or_raise_remote_protocol_error(
    typed: tuple[SerializeType, RemotingCommand], data: st.DataObject
) -> None:
    serialize_type, command = typed
    frame = bytearray(encode_frame(command, serialize_type))
    for _ in range(data.draw(st.integers(1, 4))):
        position = data.draw(st.integers(0, len(frame) - 1))
        frame[position] = data.draw(st.integers(0, 255))
    with contextlib.suppress(RemoteProtocolError):
        decode_frame(bytes(frame))


# -- encoder limits ----------------------------------------------------------------------------


def test_encoder_refuses_a_header_beyond_the_24_bit_length() -> None:
    command = RemotingCommand(code=1, remark="r" * (1 << 24))
    with pytest.raises(LocalProtocolError, match="24-bit header length"):
        encode_frame(command)


def test_decoder_refuses_a_limit_below_the_minimum_frame() -> None:
    with pytest.raises(LocalProtocolError, match="minimum frame"):
        FrameDecoder(frame_bytes_max=7)
