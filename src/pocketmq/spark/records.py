"""Pull bodies (stored records back to back) straight into Arrow columns.

The connector reads hundreds of thousands of messages a second, so it skips the general decoder
(`pocketmq.common.stored_message`), which builds an object with every field per message: one
`struct` call reads a record's fixed part, the body is sliced, and only the properties the
columns need are split. A record the fast path does not expect (IPv6 hosts, a length that does
not add up) goes through `parse_layout`, which names what is wrong with it."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Final

import pyarrow as pa

from pocketmq.client.message import MessageQueue
from pocketmq.common.constants import (
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_TYPE_MASK,
    MESSAGE_MAGIC_CODE_V1,
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    STOREHOSTADDRESS_V6_FLAG,
)
from pocketmq.common.stored_message import MessageDecodeError, parse_layout
from pocketmq.spark.rows import ARROW_SCHEMA, SYSTEM_PROPERTIES, TIMESTAMP

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


class _Columns:
    """Column lists filled record by record, turned into one record batch at the end."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.keys: list[str | None] = []
        self.tags: list[str | None] = []
        self.offsets: list[int] = []
        self.ids: list[str | None] = []
        self.born: list[int] = []
        self.stored: list[int] = []
        self.reconsumes: list[int] = []
        self.map_offsets: list[int] = [0]
        self.map_keys: list[str] = []
        self.map_values: list[str] = []

    def add_properties(self, text: str) -> str | None:
        """Splits one properties string into the keys/tags columns and the user map; returns
        UNIQ_KEY."""
        keys = tags = unique = None
        map_keys, map_values = self.map_keys, self.map_values
        for segment in text.split(PROPERTY_SEPARATOR):
            name, sep, value = segment.partition(NAME_VALUE_SEPARATOR)
            if not (sep and name and value):
                continue  # as Java skips a malformed segment
            if name in SYSTEM_PROPERTIES:
                if name == "KEYS":
                    keys = value
                elif name == "TAGS":
                    tags = value
                elif name == "UNIQ_KEY":
                    unique = value
                continue
            map_keys.append(name)
            map_values.append(value)
        self.map_offsets.append(len(map_keys))
        self.keys.append(keys)
        self.tags.append(tags)
        return unique

    def batch(self, queue: MessageQueue) -> pa.RecordBatch:
        count = len(self.bodies)
        properties = pa.MapArray.from_arrays(
            pa.array(self.map_offsets, pa.int32()),
            pa.array(self.map_keys, pa.string()),
            pa.array(self.map_values, pa.string()),
        )
        return pa.RecordBatch.from_arrays(
            [
                pa.array(self.bodies, pa.binary()),
                pa.array(self.keys, pa.string()),
                pa.array(self.tags, pa.string()),
                pa.repeat(pa.scalar(queue.topic, pa.string()), count),
                pa.repeat(pa.scalar(queue.broker_name, pa.string()), count),
                pa.repeat(pa.scalar(queue.queue_id, pa.int32()), count),
                pa.array(self.offsets, pa.int64()),
                pa.array(self.ids, pa.string()),
                pa.array(self.born, TIMESTAMP),
                pa.array(self.stored, TIMESTAMP),
                properties,
                pa.array(self.reconsumes, pa.int32()),
            ],
            schema=ARROW_SCHEMA,
        )


def to_record_batch(
    pulls: Sequence[bytes], queue: MessageQueue, start: int, end: int
) -> pa.RecordBatch:
    """The messages at queue offsets [start, end) found in `pulls` (pull bodies in any order of
    ranges; records outside the range are left out), as one batch with the connector's schema.

    Raises:
        MessageDecodeError: a record does not decode; the message says where and why.
    """
    columns = _Columns()
    for records in pulls:
        _decode_into(columns, records, start, end)
    return columns.batch(queue)


def _decode_into(columns: _Columns, buf: bytes, start: int, end: int) -> None:
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
        if sys_flag & _V6 or magic != MESSAGE_MAGIC_CODE_V1 or record_end > limit:
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
        columns.bodies.append(
            _inflate(body, sys_flag, queue_offset) if sys_flag & COMPRESSED_FLAG else body
        )
        text = _utf8(buf, properties_len_pos + 2, record_end, pos)
        unique = columns.add_properties(text)
        columns.ids.append(unique or _offset_msg_id(store_ip, store_port, physical))
        columns.offsets.append(queue_offset)
        columns.born.append(born * 1000)
        columns.stored.append(stored * 1000)
        columns.reconsumes.append(reconsumes)
        pos = record_end


def _decode_general(columns: _Columns, buf: bytes, pos: int, start: int, end: int) -> int:
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
    columns.bodies.append(
        _inflate(body, sys_flag, queue_offset) if sys_flag & COMPRESSED_FLAG else body
    )
    end_of_properties = layout.properties_pos + layout.properties_len
    unique = columns.add_properties(_utf8(buf, layout.properties_pos, end_of_properties, pos))
    columns.ids.append(unique or _offset_msg_id(store_ip, store_port, physical))
    columns.offsets.append(queue_offset)
    columns.born.append(born * 1000)
    columns.stored.append(stored * 1000)
    columns.reconsumes.append(reconsumes)
    return layout.size


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
