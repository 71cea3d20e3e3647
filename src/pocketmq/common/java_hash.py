"""Java's `String.hashCode`, which RocketMQ uses for tag codes and index keys.

`h = 31*h + c` over UTF-16 code units with 32-bit wrap-around. The ConsumeQueue stores the tag
hash, and brokers and clients must agree on it, so this must match Java exactly.

Two implementations give the same answers: `hash_kernel`'s loop where the build compiled it
(`KERNEL_COMPILED`), and an interpreted sum of products otherwise, as that loop interpreted
would be slower.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from operator import mul
from typing import Final

from pocketmq.common import hash_kernel
from pocketmq.common.kernels import compiled

KERNEL_COMPILED: Final = compiled(hash_kernel)
"""Whether the hashes run in `hash_kernel` compiled by mypyc."""

_MASK: Final = 0xFFFFFFFF
_POWERS_LEN: Final = 256
# _POWERS[i] = 31**i mod 2**32; polynomial evaluation becomes one C-level sum of products.
_POWERS: Final = [pow(31, i, 1 << 32) for i in range(_POWERS_LEN)]


def _unsigned_hash(text: str) -> tuple[int, int]:
    """`text.hashCode()` as an unsigned 32-bit int, and the length of `text` in UTF-16 units."""
    if text.isascii():
        units: bytes | list[int] = text.encode("ascii")
    else:
        # Java strings may hold lone surrogates; they hash as the code unit they are.
        raw = text.encode("utf-16-be", "surrogatepass")
        units = [int.from_bytes(raw[i : i + 2], "big") for i in range(0, len(raw), 2)]
    n = len(units)
    if n <= _POWERS_LEN:
        # The last unit times 31**0, the one before times 31**1, ...: `map` stops at the
        # shorter input, so no slice of the powers is made.
        return sum(map(mul, reversed(units), _POWERS)) & _MASK, n
    h = 0
    for unit in units:
        h = (31 * h + unit) & _MASK
    return h, n


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def java_string_hash(text: str) -> int:
    """Returns Java's `text.hashCode()` as a signed 32-bit int."""
    return _signed(hash_from(0, text))


@lru_cache(maxsize=4096)
def tags_code(tags: str) -> int:
    """The ConsumeQueue tag code of a TAGS property (0 when there is no tag).

    Tags repeat across messages, so the hash is cached.
    """
    return java_string_hash(tags) if tags else 0


def pure_hash_from(start: int, text: str) -> int:
    """`hash_kernel.hash_from`, interpreted: Java's `(s + text).hashCode()` as an unsigned
    32-bit int from the hash of `s`, hashing only `text`.

    `hash(a + b) = hash(a) * 31**len(b) + hash(b)` (mod 2**32, len in UTF-16 units), so a
    prefix shared by many keys (the `topic#` of index keys) is hashed once.
    """
    h, units = _unsigned_hash(text)
    if not start:
        return h
    power = _POWERS[units] if units < _POWERS_LEN else pow(31, units, 1 << 32)
    return (start * power + h) & _MASK


def pure_index_hash(prefix_hash: int, key: str) -> int:
    """`hash_kernel.index_hash`, interpreted: |hash(prefix + key)| with Integer.MIN_VALUE as 0."""
    h = pure_hash_from(prefix_hash, key)
    if h < 0x80000000:
        return h
    return 0 if h == 0x80000000 else 0x100000000 - h


hash_from: Final[Callable[[int, str], int]] = (
    hash_kernel.hash_from if KERNEL_COMPILED else pure_hash_from
)
index_hash: Final[Callable[[int, str], int]] = (
    hash_kernel.index_hash if KERNEL_COMPILED else pure_index_hash
)


def java_string_hash_concat_unsigned(prefix_hash: int, suffix: str) -> int:
    """Java's `(prefix + suffix).hashCode()` as an unsigned 32-bit int, from the prefix's
    hash (signed or unsigned), hashing only `suffix`."""
    return hash_from(prefix_hash & _MASK, suffix)


def java_string_hash_concat(prefix_hash: int, suffix: str) -> int:
    """Java's `(prefix + suffix).hashCode()` as a signed 32-bit int (see
    `java_string_hash_concat_unsigned`)."""
    return _signed(java_string_hash_concat_unsigned(prefix_hash, suffix))
