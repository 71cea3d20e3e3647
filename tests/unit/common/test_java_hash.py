"""Java's `String.hashCode` as RocketMQ's tag codes and index keys need it.

Known values were printed by a JVM (`"...".hashCode()`); the property tests compare with the
definition, `h = 31*h + c` over UTF-16 code units with 32-bit wrap-around. Every implementation
is held to them: the interpreted sum of products, `hash_kernel` as imported (compiled where
the build could) and `hash_kernel`'s source run by the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.common import hash_kernel
from pocketmq.common.java_hash import (
    java_string_hash,
    java_string_hash_concat,
    pure_hash_from,
    pure_index_hash,
    tags_code,
)
from pocketmq.store.index_file import index_key_hash, key_hash
from tests.unit.common.kernel_source import interpreted

# 300 chars cycling through a..z: longer than the 256 precomputed powers.
ALPHABET_300 = "".join(chr(ord("a") + i % 26) for i in range(300))
RETRY_KEY_295 = "%RETRY%group_\U0001f600" + "x" * 280  # 295 UTF-16 code units

# Any code point, lone surrogates included (Java strings may hold them); half the draws
# are surrogates so both halves of a pair and unpaired ones are common.
JAVA_CHARS = st.one_of(st.characters(exclude_categories=()), st.characters(categories=["Cs"]))
JAVA_STRINGS = st.text(JAVA_CHARS, max_size=600)


def naive_java_hash(text: str) -> int:
    raw = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(raw), 2):
        h = (31 * h + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


JVM_VALUES = [
    ("TagA", 2598919),
    ("", 0),
    ("hello", 99162322),
    ("Aa", 2112),
    ("BB", 2112),
    ("polygenelubricants", -(2**31)),
    ("TopicTest#key-1", 204089217),
    ("café", 3045921),
    ("中文", 646394),
    ("\U0001f600", 1772899),  # "😀": the surrogate pair D83D DE00
    ("\ud800", 55296),  # a lone surrogate hashes as its code unit
    (ALPHABET_300, -2071830186),
    (RETRY_KEY_295, 1152663845),
]


_INTERPRETED = interpreted(hash_kernel)
# name -> (hash_from, index_hash): (unsigned hash of s + text from that of s, |hash| for index)
IMPLEMENTATIONS: dict[str, tuple[Callable[[int, str], int], Callable[[int, str], int]]] = {
    "sum of products": (pure_hash_from, pure_index_hash),
    "kernel as imported": (hash_kernel.hash_from, hash_kernel.index_hash),
    "kernel interpreted": (_INTERPRETED.hash_from, _INTERPRETED.index_hash),
}


def _signed(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_every_implementation_gives_the_jvm_values(name: str) -> None:
    hash_from, index_hash = IMPLEMENTATIONS[name]
    for text, expected in JVM_VALUES:
        assert _signed(hash_from(0, text)) == expected, text
        assert index_hash(0, text) == key_hash(text), text
    prefix = java_string_hash("TopicTest#")
    assert _signed(hash_from(prefix, "key-1")) == 204089217
    assert _signed(hash_from(prefix & 0xFFFFFFFF, "key-1")) == 204089217


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**31), 2**32 - 1), JAVA_STRINGS)
def test_every_implementation_continues_a_hash_as_the_loop_does(start: int, text: str) -> None:
    raw = text.encode("utf-16-be", "surrogatepass")
    expected = start & 0xFFFFFFFF
    for i in range(0, len(raw), 2):
        expected = (31 * expected + int.from_bytes(raw[i : i + 2], "big")) & 0xFFFFFFFF
    magnitude = _signed(expected)
    expected_index = 0 if magnitude == -(2**31) else abs(magnitude)
    for name, (hash_from, index_hash) in IMPLEMENTATIONS.items():
        assert hash_from(start, text) == expected, name
        assert index_hash(start, text) == expected_index, name


@pytest.mark.parametrize(("text", "expected"), JVM_VALUES)
def test_java_string_hash_matches_jvm_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


@pytest.mark.parametrize("length", [255, 256, 257, 1000])
def test_java_string_hash_agrees_with_the_loop_around_the_precomputed_length(
    length: int,
) -> None:
    for text in ("z" * length, "é" * length, "\U0001f600" * (length // 2)):
        assert java_string_hash(text) == naive_java_hash(text)


@settings(max_examples=200, deadline=None)
@given(JAVA_STRINGS)
def test_java_string_hash_equals_the_utf16_code_unit_loop(text: str) -> None:
    assert java_string_hash(text) == naive_java_hash(text)


@settings(max_examples=200, deadline=None)
@given(JAVA_STRINGS)
def test_java_string_hash_is_a_signed_32_bit_int(text: str) -> None:
    assert -(2**31) <= java_string_hash(text) < 2**31


@settings(max_examples=200, deadline=None)
@given(JAVA_STRINGS, JAVA_STRINGS)
def test_concat_hash_equals_the_hash_of_the_concatenation(prefix: str, suffix: str) -> None:
    whole = java_string_hash(prefix + suffix)
    assert java_string_hash_concat(java_string_hash(prefix), suffix) == whole
    assert whole == naive_java_hash(prefix + suffix)
    # The index's hot path: |hash(topic#key)| from the prefix's hash, MIN_VALUE as 0.
    assert index_key_hash(java_string_hash(prefix), suffix) == key_hash(prefix + suffix)


def test_tags_code_of_no_tag_is_zero() -> None:
    assert tags_code("") == 0


@settings(max_examples=100, deadline=None)
@given(JAVA_STRINGS.filter(bool))
def test_tags_code_is_the_java_hash_of_the_tag(tag: str) -> None:
    assert tags_code(tag) == naive_java_hash(tag)
    assert tags_code(tag) == tags_code(tag)  # the cached answer is the same
