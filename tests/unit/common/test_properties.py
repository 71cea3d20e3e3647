"""The message properties string, `key \\x01 value \\x02` repeated (rocketmq-wire.md 4.3)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.common.properties import (
    PropertyError,
    decode_properties,
    encode_properties,
    find_property,
)

VALID_TEXT = st.text(st.characters(exclude_characters="\x01\x02"), min_size=1, max_size=20)
VALID_MAPS = st.dictionaries(VALID_TEXT, VALID_TEXT, max_size=10)
# Few letters and many separators, so malformed segments of every kind come up often.
RAW_PROPERTIES = st.text(st.sampled_from(["a", "b", "é", "😀", "\x01", "\x02"]), max_size=40)


def java_string2message_properties(text: str) -> dict[str, str]:
    """`MessageDecoder.string2messageProperties`, transcribed index by index."""
    result: dict[str, str] = {}
    index = 0
    while index < len(text):
        new_index = text.find("\x02", index)
        if new_index < 0:
            new_index = len(text)
        if new_index - index >= 3:
            kv_index = text.find("\x01", index)
            if index < kv_index < new_index - 1:
                result[text[index:kv_index]] = text[kv_index + 1 : new_index]
        index = new_index + 1
    return result


@settings(max_examples=200, deadline=None)
@given(VALID_MAPS)
def test_decode_inverts_encode_for_valid_properties(properties: dict[str, str]) -> None:
    assert decode_properties(encode_properties(properties)) == properties


def test_encoding_is_key_separator_value_separator_with_a_trailing_separator() -> None:
    encoded = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2"})
    assert encoded == "TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
    assert encode_properties({}) == ""


def test_encoding_leaves_out_none_values() -> None:
    assert encode_properties({"TAGS": "TagA", "KEYS": None}) == "TAGS\x01TagA\x02"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("", "v"),
        ("k", ""),
        ("k\x01", "v"),
        ("k\x02", "v"),
        ("k", "v\x01w"),
        ("k", "v\x02"),
        ("\x01", "\x02"),
    ],
)
def test_encoding_refuses_empty_or_separator_keys_and_values(key: str, value: str) -> None:
    with pytest.raises(PropertyError):
        encode_properties({"TAGS": "TagA", key: value})


def test_property_error_is_a_value_error() -> None:
    assert issubclass(PropertyError, ValueError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("\x02\x02\x02", {}),
        ("a\x01", {}),  # shorter than three chars
        ("ab", {}),
        ("abc", {}),  # no separator
        ("\x01bc", {}),  # empty key
        ("ab\x01", {}),  # empty value
        ("\x01\x01\x01", {}),
        ("k\x01v", {"k": "v"}),  # the last pair needs no trailing separator
        ("k\x01v\x02", {"k": "v"}),
        ("k\x01v\x01w\x02", {"k": "v\x01w"}),  # only the first separator splits
        ("\x02k\x01v\x02\x02junk\x02x\x01\x02", {"k": "v"}),
        ("k\x01one\x02k\x01two\x02", {"k": "two"}),  # a repeated key: the last one wins
        ("ab\x02k\x01v\x02", {"k": "v"}),  # a bad segment does not spoil the next one
    ],
)
def test_decoding_skips_malformed_segments_like_java(text: str, expected: dict[str, str]) -> None:
    assert decode_properties(text) == expected
    assert java_string2message_properties(text) == expected


@settings(max_examples=200, deadline=None)
@given(RAW_PROPERTIES)
def test_decoding_any_text_matches_java(text: str) -> None:
    assert decode_properties(text) == java_string2message_properties(text)


@settings(max_examples=200, deadline=None)
@given(RAW_PROPERTIES)
def test_whatever_decodes_encodes_again_to_the_same_properties(text: str) -> None:
    decoded = decode_properties(text)
    assert all(key and value and "\x02" not in value for key, value in decoded.items())
    # A value may keep a \x01 (Java splits at the first one), which encoding refuses.
    clean = {key: value for key, value in decoded.items() if "\x01" not in value}
    assert decode_properties(encode_properties(clean)) == clean


PIECES = st.sampled_from(["KEYS", "K", "a", "b", "\x01", "\x02", "KEYS\x01", "\x02KEYS\x01"])


@given(st.lists(PIECES, max_size=12).map("".join), st.sampled_from(["KEYS", "K", "a", "EYS"]))
def test_find_property_reads_one_value_as_decoding_them_all_would(text: str, name: str) -> None:
    """Segments malformed, repeated, empty or with separators inside values included."""
    assert find_property(text, name) == decode_properties(text).get(name)
