"""The CommitLog record: RocketMQ's stored-message format, byte for byte.

The layout (field positions, sizes and the structs that read them) is `stored_layout.py`'s;
this module encodes whole records and decodes them with every check. It is pure: buffers in,
values out. Bad bytes never pass as a message: every decode
checks lengths against the record size and the buffer, and raises `MessageDecodeError`.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Final

from pocketmq.common import stored_layout as layout
from pocketmq.common.checksum import crc32
from pocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    MESSAGE_MAGIC_CODE_V1,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOSTADDRESS_V6_FLAG,
)
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_layout import (
    FIXED,
    HEAD_SIZE,
    MIN_RECORD_SIZE,
    PROPERTIES_LENGTH_SIZE,
    SYS_FLAG_POS,
    TAIL_FIXED_SIZE,
    TOPIC_LENGTH_SIZE_V1,
    TOPIC_LENGTH_SIZE_V2,
    WritableBuffer,
    host_size,
)
from pocketmq.common.stored_layout import ReadableBuffer as ReadableBuffer

HostAddress = tuple[str, int]
"""An (ip, port) pair; the ip is an IPv4 or IPv6 literal."""

# Bound by assignment, not by import: CPython 3.11 compiles `name.method(...)` on a name bound by
# an import without its method-call fast path, and every record pays for it (measured ~3%).
_HEAD: Final = layout.HEAD
_INT: Final = layout.INT
_LONG: Final = layout.LONG
_SHORT: Final = layout.SHORT
_UNSIGNED_SHORT: Final = layout.UNSIGNED_SHORT
_TOTAL_MAGIC: Final = layout.TOTAL_MAGIC
_RECONSUME_PREPARED: Final = layout.RECONSUME_PREPARED
_FIXED_V4: Final = layout.FIXED_V4
_V6_FLAGS: Final = layout.V6_FLAGS
_HOSTS_KEPT: Final = 4096
_hosts_v4: dict[bytes, HostAddress] = {}
"""Stored IPv4 hosts (address and port, 8 bytes) already turned into (ip, port): a pull of a
thousand messages names a few producers and one broker."""


class MessageDecodeError(ValueError):
    """Bytes that are not a valid stored message (truncated, garbage, or inconsistent)."""


def record_size(
    body_len: int,
    topic_len: int,
    properties_len: int,
    *,
    born_v6: bool = False,
    store_v6: bool = False,
) -> int:
    """The TOTALSIZE of a record with these field lengths (`MessageExtEncoder.calMsgLength`)."""
    v2 = topic_len > MAX_TOPIC_LENGTH_V1
    return (
        HEAD_SIZE
        + host_size(born_v6)
        + host_size(store_v6)
        + TAIL_FIXED_SIZE
        + body_len
        + (TOPIC_LENGTH_SIZE_V2 if v2 else TOPIC_LENGTH_SIZE_V1)
        + topic_len
        + PROPERTIES_LENGTH_SIZE
        + properties_len
    )


def body_crc(body: bytes | memoryview) -> int:
    """RocketMQ's BODYCRC: CRC32 of the stored body with the sign bit cleared."""
    return crc32(body) & 0x7FFFFFFF


def pack_host(host: HostAddress) -> bytes:
    """The stored form of an address: IPv4 (4 bytes) or IPv6 (16 bytes), then the port."""
    ip, port = host
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    return socket.inet_pton(family, ip) + _INT.pack(port)


def is_ipv6(host: HostAddress) -> bool:
    """Whether the address needs the 20-byte IPv6 form."""
    return ":" in host[0]


@dataclass(slots=True)
class StoredMessage:
    """One decoded CommitLog record (Java's `MessageExt`)."""

    topic: str
    body: bytes
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
    properties: dict[str, str] = field(default_factory=dict)
    body_crc: int = 0
    store_size: int = 0
    magic: int = MESSAGE_MAGIC_CODE_V1


