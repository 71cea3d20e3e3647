"""The CommitLog record codec: round trips, RocketMQ's byte positions, rejection of bad bytes.

The layout is RocketMQ's (`MessageExtEncoder`, `MessageDecoder`; rocketmq-wire.md section 4.1).
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import struct
import zlib
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
)
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import (
    HostAddress,
    MessageDecodeError,
    StoredMessage,
    _decode_general,
    body_crc,
    decode_record,
    decode_records,
    encode_blank,
    encode_record,
    is_ipv6,
    pack_host,
    record_size,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
PORTS = st.integers(0, 65535)
IPV4_HOSTS = st.tuples(st.ip_addresses(v=4).map(str), PORTS)
IPV6_HOSTS = st.tuples(st.ip_addresses(v=6).map(str), PORTS)
HOSTS = st.one_of(IPV4_HOSTS, IPV6_HOSTS)
# Any code point but lone surrogates (UTF-8 cannot carry them): 1..300 chars, up to 1200 bytes.
TOPIC_CHARS = st.characters(codec="utf-8")
TOPICS = st.one_of(
    st.text(TOPIC_CHARS, min_size=1, max_size=300),
    st.text(TOPIC_CHARS, min_size=128, max_size=300),  # surely over 127 bytes: magic V2
)
PROPERTY_TEXT = st.text(
    st.characters(codec="utf-8", exclude_characters="\x01\x02"), min_size=1, max_size=16
)
PROPERTY_MAPS = st.dictionaries(PROPERTY_TEXT, PROPERTY_TEXT, max_size=8)
SMALL_BODIES = st.binary(max_size=256)

# Body starts right after BODYLEN: 88 for IPv4/IPv4, 12 more per IPv6 host.
BODY_POS_V4 = 88
HOST_V6_EXTRA_BYTES = 12


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    """Mostly 0..4096 bytes; one draw in twenty is 4 KiB..256 KiB of seeded random bytes."""
    if draw(st.integers(0, 19)) == 0:
        size = draw(st.integers(4097, 256 * 1024))
        return random.Random(draw(st.integers(0, 2**32))).randbytes(size)
    return draw(st.binary(max_size=4096))


@dataclass(frozen=True)
class Fields:
    """Everything a caller chooses about one record."""

    topic: str = "TopicTest"
    body: bytes = b"Hello RocketMQ"
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    physical_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: HostAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    @property
    def topic_bytes(self) -> bytes:
        return self.topic.encode()

    @property
    def properties_bytes(self) -> bytes:
        return encode_properties(self.properties).encode()

    @property
    def body_pos(self) -> int:
        v6_hosts = is_ipv6(self.born_host) + is_ipv6(self.store_host)
        return BODY_POS_V4 + HOST_V6_EXTRA_BYTES * v6_hosts

    def encode(self) -> bytes:
        return encode_record(
            topic=self.topic_bytes,
            body=self.body,
            properties=self.properties_bytes,
            queue_id=self.queue_id,
            flag=self.flag,
            queue_offset=self.queue_offset,
            physical_offset=self.physical_offset,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=pack_host(self.born_host),
            store_timestamp=self.store_timestamp,
            store_host=pack_host(self.store_host),
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset,
        )


@st.composite
def record_fields(
    draw: st.DrawFn, body_strategy: st.SearchStrategy[bytes] = SMALL_BODIES
) -> Fields:
    return Fields(
        topic=draw(TOPICS),
        body=draw(body_strategy),
        properties=draw(PROPERTY_MAPS),
        queue_id=draw(INT32),
        flag=draw(INT32),
        queue_offset=draw(INT64),
        physical_offset=draw(INT64),
        sys_flag=draw(INT32),
        born_timestamp=draw(INT64),
        born_host=draw(HOSTS),
        store_timestamp=draw(INT64),
        store_host=draw(HOSTS),
        reconsume_times=draw(INT32),
        prepared_transaction_offset=draw(INT64),
    )


def expected_sys_flag(fields: Fields) -> int:
    flag = fields.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if is_ipv6(fields.born_host):
        flag |= BORNHOST_V6_FLAG
    if is_ipv6(fields.store_host):
        flag |= STOREHOSTADDRESS_V6_FLAG
    return flag


def same_host(decoded: HostAddress, original: HostAddress) -> bool:
    """Equal addresses; text forms may differ (`::1.2.3.4` vs `::102:304`)."""
    return (
        ipaddress.ip_address(decoded[0]) == ipaddress.ip_address(original[0])
        and decoded[1] == original[1]
    )


def assert_decodes_to(message: StoredMessage, fields: Fields, raw: bytes) -> None:
    assert message.topic == fields.topic
    assert message.body == fields.body
    assert message.properties == fields.properties
    assert message.queue_id == fields.queue_id
    assert message.flag == fields.flag
    assert message.queue_offset == fields.queue_offset
    assert message.physical_offset == fields.physical_offset
    assert message.born_timestamp == fields.born_timestamp
    assert message.store_timestamp == fields.store_timestamp
    assert message.reconsume_times == fields.reconsume_times
    assert message.prepared_transaction_offset == fields.prepared_transaction_offset
    assert same_host(message.born_host, fields.born_host)
    assert same_host(message.store_host, fields.store_host)
    assert message.sys_flag == expected_sys_flag(fields)
    assert message.body_crc == zlib.crc32(fields.body) & 0x7FFFFFFF
    assert message.store_size == len(raw)


# --- round trips -------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(record_fields(bodies()))
def test_decode_record_inverts_encode_record(fields: Fields) -> None:
    raw = fields.encode()
    assert_decodes_to(decode_record(raw), fields, raw)


@settings(max_examples=200, deadline=None)
@given(record_fields())
def test_record_size_equals_encoded_length(fields: Fields) -> None:
    raw = fields.encode()
    size = record_size(
        len(fields.body),
        len(fields.topic_bytes),
        len(fields.properties_bytes),
        born_v6=is_ipv6(fields.born_host),
        store_v6=is_ipv6(fields.store_host),
    )
    assert size == len(raw) == struct.unpack_from(">i", raw, 0)[0]


@settings(max_examples=200, deadline=None)
@given(record_fields())
def test_topics_over_127_utf8_bytes_use_magic_v2_and_a_two_byte_length(fields: Fields) -> None:
    """rocketmq-wire.md 4.1: V1 has a 1-byte topic length, V2 (topic > 127) a 2-byte one."""
    raw = fields.encode()
    topic_len_pos = fields.body_pos + len(fields.body)
    topic_len = len(fields.topic_bytes)
    magic = struct.unpack_from(">I", raw, 4)[0]
    if topic_len > 127:
        assert magic == MESSAGE_MAGIC_CODE_V2
        assert struct.unpack_from(">H", raw, topic_len_pos)[0] == topic_len
        assert raw[topic_len_pos + 2 : topic_len_pos + 2 + topic_len] == fields.topic_bytes
    else:
        assert magic == MESSAGE_MAGIC_CODE_V1
        assert raw[topic_len_pos] == topic_len
        assert raw[topic_len_pos + 1 : topic_len_pos + 1 + topic_len] == fields.topic_bytes
    assert decode_record(raw).magic == magic


@pytest.mark.parametrize(
    ("topic", "magic"),
    [
        ("t" * 127, MESSAGE_MAGIC_CODE_V1),
        ("t" * 128, MESSAGE_MAGIC_CODE_V2),
        ("é" * 63 + "t", MESSAGE_MAGIC_CODE_V1),  # 127 bytes
        ("é" * 64, MESSAGE_MAGIC_CODE_V2),  # 64 chars, 128 bytes
        ("😀" * 32, MESSAGE_MAGIC_CODE_V2),  # 32 chars, 128 bytes
        ("t" * 32767, MESSAGE_MAGIC_CODE_V2),
    ],
)
def test_magic_version_follows_the_topic_utf8_length_not_its_char_count(
    topic: str, magic: int
) -> None:
    raw = Fields(topic=topic).encode()
    message = decode_record(raw)
    assert message.magic == magic
    assert message.topic == topic


@settings(max_examples=50, deadline=None)
@given(st.lists(record_fields(), min_size=1, max_size=6))
def test_decode_records_reads_back_to_back_records_in_order(many: list[Fields]) -> None:
    raws = [fields.encode() for fields in many]
    messages = decode_records(b"".join(raws))
    assert len(messages) == len(many)
    for message, fields, raw in zip(messages, many, raws, strict=True):
        assert_decodes_to(message, fields, raw)


def test_decode_records_of_an_empty_buffer_is_empty() -> None:
    assert decode_records(b"") == []


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_decode_record_reads_at_a_position_inside_any_buffer(
    wrap: type[bytes] | type[bytearray] | type[memoryview],
) -> None:
    fields = Fields(properties={"TAGS": "TagA"}, store_host=("::1", 10911))
    raw = fields.encode()
    buffer = wrap(b"\xee" * 13 + raw + b"trailing bytes are not this record's")
    message = decode_record(buffer, 13)
    assert_decodes_to(message, fields, raw)


def test_encode_replaces_caller_ipv6_bits_with_the_host_kinds() -> None:
    """rocketmq-wire.md 4.1: the IPv6 sysFlag bits describe the stored host sizes."""
    all_bits = -1
    v4 = decode_record(Fields(sys_flag=all_bits).encode())
    assert v4.sys_flag == all_bits & ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    born_v6 = decode_record(Fields(born_host=("::1", 1)).encode())
    assert born_v6.sys_flag == BORNHOST_V6_FLAG
    store_v6 = decode_record(Fields(store_host=("fe80::1", 1)).encode())
    assert store_v6.sys_flag == STOREHOSTADDRESS_V6_FLAG


# --- byte-level facts --------------------------------------------------------------------------

# zlib.crc32(b"Hello RocketMQ 2") == 0xCA821663: the sign bit is set, so BODYCRC must clear it.
CRC_SIGN_BIT_BODY = b"Hello RocketMQ 2"


def test_ipv4_record_fields_sit_at_rocketmq_fixed_positions() -> None:
    """rocketmq-wire.md 4.1: magic 4, queue offset 20, physical offset 28, sysFlag 36,
    store timestamp 56, body length 84 (IPv4/IPv4)."""
    properties = b"TAGS\x01TagA\x02KEYS\x01k1\x02"
    raw = encode_record(
        topic=b"TopicTest",
        body=CRC_SIGN_BIT_BODY,
        properties=properties,
        queue_id=3,
        flag=7,
        queue_offset=42,
        physical_offset=123_456,
        sys_flag=0x4,
        born_timestamp=1_700_000_000_000,
        born_host=pack_host(("10.0.0.1", 5555)),
        store_timestamp=1_700_000_000_123,
        store_host=pack_host(("10.0.0.2", 10911)),
        reconsume_times=2,
        prepared_transaction_offset=99,
    )
    body_len = len(CRC_SIGN_BIT_BODY)
    fixed_bytes = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4
    assert fixed_bytes == 88
    expected_size = fixed_bytes + body_len + 1 + 9 + 2 + len(properties)
    assert len(raw) == record_size(body_len, 9, len(properties)) == expected_size
    assert struct.unpack_from(">i", raw, 0)[0] == len(raw)
    assert raw[4:8] == bytes.fromhex("DAA320A7")
    assert struct.unpack_from(">i", raw, 8)[0] == 0x4A821663
    assert struct.unpack_from(">i", raw, 12)[0] == 3
    assert struct.unpack_from(">i", raw, 16)[0] == 7
    assert struct.unpack_from(">q", raw, 20)[0] == 42
    assert struct.unpack_from(">q", raw, 28)[0] == 123_456
    assert struct.unpack_from(">i", raw, 36)[0] == 0x4
    assert struct.unpack_from(">q", raw, 40)[0] == 1_700_000_000_000
    assert raw[48:56] == bytes([10, 0, 0, 1]) + struct.pack(">i", 5555)
    assert struct.unpack_from(">q", raw, 56)[0] == 1_700_000_000_123
    assert raw[64:72] == bytes([10, 0, 0, 2]) + struct.pack(">i", 10911)
    assert struct.unpack_from(">i", raw, 72)[0] == 2
    assert struct.unpack_from(">q", raw, 76)[0] == 99
    assert struct.unpack_from(">i", raw, 84)[0] == body_len
    assert raw[88 : 88 + body_len] == CRC_SIGN_BIT_BODY
    topic_at = 88 + body_len
    assert raw[topic_at] == 9
    assert raw[topic_at + 1 : topic_at + 10] == b"TopicTest"
    assert struct.unpack_from(">h", raw, topic_at + 10)[0] == len(properties)
    assert raw[topic_at + 12 :] == properties


@pytest.mark.parametrize(
    ("born_host", "store_host", "store_timestamp_pos", "store_host_pos", "body_len_pos"),
    [
        (("10.0.0.1", 1), ("10.0.0.2", 2), 56, 64, 84),
        (("::1", 1), ("10.0.0.2", 2), 68, 76, 96),
        (("10.0.0.1", 1), ("::2", 2), 56, 64, 96),
        (("::1", 1), ("::2", 2), 68, 76, 108),
    ],
)
def test_each_ipv6_host_shifts_later_fields_by_twelve_bytes(
    born_host: HostAddress,
    store_host: HostAddress,
    store_timestamp_pos: int,
    store_host_pos: int,
    body_len_pos: int,
) -> None:
    fields = Fields(body=b"xyz", born_host=born_host, store_host=store_host, store_timestamp=-5)
    raw = fields.encode()
    assert raw[48 : 48 + len(pack_host(born_host))] == pack_host(born_host)
    assert struct.unpack_from(">q", raw, store_timestamp_pos)[0] == -5
    assert raw[store_host_pos : store_host_pos + len(pack_host(store_host))] == pack_host(
        store_host
    )
    assert struct.unpack_from(">i", raw, body_len_pos)[0] == 3
    assert raw[body_len_pos + 4 : body_len_pos + 7] == b"xyz"
    assert fields.body_pos == body_len_pos + 4


@pytest.mark.parametrize(
    "body", [b"", b"a", CRC_SIGN_BIT_BODY, bytes(range(256)) * 5, b"\xff" * 4097]
)
def test_body_crc_is_crc32_with_the_sign_bit_cleared(body: bytes) -> None:
    expected = zlib.crc32(body) & 0x7FFFFFFF
    assert body_crc(body) == expected
    raw = Fields(body=body).encode()
    assert struct.unpack_from(">i", raw, 8)[0] == expected
    assert decode_record(raw).body_crc == expected


def test_body_crc_of_a_sign_bit_body_is_positive() -> None:
    assert zlib.crc32(CRC_SIGN_BIT_BODY) == 0xCA821663
    assert body_crc(CRC_SIGN_BIT_BODY) == 0x4A821663


def test_wrong_stored_crc_fails_only_when_checked() -> None:
    fields = Fields()
    raw = encode_record(
        topic=fields.topic_bytes,
        body=fields.body,
        properties=b"",
        born_host=pack_host(fields.born_host),
        store_host=pack_host(fields.store_host),
        crc=body_crc(fields.body) ^ 1,
    )
    with pytest.raises(MessageDecodeError, match="CRC"):
        decode_record(raw)
    assert decode_record(raw, check_crc=False).body == fields.body


# --- rejection ---------------------------------------------------------------------------------

LAYOUTS = {
    "ipv4-ipv4": Fields(properties={"KEYS": "k1", "TAGS": "a"}),
    "ipv6-ipv4": Fields(born_host=("::1", 1), properties={"TAGS": "a"}),
    "ipv4-ipv6": Fields(store_host=("2001:db8::7", 10911), body=b"payload-" * 8),
    "ipv6-ipv6": Fields(born_host=("::1", 1), store_host=("::2", 2), topic="T"),
    "v2-topic": Fields(topic="long-topic-" * 20, properties={"UNIQ_KEY": "ABC"}),
    "empty": Fields(topic="t", body=b""),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_truncation_of_a_record_raises_decode_error(name: str) -> None:
    raw = LAYOUTS[name].encode()
    for cut in range(len(raw)):
        with pytest.raises(MessageDecodeError):
            decode_record(raw[:cut])
        with pytest.raises(MessageDecodeError):
            decode_record(raw[:cut], check_crc=False)


def test_a_truncated_last_record_fails_the_whole_batch() -> None:
    first, second = LAYOUTS["ipv4-ipv4"].encode(), LAYOUTS["v2-topic"].encode()
    for cut in range(1, len(second)):
        with pytest.raises(MessageDecodeError):
            decode_records(first + second[:cut])


def decodes_or_raises_decode_error(raw: bytes, *, check_crc: bool) -> StoredMessage | None:
    """The decoded message, or None for MessageDecodeError; any other exception propagates."""
    try:
        return decode_record(raw, check_crc=check_crc)
    except MessageDecodeError:
        return None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=512), st.booleans())
def test_garbage_raises_only_decode_errors(garbage: bytes, check_crc: bool) -> None:
    decodes_or_raises_decode_error(garbage, check_crc=check_crc)
    with contextlib.suppress(MessageDecodeError):
        decode_records(garbage, check_crc=check_crc)


@st.composite
def plausible_garbage(draw: st.DrawFn) -> bytes:
    """Random bytes behind a header that passes the first checks, to reach the inner ones."""
    rest = bytearray(draw(st.binary(min_size=90, max_size=400)))
    # sysFlag (at 36, 28 bytes into `rest`) and BODYLEN at 84/96/108 are worth steering.
    struct.pack_into(">i", rest, 28, draw(st.sampled_from([0, 0x10, 0x20, 0x30, -1])))
    body_len_at = draw(st.sampled_from([76, 88, 100]))
    if body_len_at + 4 <= len(rest):
        struct.pack_into(">i", rest, body_len_at, draw(st.integers(-8, len(rest))))
    size = len(rest) + 8 if draw(st.integers(0, 3)) else draw(INT32)
    magic = draw(st.sampled_from([MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2]))
    return struct.pack(">iI", size, magic) + bytes(rest)


@st.composite
def spliced_records(draw: st.DrawFn) -> bytes:
    """A valid record with a slice replaced by random bytes, TOTALSIZE mostly kept in step."""
    raw = bytearray(draw(record_fields()).encode())
    start = draw(st.integers(0, len(raw)))
    end = draw(st.integers(start, min(len(raw), start + 64)))
    raw[start:end] = draw(st.binary(max_size=64))
    if len(raw) >= 4 and draw(st.booleans()):
        struct.pack_into(">i", raw, 0, len(raw))
    return bytes(raw)


@settings(max_examples=200, deadline=None)
@given(st.one_of(plausible_garbage(), spliced_records()), st.booleans())
def test_damaged_records_raise_only_decode_errors(garbage: bytes, check_crc: bool) -> None:
    decodes_or_raises_decode_error(garbage, check_crc=check_crc)


@settings(max_examples=200, deadline=None)
@given(record_fields(), st.data())
def test_single_byte_mutations_are_rejected_or_keep_the_body(
    fields: Fields, data: st.DataObject
) -> None:
    raw = bytearray(fields.encode())
    position = data.draw(st.integers(0, len(raw) - 1), label="position")
    raw[position] ^= data.draw(st.integers(1, 255), label="xor")
    message = decodes_or_raises_decode_error(bytes(raw), check_crc=True)
    if message is not None:
        assert message.body == fields.body
    decodes_or_raises_decode_error(bytes(raw), check_crc=False)


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_every_single_bit_flip_is_rejected_or_keeps_the_body(name: str) -> None:
    fields = LAYOUTS[name]
    original = fields.encode()
    for position in range(len(original)):
        for bit in range(8):
            raw = bytearray(original)
            raw[position] ^= 1 << bit
            message = decodes_or_raises_decode_error(bytes(raw), check_crc=True)
            if message is not None:
                assert message.body == fields.body, (position, bit)
            decodes_or_raises_decode_error(bytes(raw), check_crc=False)


def test_every_mutation_inside_the_body_fails_the_crc_check() -> None:
    fields = LAYOUTS["ipv4-ipv6"]
    original = fields.encode()
    for position in range(fields.body_pos, fields.body_pos + len(fields.body)):
        for xor in (0x01, 0x80, 0xFF):
            raw = bytearray(original)
            raw[position] ^= xor
            with pytest.raises(MessageDecodeError, match="CRC"):
                decode_record(bytes(raw))
            unchecked = decode_record(bytes(raw), check_crc=False)
            assert unchecked.body == raw[fields.body_pos : fields.body_pos + len(fields.body)]


@pytest.mark.parametrize(
    "topic", [b"\xff", b"\xc3", b"ok\x80", b"\xed\xa0\x80", b"\xc0\xaf", b"\xfe" * 200]
)
def test_non_utf8_topic_bytes_raise_decode_error(topic: bytes) -> None:
    raw = encode_record(
        topic=topic,
        body=b"body",
        properties=b"",
        born_host=pack_host(("127.0.0.1", 1)),
        store_host=pack_host(("127.0.0.1", 2)),
    )
    with pytest.raises(MessageDecodeError, match="UTF-8"):
        decode_record(raw)


def test_non_utf8_properties_raise_decode_error() -> None:
    raw = encode_record(
        topic=b"T",
        body=b"body",
        properties=b"TAGS\x01\xff\x02",
        born_host=pack_host(("127.0.0.1", 1)),
        store_host=pack_host(("127.0.0.1", 2)),
    )
    with pytest.raises(MessageDecodeError, match="UTF-8"):
        decode_record(raw)


def test_end_of_file_blank_is_not_a_message() -> None:
    buffer = bytearray(200)
    encode_blank(buffer, 0, len(buffer))
    assert struct.unpack_from(">I", buffer, 4)[0] == BLANK_MAGIC_CODE
    with pytest.raises(MessageDecodeError, match="magic"):
        decode_record(buffer)


@pytest.mark.parametrize("delta", [-1, 1])
def test_total_size_that_disagrees_with_the_fields_raises_decode_error(delta: int) -> None:
    raw = bytearray(Fields().encode() + b"\x00")
    struct.pack_into(">i", raw, 0, len(raw) - 1 + delta)
    with pytest.raises(MessageDecodeError):
        decode_record(bytes(raw))


def test_total_size_below_the_minimum_raises_decode_error() -> None:
    raw = bytearray(Fields().encode())
    struct.pack_into(">i", raw, 0, 8)
    with pytest.raises(MessageDecodeError, match="minimum"):
        decode_record(bytes(raw))


def test_encode_refuses_a_topic_over_32767_bytes() -> None:
    with pytest.raises(ValueError, match="topic"):
        Fields(topic="t" * 32768).encode()


def test_encode_refuses_properties_over_32767_bytes() -> None:
    with pytest.raises(ValueError, match="properties"):
        Fields(properties={"K": "v" * 32766}).encode()


def _general_or_error(raw: bytes, check_crc: bool) -> StoredMessage | str:
    try:
        return _decode_general(raw, 0, check_crc)
    except MessageDecodeError as exc:
        return f"error: {exc}"


def _decoded_or_error(raw: bytes, check_crc: bool) -> StoredMessage | str:
    try:
        return decode_record(raw, 0, check_crc=check_crc)
    except MessageDecodeError as exc:
        return f"error: {exc}"


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(record_fields().map(lambda f: f.encode()), plausible_garbage(), spliced_records()),
    st.booleans(),
)
def test_the_one_unpack_path_decodes_as_the_general_one(raw: bytes, check_crc: bool) -> None:
    """Pulls decode nearly every record with one `struct` unpack (V1, IPv4 hosts); for sound
    records and damaged ones alike the result, or the error, is the general decoder's."""
    assert _decoded_or_error(raw, check_crc) == _general_or_error(raw, check_crc)
