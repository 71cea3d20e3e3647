"""The ext fields of a binary ROCKETMQ header, read byte by byte, written to be compiled by mypyc.

Every request of RocketMQ's Java clients carries its fields here, so the broker reads a block
like this for every message a client sends one by one. The build compiles this module when it
can (`setup.py`); the lengths are then read into native integers, about three times faster
than `binary_header._binary_ext_fields`, which stays the interpreted build's reader and the one
that words the error for a malformed block. Keep this module to what mypyc turns into native
code (`i64` locals, bytes indexed one by one) and free of imports from the package.
"""

from __future__ import annotations

from mypy_extensions import i64


def binary_ext_fields(data: bytes, start: int, end: int) -> dict[str, str] | None:
    """The ext entries of `data[start:end]` (a 2-byte key length, the key, a 4-byte value
    length, the value, all big-endian, UTF-8), dropping entries with an empty key or value
    as Java reads them as null; None when an entry is malformed."""
    fields: dict[str, str] = {}
    position: i64 = start
    stop: i64 = end
    while position < stop:
        if position + 2 > stop or data[position] >= 0x80:  # a negative key length
            return None
        key_start: i64 = position + 2
        key_end: i64 = key_start + ((data[position] << 8) | data[position + 1])
        if key_end + 4 > stop or data[key_end] >= 0x80:  # a negative value length
            return None
        value_start: i64 = key_end + 4
        value_end: i64 = value_start + (
            (data[key_end] << 24)
            | (data[key_end + 1] << 16)
            | (data[key_end + 2] << 8)
            | data[key_end + 3]
        )
        if value_end > stop:
            return None
        if key_end > key_start and value_end > value_start:
            try:
                key = data[key_start:key_end].decode("utf-8")
                fields[key] = data[value_start:value_end].decode("utf-8")
            except UnicodeDecodeError:
                return None
        position = value_end
    return fields
