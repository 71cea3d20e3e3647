"""The batch body codec (rocketmq-wire.md section 4.5)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.batch import (
    ENTRY_OVERHEAD_BYTES,
    BatchEntry,
    BatchError,
    decode_batch_body,
    encode_batch_body,
)

entries_strategy = st.lists(
    st.tuples(
        st.integers(-(1 << 31), (1 << 31) - 1),
        st.binary(max_size=64),
        st.text(max_size=32),
    ),
    min_size=1,
    max_size=8,
)


def cpp_entry(flag: int, body: bytes, properties: bytes) -> bytes:
    """One entry laid out as `BatchMessage::encode` of rocketmq-client-cpp writes it."""
    size = 20 + len(body) + 2 + len(properties)
    return (
        struct.pack(">iiiii", size, 0, 0, flag, len(body))
        + body
        + struct.pack(">h", len(properties))
        + properties
    )


def test_decodes_entries_as_the_cpp_client_lays_them_out() -> None:
    body = cpp_entry(0, b"one", b"UNIQ_KEY\x01A\x02TAGS\x01t\x02") + cpp_entry(7, b"", b"")
    assert decode_batch_body(body) == [
        BatchEntry(0, b"one", "UNIQ_KEY\x01A\x02TAGS\x01t\x02"),
        BatchEntry(7, b"", ""),
    ]


def test_magic_and_body_crc_of_entries_are_ignored() -> None:
    entry = bytearray(cpp_entry(1, b"x", b""))
    struct.pack_into(">ii", entry, 4, -626843481, 12345)
    assert decode_batch_body(bytes(entry)) == [BatchEntry(1, b"x", "")]


@given(entries_strategy)
def test_decode_reverses_encode(entries: list[tuple[int, bytes, str]]) -> None:
    assert decode_batch_body(encode_batch_body(entries)) == entries


@given(entries_strategy)
def test_encode_matches_the_cpp_layout(entries: list[tuple[int, bytes, str]]) -> None:
    expected = b"".join(cpp_entry(f, b, p.encode()) for f, b, p in entries)
    assert encode_batch_body(entries) == expected


def test_every_cut_inside_an_entry_is_refused() -> None:
    body = encode_batch_body([(0, b"abc", "K\x01V\x02"), (1, b"defg", "")])
    first_end = ENTRY_OVERHEAD_BYTES + 3 + 4
    for cut in range(1, len(body)):
        if cut == first_end:
            assert len(decode_batch_body(body[:cut])) == 1
        else:
            with pytest.raises(BatchError):
                decode_batch_body(body[:cut])


def test_empty_body_is_refused() -> None:
    with pytest.raises(BatchError, match="empty"):
        decode_batch_body(b"")


def test_total_size_that_disagrees_with_the_fields_is_refused() -> None:
    entry = bytearray(cpp_entry(0, b"abc", b""))
    struct.pack_into(">i", entry, 0, len(entry) + 1)
    with pytest.raises(BatchError, match="TOTALSIZE"):
        decode_batch_body(bytes(entry))


def test_negative_lengths_are_refused() -> None:
    negative_body = struct.pack(">iiiii", 22, 0, 0, 0, -1) + b"\0\0"
    with pytest.raises(BatchError, match="body length -1"):
        decode_batch_body(negative_body)
    negative_properties = struct.pack(">iiiii", 22, 0, 0, 0, 0) + struct.pack(">h", -5)
    with pytest.raises(BatchError, match="properties length -5"):
        decode_batch_body(negative_properties)


def test_properties_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(BatchError, match="UTF-8"):
        decode_batch_body(cpp_entry(0, b"", b"\xff\xfe"))


def test_encode_refuses_no_entries_and_oversized_properties() -> None:
    with pytest.raises(BatchError, match="at least one"):
        encode_batch_body([])
    with pytest.raises(BatchError, match="32767"):
        encode_batch_body([(0, b"", "x" * 32768)])


@given(st.binary(max_size=256))
def test_random_bytes_raise_nothing_but_batch_error(data: bytes) -> None:
    try:
        entries = decode_batch_body(data)
    except BatchError:
        return
    assert entries
    # What was accepted accounts for every byte.
    assert sum(ENTRY_OVERHEAD_BYTES + len(b) + len(p.encode()) for _, b, p in entries) == len(data)


@given(entries_strategy, st.data())
def test_garbage_after_valid_entries_raises_batch_error(
    entries: list[tuple[int, bytes, str]], data: st.DataObject
) -> None:
    tail = data.draw(st.binary(min_size=1, max_size=ENTRY_OVERHEAD_BYTES - 1))
    with pytest.raises(BatchError):
        decode_batch_body(encode_batch_body(entries) + tail)
