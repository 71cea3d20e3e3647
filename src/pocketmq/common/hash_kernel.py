"""Java's `String.hashCode` as a loop over characters, written to be compiled by mypyc.

The build compiles this module when it can (`setup.py`: mypyc and a C compiler); the loop then
runs on native 64-bit integers, about 30 times faster than `java_hash`'s interpreted
sum of products for a 32-character key. Interpreted, the loop is slower than that sum, so
`java_hash` calls these functions only when this module was compiled, and this source stays
the one definition of both builds. Keep it to what mypyc turns into native code: `i64`
locals, `ord` of indexed characters, no containers.
"""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

_MASK: Final = 0xFFFFFFFF
_INT_MIN: Final = 0x80000000
"""Java's Integer.MIN_VALUE as an unsigned 32-bit value."""


def hash_from(start: int, text: str) -> int:
    """Java's `(s + text).hashCode()` as an unsigned 32-bit int, where `start` is the unsigned
    hash of `s` (0 for the hash of `text` alone).

    Java hashes UTF-16 code units: a code point past U+FFFF counts as its surrogate pair, and a
    lone surrogate (which a Python string may hold) as itself.
    """
    h: i64 = start & _MASK
    for i in range(len(text)):
        unit: i64 = ord(text[i])
        if unit > 0xFFFF:
            unit -= 0x10000
            h = (h * 31 + (0xD800 + (unit >> 10))) & _MASK
            unit = 0xDC00 + (unit & 0x3FF)
        h = (h * 31 + unit) & _MASK
    return h


def index_hash(prefix_hash: int, key: str) -> int:
    """RocketMQ's index hash of `prefix + key`, |hashCode()| with Integer.MIN_VALUE as 0, from
    the unsigned hash of the prefix (a message's `topic#`)."""
    h: i64 = hash_from(prefix_hash, key)
    if h < _INT_MIN:
        return h
    if h == _INT_MIN:
        return 0
    return 0x100000000 - h
