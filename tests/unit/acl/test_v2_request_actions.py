"""Request code -> (resource, actions): `DefaultAuthorizationContextBuilder` for remoting."""

import json

import pytest

from pocketmq.acl.policies import Action, Resource
from pocketmq.acl.request_actions import RequestParseError, requested
from pocketmq.common.codes import RequestCode as C

PUB, SUB, GET = Action.PUB, Action.SUB, Action.GET


def test_send_v1_v2_batch_and_retry_sends():
    assert requested(C.SEND_MESSAGE, {"topic": "t"}, None) == [(Resource.topic("t"), (PUB,))]
    assert requested(C.SEND_MESSAGE_V2, {"b": "t", "a": "pg"}, None) == [
        (Resource.topic("t"), (PUB,))
    ]
    assert requested(C.SEND_BATCH_MESSAGE, {"b": "%RETRY%g", "a": "pg"}, None) == [
        (Resource.group("pg"), (SUB,))
    ]
    assert requested(C.SEND_MESSAGE, {"topic": "%RETRY%g"}, None) == [(Resource.group("g"), (SUB,))]


def test_pull_skips_retry_topic_and_asks_group():
    assert requested(C.PULL_MESSAGE, {"topic": "t", "consumerGroup": "g"}, None) == [
        (Resource.topic("t"), (SUB,)),
        (Resource.group("g"), (SUB,)),
    ]
    assert requested(C.PULL_MESSAGE, {"topic": "%RETRY%g", "consumerGroup": "g"}, None) == [
        (Resource.group("g"), (SUB,))
    ]


def test_heartbeat_body():
    body = json.dumps(
        {
            "clientID": "c",
            "producerDataSet": [{"groupName": "pg"}],
            "consumerDataSet": [
                {
                    "groupName": "g",
                    "subscriptionDataSet": [{"topic": "t"}, {"topic": "%RETRY%g"}],
                }
            ],
        }
    ).encode()
    assert requested(C.HEART_BEAT, {"AccessKey": "a"}, body) == [
        (Resource.group("g"), (SUB,)),
        (Resource.topic("t"), (SUB,)),
    ]
    with pytest.raises(RequestParseError):
        requested(C.HEART_BEAT, {"AccessKey": "a"}, b"{not json")


def test_no_ext_fields_asks_nothing():
    assert requested(C.SEND_MESSAGE, {}, None) == []


def test_annotated_codes():
    assert requested(C.QUERY_MESSAGE, {"topic": "t"}, None) == [(Resource.topic("t"), (SUB, GET))]
    assert requested(C.GET_MAX_OFFSET, {"topic": "t", "queueId": "0"}, None) == [
        (Resource.topic("t"), (GET,))
    ]
    assert requested(C.POP_MESSAGE, {"consumerGroup": "g", "topic": "%RETRY%g"}, None) == [
        (Resource.group("g"), (SUB,)),
        (Resource.group("g"), (SUB,)),
    ]
    created = {"topic": "t", "topicFilterType": "SINGLE_TAG"}
    assert requested(C.UPDATE_AND_CREATE_TOPIC, created, None) == [
        (Resource.topic("t"), (Action.CREATE,))
    ]
    # The header's own check (an unknown filter type) fails the whole decision.
    with pytest.raises(RequestParseError):
        requested(C.UPDATE_AND_CREATE_TOPIC, {"topic": "t"}, None)
    assert requested(C.GET_CONSUME_STATS, {"consumerGroup": "g", "topicList": "a;b"}, None) == [
        (Resource.group("g"), (GET,)),
        (Resource.topic("a"), (GET,)),
        (Resource.topic("b"), (GET,)),
    ]
    assert requested(C.GET_ALL_TOPIC_CONFIG, {"x": "1"}, None) == []


def test_admin_codes_ask_the_cluster():
    fields = {"username": "bob"}
    assert requested(C.AUTH_CREATE_USER, fields, None, cluster_name="c1") == [
        (Resource.cluster("c1"), (Action.UPDATE,))
    ]
    assert requested(C.AUTH_LIST_ACL, fields, None, cluster_name="c1") == [
        (Resource.cluster("c1"), (GET,))
    ]


def test_route_info_asks_topic_or_retry_group():
    assert requested(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "t"}, None) == [
        (Resource.topic("t"), (PUB, SUB, GET))
    ]
    assert requested(C.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%g"}, None) == [
        (Resource.group("g"), (SUB, GET))
    ]


def test_lock_batch_body():
    body = json.dumps({"consumerGroup": "g", "mqSet": [{"topic": "t", "queueId": 0}]}).encode()
    assert requested(C.LOCK_BATCH_MQ, {"AccessKey": "a"}, body) == [
        (Resource.group("g"), (SUB,)),
        (Resource.topic("t"), (SUB,)),
    ]
