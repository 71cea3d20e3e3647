"""Java's `String.hashCode`, which RocketMQ uses for tag codes and index keys.

`h = 31*h + c` over UTF-16 code units with 32-bit wrap-around. The ConsumeQueue stores the tag
hash, and brokers and clients must agree on it, so this must match Java exactly.
"""

from __future__ import annotations

from functools import lru_cache
from operator import mul
from typing import Final

_MASK: Final = 0xFFFFFFFF
_POWERS_LEN: Final = 256
# _POWERS[i] = 31**i mod 2**32; polynomial evaluation becomes one C-level sum of products.
_POWERS: Final = [pow(31, i, 1 << 32) for i in range(_POWERS_LEN)]
_POWERS_REVERSED: Final = _POWERS[::-1]


def _code_units(text: str) -> bytes | list[int]:
    if text.isascii():
        return text.encode("ascii")
    # Java strings may hold lone surrogates; they hash as the code unit they are.
    raw = text.encode("utf-16-be", "surrogatepass")
    return [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]


def java_string_hash(text: str) -> int:
    """Returns Java's `text.hashCode()` as a signed 32-bit int."""
    units = _code_units(text)
    n = len(units)
    if n <= _POWERS_LEN:
        h: int = sum(map(mul, units, _POWERS_REVERSED[_POWERS_LEN - n :])) & _MASK
    else:
        h = 0
        for unit in units:
            h = (31 * h + unit) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def tags_code(tags: str) -> int:
    """The ConsumeQueue tag code of a TAGS property (0 when there is no tag).

    Tags repeat across messages, so the hash is cached.
    """
    return java_string_hash(tags) if tags else 0


def java_string_hash_concat(prefix_hash: int, suffix: str) -> int:
    """Java's `(prefix + suffix).hashCode()` from the prefix's hash, hashing only `suffix`.

    `hash(a + b) = hash(a) * 31**len(b) + hash(b)` (mod 2**32, len in UTF-16 units), so a
    prefix shared by many keys (the `topic#` of index keys) is hashed once.
    """
    units = (
        len(suffix) if suffix.isascii() else len(suffix.encode("utf-16-be", "surrogatepass")) // 2
    )
    power = _POWERS[units] if units < _POWERS_LEN else pow(31, units, 1 << 32)
    h = (prefix_hash * power + java_string_hash(suffix)) & _MASK
    return h - (1 << 32) if h & 0x80000000 else h
