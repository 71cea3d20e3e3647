"""Request -> resources (4.9.8 `PlainAccessValidator.parse`; reference §7.2 table)."""

from __future__ import annotations

import json

import pytest

from pocketmq.acl.accounts import PUB, SUB
from pocketmq.acl.resources import (
    ADMIN_ONLY_CODES,
    ADMIN_ONLY_CODES_4_9_8,
    AclRequestError,
    ResourcePerm,
    needed_perms,
)
from pocketmq.common.codes import RequestCode


def _pairs(code: int, fields: dict[str, str], body: bytes | None = None) -> list[tuple[str, int]]:
    return [(p.resource, p.perm) for p in needed_perms(code, fields, body)]


def test_sends_need_pub_on_the_topic() -> None:
    assert _pairs(RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "P"}) == [("T", PUB)]
    assert _pairs(RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}) == [("T", PUB)]
    assert _pairs(RequestCode.SEND_BATCH_MESSAGE, {"b": "T", "a": "P"}) == [("T", PUB)]


def test_send_to_a_retry_topic_needs_sub_on_the_group() -> None:
    assert _pairs(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G", "a": "G"}) == [("%RETRY%G", SUB)]
    fields = {"topic": "%RETRY%G", "producerGroup": "G"}
    assert _pairs(RequestCode.SEND_MESSAGE, fields) == [("%RETRY%G", SUB)]


def test_consumer_side_codes() -> None:
    assert _pairs(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}) == [
        ("T", SUB),
        ("%RETRY%G", SUB),
    ]
    assert _pairs(RequestCode.QUERY_MESSAGE, {"topic": "T"}) == [("T", SUB)]
    assert _pairs(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"}) == [("%RETRY%G", SUB)]
    assert _pairs(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "consumerGroup": "G"}) == [
        ("%RETRY%G", SUB)
    ]
    assert _pairs(RequestCode.UNREGISTER_CLIENT, {"clientID": "c", "producerGroup": "P"}) == []
    assert _pairs(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}) == [
        ("%RETRY%G", SUB)
    ]
    offset = {"consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "5"}
    assert _pairs(RequestCode.UPDATE_CONSUMER_OFFSET, offset) == [("%RETRY%G", SUB), ("T", SUB)]


def test_heartbeat_names_every_consumer_group_and_subscribed_topic() -> None:
    body = json.dumps(
        {
            "clientID": "c1",
            "producerDataSet": [{"groupName": "P"}],
            "consumerDataSet": [
                {"groupName": "G1", "subscriptionDataSet": [{"topic": "T1"}, {"topic": "T2"}]},
                {"groupName": "G2", "subscriptionDataSet": []},
            ],
        }
    ).encode()
    assert needed_perms(RequestCode.HEART_BEAT, {}, body) == (
        ResourcePerm("%RETRY%G1", SUB),
        ResourcePerm("T1", SUB),
        ResourcePerm("T2", SUB),
        ResourcePerm("%RETRY%G2", SUB),
    )


@pytest.mark.parametrize(
    ("code", "fields", "body"),
    [
        (RequestCode.HEART_BEAT, {}, b"{not json"),
        (RequestCode.HEART_BEAT, {}, b"[1]"),
    ],
)
def test_malformed_requests_raise(code: int, fields: dict[str, str], body: bytes | None) -> None:
    with pytest.raises(AclRequestError):
        needed_perms(code, fields, body)


def test_a_header_field_left_out_leaves_its_resource_unchecked() -> None:
    """As Apache RocketMQ 4.9.7 answers (tests/conformance/test_acl_matrix.py): the handler,
    not ACL, says the field is missing."""
    assert needed_perms(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {}, None) == ()
    assert needed_perms(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "G"}, None) == (
        ResourcePerm("%RETRY%G", SUB),
    )
    assert needed_perms(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "T"}, None) == (
        ResourcePerm("T", SUB),
    )


def test_other_codes_touch_nothing() -> None:
    assert needed_perms(RequestCode.GET_MAX_OFFSET, {"topic": "T"}, None) == ()
    assert needed_perms(RequestCode.SEND_MESSAGE, {}, None) == ()


def test_admin_only_codes() -> None:
    assert {int(c) for c in ADMIN_ONLY_CODES_4_9_8} == {17, 25, 215, 200, 207}
    assert {50, 51, 53} == ADMIN_ONLY_CODES - ADMIN_ONLY_CODES_4_9_8
