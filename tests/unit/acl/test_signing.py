"""Request signatures (reference §7.1; 4.9.8 `AclClientRPCHook`, `PlainAccessValidator`)."""

from __future__ import annotations

import base64
import hashlib
import hmac

from pocketmq.acl.signing import signature, signed_content, verify


def _by_hand(content: bytes, secret: str) -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def test_signature_signs_values_in_key_order_then_body() -> None:
    fields = {"topic": "TopicA", "AccessKey": "RocketMQ", "a": "GroupA", "Signature": "ignored"}
    # Key order: AccessKey < Signature (skipped) < a < topic; values only, no separators.
    expected = _by_hand(b"RocketMQ" + b"GroupA" + b"TopicA" + b"hello", "12345678")
    assert signature(fields, b"hello", "12345678") == expected


def test_known_vector_of_an_empty_request() -> None:
    # HMAC-SHA1(key="12345678", data="RocketMQ"), computed independently.
    assert signature({"AccessKey": "RocketMQ"}, None, "12345678") == _by_hand(
        b"RocketMQ", "12345678"
    )
    assert signature({"AccessKey": "RocketMQ"}, b"", "12345678") == _by_hand(
        b"RocketMQ", "12345678"
    )


def test_mixed_case_keys_sort_like_java_treemap() -> None:
    fields = {"b": "3", "B": "2", "_x": "4", "A": "1", "a": "5"}
    # UTF-16/byte order: uppercase (0x41..) < '_' (0x5F) < lowercase (0x61..).
    assert signed_content(fields, None) == b"1" + b"2" + b"4" + b"5" + b"3"


def test_keys_outside_the_bmp_sort_by_utf16_code_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00, which Java sorts before U+FF01; Python's
    # code-point order would put it after.
    fields = {"\U0001f600": "emoji", "\uff01": "fullwidth"}
    assert signed_content(fields, None) == b"emojifullwidth"


def test_verify_accepts_the_right_signature_and_refuses_a_wrong_one() -> None:
    fields = {"AccessKey": "RocketMQ", "topic": "TopicA"}
    signed = {**fields, "Signature": signature(fields, b"body", "12345678")}
    assert verify(signed, b"body", "12345678")
    assert not verify(signed, b"body", "87654321")
    assert not verify(signed, b"other body", "12345678")
    assert not verify({**signed, "topic": "TopicB"}, b"body", "12345678")
    assert not verify(fields, b"body", "12345678")  # no Signature at all


def test_unique_key_query_is_left_out_as_in_4_9_8() -> None:
    fields = {"AccessKey": "RocketMQ", "topic": "TopicA", "key": "k"}
    sig = signature(fields, None, "12345678")
    received = {**fields, "_UNIQUE_KEY_QUERY": "true", "Signature": sig}
    assert verify(received, None, "12345678")
    assert not verify(received, None, "12345678", unique_key_query_signed=True)
    signed_with_flag = {**fields, "_UNIQUE_KEY_QUERY": "true"}
    received_5x = {**signed_with_flag, "Signature": signature(signed_with_flag, None, "12345678")}
    assert verify(received_5x, None, "12345678", unique_key_query_signed=True)
    assert not verify(received_5x, None, "12345678")
