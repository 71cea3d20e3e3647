"""Recall handles (RocketMQ's `RecallMessageHandle.HandleV1`): URL-safe base64 of
`v1 <topic> <brokerName> <timestamp> <uniqKey>`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.recall_handle import RecallHandle, RecallHandleError, decode_recall_handle

words = st.text(st.characters(blacklist_characters=" ", blacklist_categories=("Cs",)), min_size=1)


def test_a_handle_is_url_safe_base64_of_its_five_parts_with_padding() -> None:
    handle = RecallHandle("Orders", "broker-a", "1700000005001", "U1")
    assert handle.encode() == "djEgT3JkZXJzIGJyb2tlci1hIDE3MDAwMDAwMDUwMDEgVTE="
    assert RecallHandle("Tp~~", "b", "1", "c").encode() == "djEgVHB-fiBiIDEgYw=="


@given(words, words, words, words)
def test_a_handle_decodes_to_its_parts(topic: str, broker: str, stamp: str, uniq: str) -> None:
    handle = RecallHandle(topic, broker, stamp, uniq)
    assert decode_recall_handle(handle.encode()) == handle


def test_a_handle_without_padding_decodes_as_java_does() -> None:
    assert decode_recall_handle("djEgVHB-fiBiIDEgYw") == RecallHandle("Tp~~", "b", "1", "c")


@pytest.mark.parametrize(
    "text",
    [
        None,
        "",
        "djEgVHB+fiBiIDEgYw==",  # '+' is the standard alphabet, not the URL-safe one
        "not base64!",
        "djIgYSBiIGMgZA==",  # v2 a b c d
        "djEgYSBiIGM=",  # v1 a b c: a part missing
        "_w==",  # not UTF-8
    ],
)
def test_text_that_is_no_handle_is_refused(text: str | None) -> None:
    with pytest.raises(RecallHandleError, match="invalid"):
        decode_recall_handle(text)