def encode_record(
    *,
    topic: bytes,
    body: bytes,
    properties: bytes,
    queue_id: int = 0,
    flag: int = 0,
    queue_offset: int = 0,
    physical_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: bytes,
    store_timestamp: int = 0,
    store_host: bytes,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """Encodes one record; hosts come pre-packed (`pack_host`), text pre-encoded as UTF-8.

    The IPv6 sysFlag bits are set from the host lengths, so the flags always describe the bytes.

    Raises:
        ValueError: a topic or properties string too long for the format.
    """
    size = record_size(
        len(body),
        len(topic),
        len(properties),
        born_v6=len(born_host) == 20,
        store_v6=len(store_host) == 20,
    )
    buf = bytearray(size)
    encode_record_into(
        buf,
        0,
        size,
        topic=topic,
        body=body,
        properties=properties,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        crc=body_crc(body) if crc is None else crc,
    )
    return bytes(buf)


def reencode(
    stored: StoredMessage,
    *,
    topic: str | None = None,
    properties: dict[str, str] | None = None,
    queue_id: int | None = None,
) -> bytes:
    """`stored` encoded again as a record, with the topic, properties or queue id replaced (a
    half message shown to its checker under its real topic, a retry copy under its own)."""
    return encode_record(
        topic=(stored.topic if topic is None else topic).encode(),
        body=stored.body,
        properties=encode_properties(
            stored.properties if properties is None else properties
        ).encode(),
        queue_id=stored.queue_id if queue_id is None else queue_id,
        flag=stored.flag,
        queue_offset=stored.queue_offset,
        physical_offset=stored.physical_offset,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=pack_host(stored.born_host),
        store_timestamp=stored.store_timestamp,
        store_host=pack_host(stored.store_host),
        reconsume_times=stored.reconsume_times,
        prepared_transaction_offset=stored.prepared_transaction_offset,
    )


def fixed_part(born_host_len: int, store_host_len: int) -> struct.Struct:
    """The struct of every field from TOTALSIZE through BODYLEN, for these host sizes.

    One `pack_into` writes all fixed fields of a record; hosts go in pre-packed.
    """
    return FIXED[born_host_len, store_host_len]


def topic_field(topic: bytes) -> bytes:
    """The TOPIC field: its length (1 byte for V1, 2 bytes for V2) then the UTF-8 bytes."""
    if len(topic) > MAX_TOPIC_LENGTH_V1:
        return _SHORT.pack(len(topic)) + topic
    return bytes((len(topic),)) + topic


def properties_field(properties: bytes) -> bytes:
    """The PROPERTIES field: a 2-byte length then the encoded properties."""
    return _SHORT.pack(len(properties)) + properties


def encode_record_into(
    buf: WritableBuffer,
    pos: int,
    size: int,
    *,
    topic: bytes,
    body: bytes | memoryview,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    crc: int,
) -> None:
    """Writes one record of `size` bytes (from `record_size`) at `buf[pos:]`.

    The CommitLog's append loop does the same three steps inline (fixed part, body, tail).
    """
    topic_len = len(topic)
    if topic_len > MAX_TOPIC_LENGTH:
        raise ValueError(f"topic is {topic_len} bytes; the limit is {MAX_TOPIC_LENGTH}")
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ValueError(
            f"properties are {len(properties)} bytes; the limit is {MAX_PROPERTIES_LENGTH}"
        )
    sys_flag = host_flags(sys_flag, len(born_host), len(store_host))
    fixed = FIXED[len(born_host), len(store_host)]
    fixed.pack_into(
        buf,
        pos,
        size,
        MESSAGE_MAGIC_CODE_V2 if topic_len > MAX_TOPIC_LENGTH_V1 else MESSAGE_MAGIC_CODE_V1,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
    )
    p = pos + fixed.size
    end = p + len(body)
    buf[p:end] = body
    tail = topic_field(topic) + properties_field(properties)
    buf[end : end + len(tail)] = tail
    assert end + len(tail) == pos + size, "record_size and encode_record_into disagree"


def host_flags(sys_flag: int, born_host_len: int, store_host_len: int) -> int:
    """`sys_flag` with the IPv6 bits set exactly for the hosts' stored sizes."""
    sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
    if born_host_len == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if store_host_len == 20:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    return sys_flag


def encode_blank(buf: WritableBuffer, pos: int, size: int) -> None:
    """Writes the end-of-file filler: the blank length, then BLANK_MAGIC_CODE."""
    _TOTAL_MAGIC.pack_into(buf, pos, size, BLANK_MAGIC_CODE)


def _unpack_host(buf: ReadableBuffer, pos: int, v6: bool) -> HostAddress:
    n = 16 if v6 else 4
    ip = socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, bytes(buf[pos : pos + n]))
    return ip, _INT.unpack_from(buf, pos + n)[0]


