"""Client registry: heartbeats in both dialects, group changes, expiry, channel close."""

from __future__ import annotations

import json

import pytest

from pocketmq.broker.clients import (
    ClientRegistry,
    ConsumeFromWhere,
    ConsumeType,
    HeartbeatError,
    MessageModel,
    parse_heartbeat,
)
from pocketmq.common.java_hash import tags_code

JAVA_HEARTBEAT = {
    "clientID": "10.0.0.5@12345#1700000000000",
    "consumerDataSet": [
        {
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "consumeType": "CONSUME_PASSIVELY",
            "groupName": "cg1",
            "messageModel": "CLUSTERING",
            "unitMode": False,
            "subscriptionDataSet": [
                {
                    "classFilterMode": False,
                    "codeSet": [2598919],
                    "expressionType": "TAG",
                    "subString": "TagA || TagB",
                    "subVersion": 1700000000000,
                    "tagsSet": ["TagA", "TagB"],
                    "topic": "TopicA",
                }
            ],
        }
    ],
    "producerDataSet": [{"groupName": "pg1"}],
}

CPP_HEARTBEAT = {
    "clientID": "1234-10.0.0.6@DEFAULT",
    "consumerDataSet": [
        {
            "consumeFromWhere": 4,
            "consumeType": 1,
            "groupName": "cg1",
            "messageModel": 0,
            "subscriptionDataSet": [
                {"codeSet": [0], "subString": "*", "subVersion": "17", "topic": "TopicA"}
            ],
        }
    ],
    "producerDataSet": [],
}


def test_java_heartbeat_parses_with_real_tag_codes() -> None:
    data = parse_heartbeat(json.dumps(JAVA_HEARTBEAT).encode())
    assert data.producer_groups == ["pg1"]
    (group,) = data.consumer_groups
    assert group.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert group.message_model is MessageModel.CLUSTERING
    subscription = group.subscriptions["TopicA"]
    assert subscription.tags_set == {"TagA", "TagB"}
    assert subscription.code_set == {tags_code("TagA"), tags_code("TagB")}


def test_cpp_heartbeat_with_ordinals_and_string_sub_version() -> None:
    data = parse_heartbeat(json.dumps(CPP_HEARTBEAT).encode())
    (group,) = data.consumer_groups
    assert group.message_model is MessageModel.BROADCASTING
    assert group.consume_from_where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert group.subscriptions["TopicA"].sub_version == 17


@pytest.mark.parametrize(
    "body",
    [b"not json", b"[]", b'{"consumerDataSet":[]}', b'{"clientID":"x","consumerDataSet":[{}]}'],
)
def test_bad_heartbeats_are_refused_with_a_reason(body: bytes) -> None:
    with pytest.raises(HeartbeatError):
        parse_heartbeat(body)


def test_group_changes_expiry_and_channel_close() -> None:
    registry = ClientRegistry(channel_expired_timeout_ms=120_000)
    first, second = object(), object()
    java = parse_heartbeat(json.dumps(JAVA_HEARTBEAT).encode())
    cpp = parse_heartbeat(json.dumps(CPP_HEARTBEAT).encode())
    assert registry.heartbeat(java, first, 0) == ["cg1"]
    assert registry.heartbeat(java, first, 10_000) == []  # same member again
    assert registry.heartbeat(cpp, second, 20_000) == ["cg1"]
    assert registry.consumer_ids("cg1") == ["10.0.0.5@12345#1700000000000", "1234-10.0.0.6@DEFAULT"]
    assert registry.subscription("cg1", "TopicA") is not None
    assert registry.scan_expired(130_001) == ["cg1"]  # the Java client went silent at 10 s
    assert registry.consumer_ids("cg1") == ["1234-10.0.0.6@DEFAULT"]
    assert registry.remove_channel(second) == ["cg1"]
    assert registry.consumer_ids("cg1") == []
    assert registry.subscription("cg1", "TopicA") is None


def test_unregister_removes_from_named_groups() -> None:
    registry = ClientRegistry()
    channel = object()
    registry.heartbeat(parse_heartbeat(json.dumps(JAVA_HEARTBEAT).encode()), channel, 0)
    assert registry.unregister("10.0.0.5@12345#1700000000000", "pg1", "cg1") == ["cg1"]
    assert registry.consumer_ids("cg1") == []
    assert registry.producer_groups["pg1"] == {}
