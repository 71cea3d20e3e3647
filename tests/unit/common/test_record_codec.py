"""The stored-message codec: round trips, RocketMQ's byte positions, and rejection of bad bytes."""

from __future__ import annotations

import contextlib
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.common.constants import (
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
)
from pocketmq.common.java_hash import java_string_hash, java_string_hash_concat
from pocketmq.common.message_id import create_offset_msg_id, decode_offset_msg_id
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import (
    MessageDecodeError,
    decode_record,
    decode_records,
    encode_record,
    pack_host,
    record_size,
)

ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
hosts = st.tuples(st.one_of(ipv4, ipv6), st.integers(0, 65535))
text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
    min_size=1,
    max_size=20,
)
property_maps = st.dictionaries(text, text, max_size=6)
topics = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def records(draw: st.DrawFn) -> dict[str, object]:
    return {
        "topic": draw(
            st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300)
        ),
        "body": draw(st.binary(max_size=4096)),
        "properties": draw(property_maps),
        "queue_id": draw(int32),
        "flag": draw(int32),
        "queue_offset": draw(int64),
        "physical_offset": draw(int64),
        "sys_flag": draw(int32),
        "born_timestamp": draw(int64),
        "born_host": draw(hosts),
        "store_timestamp": draw(int64),
        "store_host": draw(hosts),
        "reconsume_times": draw(int32),
        "prepared_transaction_offset": draw(int64),
    }


