"""The broker's offsetMsgId: store host and CommitLog offset in hex (rocketmq-wire.md 4.6)."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.common.message_id import (
    MessageIdError,
    create_offset_msg_id,
    decode_offset_msg_id,
    offset_msg_ids,
)

PORTS = st.integers(0, 65535)
OFFSETS = st.integers(-(2**63), 2**63 - 1)
IPV4_HOSTS = st.tuples(st.ip_addresses(v=4).map(str), PORTS)
IPV6_HOSTS = st.tuples(st.ip_addresses(v=6).map(str), PORTS)
UPPER_HEX = set("0123456789ABCDEF")


def assert_round_trip(host: tuple[str, int], offset: int, length: int) -> None:
    msg_id = create_offset_msg_id(host, offset)
    assert len(msg_id) == length
    assert set(msg_id) <= UPPER_HEX
    (ip, port), decoded_offset = decode_offset_msg_id(msg_id)
    assert ipaddress.ip_address(ip) == ipaddress.ip_address(host[0])
    assert port == host[1]
    assert decoded_offset == offset


@settings(max_examples=200, deadline=None)
@given(IPV4_HOSTS, OFFSETS)
def test_ipv4_offset_msg_id_is_32_hex_chars_and_round_trips(
    host: tuple[str, int], offset: int
) -> None:
    assert_round_trip(host, offset, 32)


@settings(max_examples=200, deadline=None)
@given(IPV6_HOSTS, OFFSETS)
def test_ipv6_offset_msg_id_is_56_hex_chars_and_round_trips(
    host: tuple[str, int], offset: int
) -> None:
    assert_round_trip(host, offset, 56)


def test_ipv4_offset_msg_id_known_value() -> None:
    msg_id = create_offset_msg_id(("127.0.0.1", 10911), 0)
    assert msg_id == "7F00000100002A9F0000000000000000"
    assert decode_offset_msg_id(msg_id) == (("127.0.0.1", 10911), 0)


def test_ipv6_offset_msg_id_known_value() -> None:
    msg_id = create_offset_msg_id(("2001:db8::1", 10911), 0x0102030405060708)
    assert msg_id == "20010DB8000000000000000000000001" + "00002A9F" + "0102030405060708"
    assert decode_offset_msg_id(msg_id) == (("2001:db8::1", 10911), 0x0102030405060708)


def test_lower_case_hex_decodes_like_upper_case() -> None:
    """Java's `UtilAll.string2bytes` upper-cases before decoding."""
    msg_id = "7F00000100002A9F00000000000004D2"
    assert decode_offset_msg_id(msg_id.lower()) == decode_offset_msg_id(msg_id)


@pytest.mark.parametrize(
    "msg_id",
    [
        "",
        "7F00000100002A9F000000000000000",  # 31 chars
        "7F00000100002A9F00000000000000000",  # 33 chars
        "0" * 55,
        "0" * 57,
        "0" * 64,
        "7F00000100002A9F000000000000000G",  # not hex
        "7F00000100002A9F000000000000000-",
        "0" * 30 + "é!",
        "0" * 30 + "\u0660\u0661",  # Arabic-Indic digits are digits, not hex
        "7F000001 00002A9F00000000000000 ",  # whitespace that bytes.fromhex would skip
        "7F00000100002A9F00000000000000\t\n",
        " " * 32,
        " " * 56,
        "0" * 54 + "  ",
    ],
)
def test_bad_offset_msg_ids_raise_message_id_error(msg_id: str) -> None:
    with pytest.raises(MessageIdError):
        decode_offset_msg_id(msg_id)


def test_message_id_error_is_a_value_error() -> None:
    assert issubclass(MessageIdError, ValueError)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=60),
        st.text(st.sampled_from("0123456789abcdefABCDEF \t\n-+xg"), min_size=32, max_size=32),
        st.text(st.sampled_from("0123456789abcdefABCDEF \t\n-+xg"), min_size=56, max_size=56),
    )
)
def test_any_string_decodes_or_raises_message_id_error(msg_id: str) -> None:
    try:
        (ip, port), _ = decode_offset_msg_id(msg_id)
    except MessageIdError:
        return
    assert len(msg_id) in (32, 56)
    assert isinstance(ipaddress.ip_address(ip), ipaddress.IPv4Address) == (len(msg_id) == 32)
    assert -(2**31) <= port < 2**31


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([("127.0.0.1", 10911), ("10.1.2.3", 65535), ("::1", 8081)]),
    st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=5),
)
def test_a_batch_answer_joins_the_ids_of_each_record(
    host: tuple[str, int], offsets: list[int]
) -> None:
    assert offset_msg_ids(host, offsets) == ",".join(
        create_offset_msg_id(host, offset) for offset in offsets
    )


@pytest.mark.parametrize("count", [15, 16, 17, 300])
@pytest.mark.parametrize("host", [("127.0.0.1", 10911), ("::1", 8081)])
def test_a_big_batch_answer_names_each_record_as_its_single_id_would(
    host: tuple[str, int], count: int
) -> None:
    # From 16 records the ids are encoded in bulk, byte by byte: every byte must land.
    offsets = [(n * 0x9E3779B97F4A7C15) % 2**63 for n in range(count)]
    assert offset_msg_ids(host, offsets) == ",".join(
        create_offset_msg_id(host, offset) for offset in offsets
    )