@dataclass(frozen=True, slots=True)
class RecordLayout:
    """Where the variable parts of one record lie, found by `parse_layout`."""

    size: int
    magic: int
    sys_flag: int
    body_pos: int
    body_len: int
    topic_pos: int
    topic_len: int
    properties_pos: int
    properties_len: int


def peek_size_and_magic(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """TOTALSIZE and MAGICCODE at `pos`, without checking them.

    Raises:
        MessageDecodeError: fewer than 8 bytes are left.
    """
    if len(buf) - pos < 8:
        raise MessageDecodeError(f"truncated record header at {pos}: {len(buf) - pos} bytes left")
    size, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
    return size, magic


def parse_layout(buf: ReadableBuffer, pos: int = 0) -> RecordLayout:
    """Checks the framing of the record at `pos` and locates its parts.

    Raises:
        MessageDecodeError: the bytes are truncated, carry an unknown magic code, or their
            inner lengths do not add up to TOTALSIZE.
    """
    size, magic = peek_size_and_magic(buf, pos)
    if magic not in (MESSAGE_MAGIC_CODE_V1, MESSAGE_MAGIC_CODE_V2):
        raise MessageDecodeError(f"bad magic code {magic:#010x} at {pos}")
    if size < MIN_RECORD_SIZE:
        raise MessageDecodeError(f"record size {size} at {pos} is below the minimum")
    if pos + size > len(buf):
        raise MessageDecodeError(
            f"truncated record at {pos}: size {size}, only {len(buf) - pos} bytes present"
        )
    sys_flag = _INT.unpack_from(buf, pos + SYS_FLAG_POS)[0]
    p = pos + HEAD_SIZE + host_size(bool(sys_flag & BORNHOST_V6_FLAG)) + 8
    p += host_size(bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)) + 4 + 8
    end = pos + size
    if p + 4 > end:
        raise MessageDecodeError(f"record at {pos}: hosts overrun the record")
    body_len = _INT.unpack_from(buf, p)[0]
    body_pos = p + 4
    p = body_pos + body_len
    if body_len < 0 or p + 1 > end:
        raise MessageDecodeError(f"record at {pos}: body length {body_len} overruns the record")
    if magic == MESSAGE_MAGIC_CODE_V2:
        if p + 2 > end:
            raise MessageDecodeError(f"record at {pos}: topic length overruns the record")
        topic_len = _UNSIGNED_SHORT.unpack_from(buf, p)[0]
        topic_pos = p + 2
    else:
        topic_len = buf[p]
        topic_pos = p + 1
    p = topic_pos + topic_len
    if p + 2 > end:
        raise MessageDecodeError(f"record at {pos}: topic overruns the record")
    properties_len = _UNSIGNED_SHORT.unpack_from(buf, p)[0]
    properties_pos = p + 2
    if properties_pos + properties_len != end:
        raise MessageDecodeError(
            f"record at {pos}: fields end at {properties_pos + properties_len - pos}, "
            f"TOTALSIZE says {size}"
        )
    return RecordLayout(
        size,
        magic,
        sys_flag,
        body_pos,
        body_len,
        topic_pos,
        topic_len,
        properties_pos,
        properties_len,
    )


def _text(buf: ReadableBuffer, pos: int, n: int, what: str, at: int) -> str:
    try:
        return bytes(buf[pos : pos + n]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"record at {at}: {what} is not UTF-8") from exc


def host_v4(raw: bytes) -> HostAddress:
    """An IPv4 host and port from their 8 stored bytes; the few hosts a store sees are kept."""
    host = _hosts_v4.get(raw)
    if host is None:
        if len(_hosts_v4) >= _HOSTS_KEPT:
            _hosts_v4.clear()
        host = _hosts_v4[raw] = (
            socket.inet_ntop(socket.AF_INET, raw[:4]),
            int.from_bytes(raw[4:], "big", signed=True),
        )
    return host


def decode_record(buf: ReadableBuffer, pos: int = 0, *, check_crc: bool = True) -> StoredMessage:
    """Decodes the record at `buf[pos:]`.

    Raises:
        MessageDecodeError: see `parse_layout`; also a body CRC mismatch when `check_crc`,
            and topic or properties that are not UTF-8.
    """
    found = _decode_common(buf, pos, check_crc)
    return found if found is not None else _decode_general(buf, pos, check_crc)


