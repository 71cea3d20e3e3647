"""Pull bodies (stored records back to back) straight into Arrow columns.

The connector reads hundreds of thousands of messages a second, so it skips the general decoder
(`pocketmq.common.stored_message`), which builds an object with every field per message: one
`struct` call reads a record's fixed part, the body is sliced, and only the properties the
columns need are split. A record the fast path does not expect (IPv6 hosts, a length that does
not add up) goes through `parse_layout`, which names what is wrong with it. Where the build
compiled `records_kernel`, that kernel decodes the usual records instead of the `struct` path
(`KERNEL_COMPILED`), and this module the others."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Final

import pyarrow as pa

from pocketmq.client.message import MessageQueue
from pocketmq.common.constants import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    MESSAGE_MAGIC_CODE_V1,
    STOREHOSTADDRESS_V6_FLAG,
)
from pocketmq.common.kernels import compiled
from pocketmq.common.stored_message import MessageDecodeError, parse_layout
from pocketmq.spark import records_kernel
from pocketmq.spark.records_kernel import Columns, decode_usual
from pocketmq.spark.rows import ALL_COLUMNS, SYSTEM_PROPERTIES, TIMESTAMP, ReadColumns

# TOTALSIZE .. BODYLEN with IPv4 hosts (the usual layout): 88 bytes, then the body.
_FIXED_V4: Final = struct.Struct(">iIiiiqqiq4si q4si iqi")
_FIXED_V4_SIZE: Final = _FIXED_V4.size
_HEAD: Final = struct.Struct(">iIiiiqqiq")
_V6: Final = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG
_SHORT: Final = struct.Struct(">H")
_LONG: Final = struct.Struct(">q")
_INT: Final = struct.Struct(">i")
# Compression types in SYSFLAG bits 8-10 (`MessageSysFlag`); no bits is zlib (RocketMQ 4).
_LZ4: Final = 0x100
_ZSTD: Final = 0x200
_ZLIB: Final = 0x300

Decoder = Callable[[Columns, bytes, int, int], None]
"""Decodes one pull body's records in a queue offset range into the columns."""
UsualDecoder = Callable[[Columns, bytes, int, int, int, frozenset[str]], int]
"""`records_kernel.decode_usual`: decodes from a position, returns where it stopped."""


def _record_batch(columns: Columns, queue: MessageQueue, read: ReadColumns) -> pa.RecordBatch:
    count = len(columns.bodies)
    build: dict[str, Callable[[], pa.Array]] = {
        "body": lambda: pa.array(columns.bodies, pa.binary()),
        "keys": lambda: pa.array(columns.keys, pa.string()),
        "tags": lambda: pa.array(columns.tags, pa.string()),
        "topic": lambda: pa.repeat(pa.scalar(queue.topic, pa.string()), count),
        "brokerName": lambda: pa.repeat(pa.scalar(queue.broker_name, pa.string()), count),
        "queueId": lambda: pa.repeat(pa.scalar(queue.queue_id, pa.int32()), count),
        "queueOffset": lambda: pa.array(columns.offsets, pa.int64()),
        "msgId": lambda: pa.array(columns.ids, pa.string()),
        "bornTimestamp": lambda: pa.array(columns.born, TIMESTAMP),
        "storeTimestamp": lambda: pa.array(columns.stored, TIMESTAMP),
        "properties": lambda: pa.MapArray.from_arrays(
            pa.array(columns.map_offsets, pa.int32()),
            pa.array(columns.map_keys, pa.string()),
            pa.array(columns.map_values, pa.string()),
        ),
        "reconsumeTimes": lambda: pa.array(columns.reconsumes, pa.int32()),
    }
    return pa.RecordBatch.from_arrays([build[name]() for name in read.names], schema=read.schema)


def to_record_batch(
    pulls: Sequence[bytes],
    queue: MessageQueue,
    start: int,
    end: int,
    *,
    read: ReadColumns = ALL_COLUMNS,
    decoder: Decoder | None = None,
) -> pa.RecordBatch:
    """The messages at queue offsets [start, end) found in `pulls` (pull bodies in any order of
    ranges; records outside the range are left out), as one batch of the columns `read` names
    (all of the connector's schema by default).

    `decoder` is for tests, which hold both decoders (`DECODERS`) to the same answers.

    Raises:
        MessageDecodeError: a record does not decode; the message says where and why.
    """
    decode = decoder or _DECODE
    columns = Columns(with_properties=read.needs_properties)
    for records in pulls:
        decode(columns, records, start, end)
    return _record_batch(columns, queue, read)


def decode_with_kernel(
    columns: Columns, buf: bytes, start: int, end: int, usual: UsualDecoder = decode_usual
) -> None:
    """The kernel (`usual`) for the usual records, this module for the others."""
    pos, limit = 0, len(buf)
    while pos < limit:
        pos = usual(columns, buf, pos, start, end, SYSTEM_PROPERTIES)
        if pos < limit:
            pos += _decode_general(columns, buf, pos, start, end)


