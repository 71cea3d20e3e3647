"""Dispatch's parse of stored records of the usual layout (magic V1, IPv4 hosts), written to be
compiled by mypyc (`setup.py`).

Dispatch parses every record a replica copies, recovery re-dispatches, or the append path did
not hand over. Compiled, this reads a record's fixed fields byte by byte into native integers
and checks its lengths without a Python frame: about 220 ns a 1 KiB record, the copy of the
chunk included, where the interpreted parser takes about 1,650. Interpreted, those byte reads
would be slower than `struct`, so `dispatch` calls it only when compiled; its own parser stays
the interpreted path, the one that words errors, and the reference that the tests hold this
one to. Any other record (another magic, the blank at a file's end, IPv6 hosts, lengths that
do not add up, text that is not UTF-8, a record cut by the end of `data`, an offset other than
expected) stops the kernel before it: `dispatch` parses that one, or refuses it, itself.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

# Positions in the fixed part with IPv4 hosts (`stored_layout`): TOTALSIZE .. BODYLEN, then body.
_MAGIC: Final = 4
_QUEUE_ID: Final = 12
_QUEUE_OFFSET: Final = 20
_PHYSICAL_OFFSET: Final = 28
_SYS_FLAG: Final = 36
_STORE_TIMESTAMP: Final = 56
_BODY_LEN: Final = 84
FIXED_SIZE: Final = 88
MAGIC_V1: Final = -626843481  # 0xDAA320A7 as Java's int
V6_FLAGS: Final = 0x10 | 0x20  # BORNHOST_V6, STOREHOSTADDRESS_V6
_TAIL_MIN: Final = 3
"""Bytes after the body of the smallest record: a topic length and a properties length."""

Fields = tuple[str, int, int, int, int, int, int, str]
"""A record as `describe_record` takes it: topic, queue id, CommitLog offset, size, store
time, queue offset, sys flag, properties text."""


def _int(buf: bytes, p: i64) -> i64:
    """The big-endian signed 32-bit int at `buf[p:p + 4]`."""
    value: i64 = (buf[p] << 24) | (buf[p + 1] << 16) | (buf[p + 2] << 8) | buf[p + 3]
    if value >= 0x80000000:
        value -= 0x100000000
    return value


def _long(buf: bytes, p: i64) -> i64:
    """The big-endian signed 64-bit int at `buf[p:p + 8]`."""
    high: i64 = _int(buf, p)
    low: i64 = (buf[p + 4] << 24) | (buf[p + 5] << 16) | (buf[p + 6] << 8) | buf[p + 7]
    return high * 0x100000000 + low


def parse_records(data: bytes, offset: int, limit: int, out: list[Fields]) -> int:
    """Parses up to `limit` records of the usual layout from the start of `data`, which lies
    at CommitLog offset `offset`, into `out`.

    Returns:
        How many bytes of `data` the parsed records take; the next record starts there.
    """
    pos: i64 = 0
    base: i64 = offset
    n: i64 = len(data)
    parsed: i64 = 0
    while parsed < limit and pos + FIXED_SIZE <= n:
        size: i64 = _int(data, pos)
        end: i64 = pos + size
        if _int(data, pos + _MAGIC) != MAGIC_V1 or size < FIXED_SIZE + _TAIL_MIN or end > n:
            break
        sys_flag: i64 = _int(data, pos + _SYS_FLAG)
        if sys_flag < 0 or sys_flag & V6_FLAGS:
            break
        if _long(data, pos + _PHYSICAL_OFFSET) != base + pos:
            break
        body_len: i64 = _int(data, pos + _BODY_LEN)
        topic_len_pos: i64 = pos + FIXED_SIZE + body_len
        if body_len < 0 or topic_len_pos + _TAIL_MIN > end:
            break
        topic_pos: i64 = topic_len_pos + 1
        properties_len_pos: i64 = topic_pos + data[topic_len_pos]
        if properties_len_pos + 2 > end:
            break
        properties_pos: i64 = properties_len_pos + 2
        properties_len: i64 = (data[properties_len_pos] << 8) | data[properties_len_pos + 1]
        if properties_pos + properties_len != end:
            break
        try:
            topic = data[topic_pos:properties_len_pos].decode("utf-8")
            properties = data[properties_pos:end].decode("utf-8")
        except UnicodeDecodeError:
            break
        out.append(
            (
                topic,
                _int(data, pos + _QUEUE_ID),
                base + pos,
                size,
                _long(data, pos + _STORE_TIMESTAMP),
                _long(data, pos + _QUEUE_OFFSET),
                sys_flag,
                properties,
            )
        )
        pos = end
        parsed += 1
    return pos