def _decode_common(buf: ReadableBuffer, pos: int, check_crc: bool) -> StoredMessage | None:
    """Nearly every record (V1 magic, IPv4 hosts, sound framing) in one unpack; None for any
    other, which `_decode_general` decodes or refuses with the precise reason."""
    available = len(buf) - pos
    if available < _FIXED_V4.size:
        return None
    (
        size, magic, crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_timestamp,
        born_host, store_timestamp, store_host, reconsume_times, prepared_offset, body_len,
    ) = _FIXED_V4.unpack_from(buf, pos)  # fmt: skip
    if (
        magic != MESSAGE_MAGIC_CODE_V1
        or sys_flag & _V6_FLAGS
        or not MIN_RECORD_SIZE <= size <= available
        or body_len < 0
    ):
        return None
    end = pos + size
    body_pos = pos + _FIXED_V4.size
    topic_len_pos = body_pos + body_len
    if topic_len_pos + TOPIC_LENGTH_SIZE_V1 > end:
        return None
    topic_pos = topic_len_pos + TOPIC_LENGTH_SIZE_V1
    properties_len_pos = topic_pos + buf[topic_len_pos]
    if properties_len_pos + PROPERTIES_LENGTH_SIZE > end:
        return None
    properties_pos = properties_len_pos + PROPERTIES_LENGTH_SIZE
    if properties_pos + _UNSIGNED_SHORT.unpack_from(buf, properties_len_pos)[0] != end:
        return None
    body = bytes(buf[body_pos:topic_len_pos])
    if check_crc and body_crc(body) != crc:
        raise MessageDecodeError(f"record at {pos}: body CRC mismatch")
    try:
        topic = bytes(buf[topic_pos:properties_len_pos]).decode("utf-8")
        properties = bytes(buf[properties_pos:end]).decode("utf-8")
    except UnicodeDecodeError:
        return None  # the general path names which field
    return StoredMessage(
        topic=topic,
        body=body,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=host_v4(born_host),
        store_timestamp=store_timestamp,
        store_host=host_v4(store_host),
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_offset,
        properties=decode_properties(properties),
        body_crc=crc,
        store_size=size,
        magic=magic,
    )


def _decode_general(buf: ReadableBuffer, pos: int, check_crc: bool) -> StoredMessage:
    layout = parse_layout(buf, pos)
    (
        size,
        magic,
        crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
    ) = _HEAD.unpack_from(buf, pos)
    body = bytes(buf[layout.body_pos : layout.body_pos + layout.body_len])
    if check_crc and body_crc(body) != crc:
        raise MessageDecodeError(f"record at {pos}: body CRC mismatch")
    born_v6 = bool(sys_flag & BORNHOST_V6_FLAG)
    p = pos + HEAD_SIZE
    born_host = _unpack_host(buf, p, born_v6)
    p += host_size(born_v6)
    store_timestamp = _LONG.unpack_from(buf, p)[0]
    p += 8
    store_v6 = bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)
    store_host = _unpack_host(buf, p, store_v6)
    p += host_size(store_v6)
    reconsume_times, prepared_transaction_offset = _RECONSUME_PREPARED.unpack_from(buf, p)
    topic = _text(buf, layout.topic_pos, layout.topic_len, "topic", pos)
    properties = decode_properties(
        _text(buf, layout.properties_pos, layout.properties_len, "properties", pos)
    )
    return StoredMessage(
        topic=topic,
        body=body,
        queue_id=queue_id,
        flag=flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=store_timestamp,
        store_host=store_host,
        reconsume_times=reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
        properties=properties,
        body_crc=crc,
        store_size=size,
        magic=magic,
    )


def decode_records(buf: ReadableBuffer, *, check_crc: bool = True) -> list[StoredMessage]:
    """Decodes records laid back to back, as in a pull response body.

    Raises:
        MessageDecodeError: any record is bad; nothing partial is returned.
    """
    messages = []
    pos = 0
    while pos < len(buf):
        message = decode_record(buf, pos, check_crc=check_crc)
        messages.append(message)
        pos += message.store_size
    return messages