def encode(fields: dict[str, object]) -> bytes:
    values = dict(fields)
    topic = str(values.pop("topic")).encode()
    properties = encode_properties(values.pop("properties")).encode()  # type: ignore[arg-type]
    born_host = pack_host(values.pop("born_host"))  # type: ignore[arg-type]
    store_host = pack_host(values.pop("store_host"))  # type: ignore[arg-type]
    return encode_record(
        topic=topic,
        properties=properties,
        born_host=born_host,
        store_host=store_host,
        **values,  # type: ignore[arg-type]
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_decode_inverts_encode(fields: dict[str, object]) -> None:
    raw = encode(fields)
    message = decode_record(raw)
    assert message.store_size == len(raw)
    for name in ("topic", "body", "properties", "queue_id", "flag", "queue_offset"):
        assert getattr(message, name) == fields[name], name
    for name in ("physical_offset", "born_timestamp", "store_timestamp", "reconsume_times"):
        assert getattr(message, name) == fields[name], name
    assert message.prepared_transaction_offset == fields["prepared_transaction_offset"]
    born_host, store_host = fields["born_host"], fields["store_host"]
    assert message.born_host[1] == born_host[1]  # type: ignore[index]
    assert message.store_host[1] == store_host[1]  # type: ignore[index]
    assert pack_host(message.born_host) == pack_host(born_host)  # type: ignore[arg-type]
    assert pack_host(message.store_host) == pack_host(store_host)  # type: ignore[arg-type]
    # The IPv6 bits always describe the stored host sizes, whatever the caller passed.
    assert bool(message.sys_flag & BORNHOST_V6_FLAG) == (":" in message.born_host[0])
    assert bool(message.sys_flag & STOREHOSTADDRESS_V6_FLAG) == (":" in message.store_host[0])
    long_topic = len(str(fields["topic"]).encode()) > 127
    assert message.magic == (MESSAGE_MAGIC_CODE_V2 if long_topic else MESSAGE_MAGIC_CODE_V1)


@settings(max_examples=50, deadline=None)
@given(st.lists(records(), min_size=1, max_size=5))
def test_records_back_to_back_decode_in_order(many: list[dict[str, object]]) -> None:
    raw = b"".join(encode(fields) for fields in many)
    assert [m.body for m in decode_records(raw)] == [f["body"] for f in many]


def test_fields_sit_at_rocketmq_positions() -> None:
    raw = encode_record(
        topic=b"TopicTest",
        body=b"Hello RocketMQ",
        properties=b"TAGS\x01TagA\x02",
        queue_id=3,
        flag=7,
        queue_offset=42,
        physical_offset=123456,
        sys_flag=0,
        born_timestamp=1_700_000_000_000,
        born_host=pack_host(("10.0.0.1", 5555)),
        store_timestamp=1_700_000_000_123,
        store_host=pack_host(("10.0.0.2", 10911)),
        reconsume_times=2,
        prepared_transaction_offset=0,
    )
    assert struct.unpack_from(">i", raw, 0)[0] == len(raw)
    assert struct.unpack_from(">I", raw, 4)[0] == 0xDAA320A7
    assert struct.unpack_from(">i", raw, 8)[0] == zlib.crc32(b"Hello RocketMQ") & 0x7FFFFFFF
    assert struct.unpack_from(">i", raw, 12)[0] == 3
    assert struct.unpack_from(">i", raw, 16)[0] == 7
    assert struct.unpack_from(">q", raw, 20)[0] == 42
    assert struct.unpack_from(">q", raw, 28)[0] == 123456
    assert struct.unpack_from(">i", raw, 36)[0] == 0
    assert struct.unpack_from(">q", raw, 40)[0] == 1_700_000_000_000
    assert raw[48:56] == bytes([10, 0, 0, 1]) + struct.pack(">i", 5555)
    assert struct.unpack_from(">q", raw, 56)[0] == 1_700_000_000_123
    assert raw[64:72] == bytes([10, 0, 0, 2]) + struct.pack(">i", 10911)
    assert struct.unpack_from(">i", raw, 72)[0] == 2
    assert struct.unpack_from(">i", raw, 84)[0] == len(b"Hello RocketMQ")
    body_end = 88 + len(b"Hello RocketMQ")
    assert raw[body_end] == len(b"TopicTest")
    assert raw[body_end + 1 : body_end + 10] == b"TopicTest"
    assert record_size(14, 9, len(b"TAGS\x01TagA\x02")) == len(raw)


def valid_record() -> bytes:
    return encode_record(
        topic=b"T",
        body=b"payload-" * 8,
        properties=encode_properties({"KEYS": "k1", "TAGS": "a"}).encode(),
        born_host=pack_host(("127.0.0.1", 1)),
        store_host=pack_host(("::1", 2)),
    )


def test_every_truncation_is_rejected() -> None:
    raw = valid_record()
    for cut in range(len(raw)):
        with pytest.raises(MessageDecodeError):
            decode_record(raw[:cut])


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_single_byte_mutations_never_pass_silently(data: st.DataObject) -> None:
    raw = bytearray(valid_record())
    position = data.draw(st.integers(0, len(raw) - 1))
    raw[position] ^= data.draw(st.integers(1, 255))
    original = decode_record(valid_record())
    try:
        message = decode_record(bytes(raw))
    except MessageDecodeError:
        return
    # What decodes must still carry the original body: a body change is caught by the CRC.
    assert message.body == original.body


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_garbage_raises_only_decode_errors(garbage: bytes) -> None:
    with contextlib.suppress(MessageDecodeError):
        decode_records(garbage)


def test_non_utf8_topic_is_rejected() -> None:
    raw = bytearray(valid_record())
    topic_at = 88 + 12 + 12 + len(b"payload-" * 8) + 1  # IPv6 store host adds 12
    raw[topic_at] = 0xFF
    with pytest.raises(MessageDecodeError, match="UTF-8"):
        decode_record(bytes(raw))


@given(property_maps)
def test_properties_round_trip(properties: dict[str, str]) -> None:
    assert decode_properties(encode_properties(properties)) == properties


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", 0), ("TagA", 2598919), ("hello", 99162322), ("😀", 0xD83D * 31 + 0xDE00)],
)
def test_java_string_hash_known_values(value: str, expected: int) -> None:
    assert java_string_hash(value) == expected


@given(st.text(max_size=300), st.text(max_size=300))
def test_java_string_hash_matches_the_utf16_loop(prefix: str, suffix: str) -> None:
    whole = prefix + suffix
    raw = whole.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    expected = h - (1 << 32) if h & 0x80000000 else h
    assert java_string_hash(whole) == expected
    assert java_string_hash_concat(java_string_hash(prefix), suffix) == expected


@given(hosts, st.integers(0, 2**63 - 1))
def test_offset_msg_id_round_trip(host: tuple[str, int], offset: int) -> None:
    msg_id = create_offset_msg_id(host, offset)
    assert len(msg_id) == (56 if ":" in host[0] else 32)
    decoded_host, decoded_offset = decode_offset_msg_id(msg_id)
    assert pack_host(decoded_host) == pack_host(host)
    assert decoded_offset == offset


def test_offset_msg_id_known_value() -> None:
    assert create_offset_msg_id(("127.0.0.1", 10911), 0) == "7F00000100002A9F0000000000000000"
