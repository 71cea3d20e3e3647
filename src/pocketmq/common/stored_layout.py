"""Where each field of a stored CommitLog record lies: positions, structs and peeks.

The record is RocketMQ's MessageExt encoding (`MessageExtEncoder`, `MessageDecoder`), big-endian:

    pos  field                      pos  field
      0  TOTALSIZE i4                40  BORNTIMESTAMP i8
      4  MAGICCODE i4                48  BORNHOST 4+4 (IPv4) or 16+4 (IPv6)
      8  BODYCRC i4                  56  STORETIMESTAMP i8 (68 after an IPv6 born host)
     12  QUEUEID i4                   ..  STOREHOST 4+4 or 16+4
     16  FLAG i4                      ..  RECONSUMETIMES i4 | PREPAREDTXOFFSET i8
     20  QUEUEOFFSET i8               ..  BODYLEN i4 + BODY
     28  PHYSICALOFFSET i8            ..  TOPICLEN i1 (V1 magic) or i2 (V2) + TOPIC
     36  SYSFLAG i4                   ..  PROPLEN i2 + PROPERTIES

Everything before BORNHOST sits at a fixed position; the hosts' sizes follow the IPv6 bits of
SYSFLAG, and everything after them moves with those sizes and the variable lengths.

This module owns the numbers and the precompiled structs that read them, so the codec
(`stored_message.py`), the dispatcher, recovery and the store's reads agree byte for byte. Its
peeks check nothing: callers that take bytes from disk or the network check the framing first
(`stored_message.parse_layout`) or bound the read themselves. Hot paths call `unpack_from` on
the structs here directly, bound to a module name by assignment rather than by import (CPython
3.11 calls methods of an imported name without its method-call fast path); the peeks are for
everyone else.
"""

from __future__ import annotations

import mmap
import struct
from typing import Final

from pocketmq.common.constants import BORNHOST_V6_FLAG, STOREHOSTADDRESS_V6_FLAG

ReadableBuffer = bytes | bytearray | memoryview | mmap.mmap
WritableBuffer = bytearray | memoryview | mmap.mmap

TOTAL_SIZE_POS: Final = 0
MAGIC_CODE_POS: Final = 4
BODY_CRC_POS: Final = 8
QUEUE_ID_POS: Final = 12
FLAG_POS: Final = 16
QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYS_FLAG_POS: Final = 36
BORN_TIMESTAMP_POS: Final = 40
BORN_HOST_POS: Final = 48
IPV4_HOST_SIZE: Final = 8
IPV6_HOST_SIZE: Final = 20
STORE_TIMESTAMP_POS_V4: Final = BORN_HOST_POS + IPV4_HOST_SIZE
"""STORETIMESTAMP after an IPv4 born host, the layout of nearly every record."""
STORE_TIMESTAMP_END_MAX: Final = BORN_HOST_POS + IPV6_HOST_SIZE + 8
"""A record prefix this long holds STORETIMESTAMP whatever the born host."""

HEAD: Final = struct.Struct(">iIiiiqqiq")
"""TOTALSIZE through BORNTIMESTAMP: size, magic, crc, queue id, flag, queue offset, physical
offset, sys flag, born timestamp."""
HEAD_SIZE: Final = HEAD.size
TOTAL_MAGIC: Final = struct.Struct(">iI")
INT: Final = struct.Struct(">i")
LONG: Final = struct.Struct(">q")
SHORT: Final = struct.Struct(">h")
UNSIGNED_SHORT: Final = struct.Struct(">H")
RECONSUME_PREPARED: Final = struct.Struct(">iq")
"""RECONSUMETIMES and PREPAREDTXOFFSET, right after STOREHOST."""
TAIL_FIXED_SIZE: Final = 8 + 4 + 8 + 4
"""STORETIMESTAMP, RECONSUMETIMES, PREPAREDTXOFFSET and BODYLEN."""
TOPIC_LENGTH_SIZE_V1: Final = 1
TOPIC_LENGTH_SIZE_V2: Final = 2
PROPERTIES_LENGTH_SIZE: Final = 2
MIN_RECORD_SIZE: Final = (
    HEAD_SIZE
    + IPV4_HOST_SIZE
    + TAIL_FIXED_SIZE
    + IPV4_HOST_SIZE
    + TOPIC_LENGTH_SIZE_V1
    + PROPERTIES_LENGTH_SIZE
)

FIXED: Final = {
    (born, store): struct.Struct(f">iIiiiqqiq{born}sq{store}siqi")
    for born in (IPV4_HOST_SIZE, IPV6_HOST_SIZE)
    for store in (IPV4_HOST_SIZE, IPV6_HOST_SIZE)
}
"""Every field from TOTALSIZE through BODYLEN, by (born host size, store host size); the body
starts right after."""
FIXED_V4: Final = FIXED[IPV4_HOST_SIZE, IPV4_HOST_SIZE]
"""`FIXED` for IPv4 hosts: the size, magic, crc, queue id, flag, queue offset, physical offset,
sys flag, born timestamp, born host, store timestamp, store host, reconsume times, prepared
transaction offset and body length of nearly every record in one unpack."""
V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG


def host_size(v6: bool) -> int:
    """The stored size of a host: 4 + 4 bytes for IPv4, 16 + 4 for IPv6."""
    return IPV6_HOST_SIZE if v6 else IPV4_HOST_SIZE


def store_timestamp_pos(sys_flag: int) -> int:
    """Where STORETIMESTAMP lies in a record with this SYSFLAG (after the born host)."""
    return BORN_HOST_POS + host_size(bool(sys_flag & BORNHOST_V6_FLAG))


def peek_sys_flag(buf: ReadableBuffer, pos: int) -> int:
    """SYSFLAG of the record at `pos`; the caller knows at least 40 bytes are there."""
    sys_flag: int = INT.unpack_from(buf, pos + SYS_FLAG_POS)[0]
    return sys_flag


def peek_store_timestamp(buf: ReadableBuffer, pos: int) -> int:
    """STORETIMESTAMP of the record at `pos`; the caller knows the prefix up to it is there
    (`STORE_TIMESTAMP_END_MAX` bytes always are enough)."""
    stamp: int = LONG.unpack_from(buf, pos + store_timestamp_pos(peek_sys_flag(buf, pos)))[0]
    return stamp
