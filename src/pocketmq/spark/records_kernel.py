"""The Spark connector's decoder of pull bodies into column lists, for the usual record (magic
V1, IPv4 hosts, body not compressed), written to be compiled by mypyc (`setup.py`).

Compiled, it reads the fixed fields byte by byte into native integers and splits the properties
without a Python frame per record. Interpreted, those byte reads would be slower than `struct`,
so `records` calls it only when compiled; its own decoder stays the interpreted path and the
reference the tests hold this one to. Any other record (IPv6 hosts, a compressed body, lengths
that do not add up, a cut record) stops the kernel, which returns its position for `records`
to decode, or refuse, field by field.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

# Positions in the fixed part with IPv4 hosts (`stored_layout`): TOTALSIZE .. BODYLEN, then body.
_MAGIC: Final = 4
_QUEUE_OFFSET: Final = 20
_PHYSICAL_OFFSET: Final = 28
_SYS_FLAG: Final = 36
_BORN_TIMESTAMP: Final = 40
_STORE_TIMESTAMP: Final = 56
_STORE_HOST: Final = 64
_RECONSUME_TIMES: Final = 72
_BODY_LEN: Final = 84
FIXED_SIZE: Final = 88
MAGIC_V1: Final = -626843481  # 0xDAA320A7 as Java's int
OTHER_LAYOUT: Final = 0x1 | 0x10 | 0x20  # COMPRESSED, BORNHOST_V6, STOREHOSTADDRESS_V6
_NAME_VALUE: Final = "\x01"
_PROPERTY: Final = "\x02"


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


class Columns:
    """The column lists the kernel fills, one entry per record (the user map: flattened keys
    and values, with the running count at the end of each record in `map_offsets`).

    Without `with_properties` (a read of none of keys, tags, msgId and properties), the
    properties are not read at all and their lists stay empty."""

    def __init__(self, with_properties: bool = True) -> None:
        self.with_properties = with_properties
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

    def add_properties(self, text: str, system: frozenset[str]) -> str | None:
        """Splits one properties string into the keys/tags columns and the user map (names in
        `system` stay out of it); returns UNIQ_KEY. Malformed segments are skipped, as Java
        skips them."""
        keys: str | None = None
        tags: str | None = None
        unique: str | None = None
        # Segment by segment with `find`, not split and partition: no list or tuple a record.
        length: i64 = len(text)
        i: i64 = 0
        while i < length:
            j: i64 = text.find(_PROPERTY, i)
            if j < 0:
                j = length
            k: i64 = text.find(_NAME_VALUE, i, j)
            # A name and a value, both non-empty; the value keeps any later NAME_VALUE.
            if i < k < j - 1:
                name = text[i:k]
                value = text[k + 1 : j]
                if name not in system:
                    self.map_keys.append(name)
                    self.map_values.append(value)
                elif name == "KEYS":
                    keys = value
                elif name == "TAGS":
                    tags = value
                elif name == "UNIQ_KEY":
                    unique = value
            i = j + 1
        self.map_offsets.append(len(self.map_keys))
        self.keys.append(keys)
        self.tags.append(tags)
        return unique


def decode_usual(
    columns: Columns, buf: bytes, pos: int, start: int, end: int, system: frozenset[str]
) -> int:
    """Decodes the records from `buf[pos:]` whose queue offsets are in `[start, end)` into
    `columns`, and skips the others, until the end of `buf` or the first record of another
    layout or in doubt; returns where it stopped (`len(buf)` when done)."""
    limit: i64 = len(buf)
    p: i64 = pos
    while p + FIXED_SIZE <= limit:
        size: i64 = _int(buf, p)
        record_end: i64 = p + size
        if (
            _int(buf, p + _MAGIC) != MAGIC_V1
            or _int(buf, p + _SYS_FLAG) & OTHER_LAYOUT
            or size < FIXED_SIZE
            or record_end > limit
        ):
            return p
        queue_offset: i64 = _long(buf, p + _QUEUE_OFFSET)
        if queue_offset < start or queue_offset >= end:
            p = record_end
            continue
        body_len: i64 = _int(buf, p + _BODY_LEN)
        topic_pos: i64 = p + FIXED_SIZE + body_len
        if body_len < 0 or topic_pos + 1 > record_end:
            return p
        properties_pos: i64 = topic_pos + 3 + buf[topic_pos]
        if properties_pos > record_end:
            return p
        if properties_pos + ((buf[properties_pos - 2] << 8) | buf[properties_pos - 1]) != (
            record_end
        ):
            return p
        if columns.with_properties:
            try:
                text = buf[properties_pos:record_end].decode("utf-8")
            except UnicodeDecodeError:
                return p
            unique = columns.add_properties(text, system)
            if unique is None:
                # RocketMQ's offset message id: store host and port, then the CommitLog offset.
                unique = (
                    (
                        buf[p + _STORE_HOST : p + _STORE_HOST + 8]
                        + buf[p + _PHYSICAL_OFFSET : p + _PHYSICAL_OFFSET + 8]
                    )
                    .hex()
                    .upper()
                )
            columns.ids.append(unique)
        columns.bodies.append(buf[p + FIXED_SIZE : topic_pos])
        columns.offsets.append(queue_offset)
        columns.born.append(_long(buf, p + _BORN_TIMESTAMP) * 1000)
        columns.stored.append(_long(buf, p + _STORE_TIMESTAMP) * 1000)
        columns.reconsumes.append(_int(buf, p + _RECONSUME_TIMES))
        p = record_end
    return p