def _decode_into(columns: Columns, buf: bytes, start: int, end: int) -> None:
    pos, limit = 0, len(buf)
    while pos < limit:
        if pos + _FIXED_V4_SIZE > limit:
            parse_layout(buf, pos)  # raises: the record is cut short
        (
            size, magic, _crc, _queue_id, _flag, queue_offset, physical, sys_flag, born,
            _born_ip, _born_port, stored, store_ip, store_port, reconsumes, _prepared, body_len,
        ) = _FIXED_V4.unpack_from(buf, pos)  # fmt: skip
        record_end = pos + size
        body_pos = pos + _FIXED_V4_SIZE
        topic_pos = body_pos + body_len
        if (
            sys_flag & _V6
            or magic != MESSAGE_MAGIC_CODE_V1
            or size < _FIXED_V4_SIZE
            or record_end > limit
        ):
            # The general path decodes other layouts and refuses, with the reason, what is
            # not a record (a TOTALSIZE below the fixed part would never move `pos` on).
            pos += _decode_general(columns, buf, pos, start, end)
            continue
        if not start <= queue_offset < end:
            pos = record_end
            continue
        if topic_pos + 1 > record_end:
            parse_layout(buf, pos)  # raises with the reason
        properties_len_pos = topic_pos + 1 + buf[topic_pos]
        if properties_len_pos + 2 + _SHORT.unpack_from(buf, properties_len_pos)[0] != record_end:
            parse_layout(buf, pos)
        body = buf[body_pos:topic_pos]
        if columns.with_properties:
            text = _utf8(buf, properties_len_pos + 2, record_end, pos)
            unique = columns.add_properties(text, SYSTEM_PROPERTIES)
            columns.ids.append(unique or _offset_msg_id(store_ip, store_port, physical))
        columns.bodies.append(
            _inflate(body, sys_flag, queue_offset) if sys_flag & COMPRESSED_FLAG else body
        )
        columns.offsets.append(queue_offset)
        columns.born.append(born * 1000)
        columns.stored.append(stored * 1000)
        columns.reconsumes.append(reconsumes)
        pos = record_end


def _decode_general(columns: Columns, buf: bytes, pos: int, start: int, end: int) -> int:
    """Any valid record (IPv6 hosts, topic length in two bytes): slower, checked field by
    field. Returns the record's size."""
    layout = parse_layout(buf, pos)
    (_, _, _, _, _, queue_offset, physical, sys_flag, born) = _HEAD.unpack_from(buf, pos)
    if not start <= queue_offset < end:
        return layout.size
    p = pos + _HEAD.size + (20 if sys_flag & BORNHOST_V6_FLAG else 8)
    stored = _LONG.unpack_from(buf, p)[0]
    store_v6 = bool(sys_flag & STOREHOSTADDRESS_V6_FLAG)
    store_ip = buf[p + 8 : p + (24 if store_v6 else 12)]
    store_port = _INT.unpack_from(buf, p + (24 if store_v6 else 12))[0]
    reconsumes = _INT.unpack_from(buf, p + (28 if store_v6 else 16))[0]
    body = buf[layout.body_pos : layout.body_pos + layout.body_len]
    if columns.with_properties:
        end_of_properties = layout.properties_pos + layout.properties_len
        unique = columns.add_properties(
            _utf8(buf, layout.properties_pos, end_of_properties, pos), SYSTEM_PROPERTIES
        )
        columns.ids.append(unique or _offset_msg_id(store_ip, store_port, physical))
    columns.bodies.append(
        _inflate(body, sys_flag, queue_offset) if sys_flag & COMPRESSED_FLAG else body
    )
    columns.offsets.append(queue_offset)
    columns.born.append(born * 1000)
    columns.stored.append(stored * 1000)
    columns.reconsumes.append(reconsumes)
    return layout.size


DECODERS: Final[dict[str, Decoder]] = {"interpreted": _decode_into, "kernel": decode_with_kernel}
KERNEL_COMPILED: Final = compiled(records_kernel)
"""Whether `records_kernel` was compiled; interpreted, its byte reads are slower than `struct`."""
_DECODE: Final = decode_with_kernel if KERNEL_COMPILED else _decode_into


def _inflate(body: bytes, sys_flag: int, queue_offset: int) -> bytes:
    kind = sys_flag & COMPRESSION_TYPE_MASK
    if kind not in (0, _ZLIB):
        raise MessageDecodeError(
            f"message at queue offset {queue_offset} is compressed with "
            f"{'LZ4' if kind == _LZ4 else 'ZSTD' if kind == _ZSTD else hex(kind)}; the connector "
            "reads zlib only: have producers use zlib (RocketMQ's default)"
        )
    try:
        return zlib.decompress(body)
    except zlib.error as exc:
        raise MessageDecodeError(
            f"message at queue offset {queue_offset} is flagged compressed but is not zlib data"
        ) from exc


def _utf8(buf: bytes, begin: int, finish: int, record: int) -> str:
    try:
        return buf[begin:finish].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"record at {record}: properties are not UTF-8") from exc


def _offset_msg_id(ip: bytes, port: int, physical: int) -> str:
    """RocketMQ's offset message id (store host and CommitLog offset), for messages whose
    producer set no UNIQ_KEY."""
    return (ip + _INT.pack(port) + _LONG.pack(physical)).hex().upper()
