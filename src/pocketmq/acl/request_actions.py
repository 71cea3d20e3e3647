"""What a remoting request asks, for ACL 2.0: (resource, actions) pairs per request code.

Follows RocketMQ 5.x's `DefaultAuthorizationContextBuilder.build(ChannelHandlerContext, ...)`:
a few codes are decoded by hand (`_SPECIAL`); every other code uses the `@RocketMQAction`
annotation of its request header (actions, and a resource type that matters only when it is
Cluster) and the header fields marked `@RocketMQResource` (`_ANNOTATED`). Rules kept:

- a request without ext fields asks nothing (RocketMQ returns before looking at the code);
- a `%RETRY%<group>` name in a topic field means the group; a `%DLQ%` name stays a topic;
- a field left out asks nothing; an annotated Cluster code with no resource field asks on
  `Cluster:<clusterName>` of the auth config; a Topic- or Group-typed annotation without
  resource fields (GET_ALL_TOPIC_CONFIG, GET_TOPICS_BY_CLUSTER ...) asks nothing;
- a namespace is not special: `ns%topic` is the topic's whole name;
- codes without an annotated header ask nothing (only authentication applies).

Pure. Raises `RequestParseError` where RocketMQ answers `parse authorization context error.`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Final

from pocketmq.acl.policies import Action, Resource, ResourceType
from pocketmq.common.codes import RequestCode as C
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX

Requested = list[tuple[Resource, tuple[Action, ...]]]

PARSE_ERROR_REMARK: Final = "parse authorization context error."

PUB: Final = (Action.PUB,)
SUB: Final = (Action.SUB,)
GET: Final = (Action.GET,)
UPDATE: Final = (Action.UPDATE,)
SUB_GET: Final = (Action.SUB, Action.GET)
T, G, CL = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


class RequestParseError(ValueError):
    """The request cannot be read (a body that is not the expected JSON); RocketMQ refuses it
    with NO_PERMISSION and `PARSE_ERROR_REMARK`."""


Field = tuple[str, ResourceType, str]  # ext field, resource type, splitter ("" for none)

_ANNOTATED: Final[dict[int, tuple[ResourceType, tuple[Action, ...], tuple[Field, ...]]]] = {
    C.ACK_MESSAGE: (T, SUB, (("consumerGroup", G, ""), ("topic", T, ""))),
    C.CHANGE_MESSAGE_INVISIBLETIME: (T, SUB, (("consumerGroup", G, ""), ("topic", T, ""))),
    C.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: (T, GET, (("topic", T, ""),)),
    C.CHECK_TRANSACTION_STATE: (T, PUB, (("topic", T, ""),)),
    C.CLONE_GROUP_OFFSET: (T, UPDATE, (("destGroup", G, ""), ("topic", T, ""))),
    C.CONSUME_MESSAGE_DIRECTLY: (T, SUB, (("consumerGroup", G, ""), ("topic", T, ""))),
    C.UPDATE_AND_CREATE_TOPIC_LIST: (T, (Action.CREATE,), ()),
    C.UPDATE_AND_CREATE_TOPIC: (T, (Action.CREATE,), (("topic", T, ""),)),
    C.DELETE_SUBSCRIPTIONGROUP: (T, (Action.DELETE,), (("groupName", G, ""),)),
    C.DELETE_TOPIC_IN_BROKER: (T, (Action.DELETE,), (("topic", T, ""),)),
    C.EXPORT_ROCKSDB_CONFIG_TO_JSON: (CL, GET, ()),
    C.GET_ALL_PRODUCER_INFO: (CL, GET, ()),
    # Request and response headers both carry the annotation; either way nothing is asked.
    C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (G, GET, ()),
    C.GET_ALL_TOPIC_CONFIG: (T, GET, ()),
    C.GET_BROKER_MEMBER_GROUP: (T, GET, (("clusterName", CL, ""),)),
    C.GET_BROKER_CONSUME_STATS: (CL, GET, ()),
    C.GET_CONSUME_STATS: (
        T,
        GET,
        (("consumerGroup", G, ""), ("topic", T, ""), ("topicList", T, ";")),
    ),
    C.GET_CONSUMER_CONNECTION_LIST: (T, GET, (("consumerGroup", G, ""),)),
    C.GET_CONSUMER_RUNNING_INFO: (T, GET, (("consumerGroup", G, ""),)),
    C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: (T, GET, (("topic", T, ""), ("group", G, ""))),
    C.GET_EARLIEST_MSG_STORETIME: (T, GET, (("topic", T, ""),)),
    C.GET_MAX_OFFSET: (T, GET, (("topic", T, ""),)),
    C.GET_MIN_OFFSET: (T, GET, (("topic", T, ""),)),
    C.GET_PRODUCER_CONNECTION_LIST: (CL, GET, ()),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: (T, GET, (("group", G, ""),)),
    C.GET_TOPIC_CONFIG: (T, GET, (("topic", T, ""),)),
    C.GET_TOPIC_STATS_INFO: (T, GET, (("topic", T, ""),)),
    C.GET_TOPICS_BY_CLUSTER: (T, (Action.LIST,), ()),
    C.NOTIFICATION: (T, SUB, (("consumerGroup", G, ""), ("topic", T, ""))),
    C.NOTIFY_CONSUMER_IDS_CHANGED: (T, SUB, (("consumerGroup", G, ""),)),
    C.PEEK_MESSAGE: (T, SUB, (("topic", T, ""), ("consumerGroup", G, ""))),
    C.POLLING_INFO: (T, GET, (("consumerGroup", G, ""), ("topic", T, ""))),
    C.POP_MESSAGE: (T, SUB, (("consumerGroup", G, ""), ("topic", T, ""))),
    C.QUERY_CONSUME_QUEUE: (T, GET, (("topic", T, ""), ("consumerGroup", G, ""))),
    C.QUERY_CONSUME_TIME_SPAN: (T, GET, (("topic", T, ""), ("group", G, ""))),
    C.QUERY_CORRECTION_OFFSET: (
        T,
        GET,
        (("filterGroups", G, ","), ("compareGroup", G, ""), ("topic", T, "")),
    ),
    C.QUERY_SUBSCRIPTION_BY_CONSUMER: (T, GET, (("group", G, ""), ("topic", T, ""))),
    C.QUERY_TOPIC_CONSUME_BY_WHO: (T, GET, (("topic", T, ""),)),
    C.QUERY_TOPICS_BY_CONSUMER: (T, GET, (("group", G, ""),)),
    C.PUSH_REPLY_MESSAGE_TO_CLIENT: (T, SUB, (("producerGroup", G, ""), ("topic", T, ""))),
    C.INVOKE_BROKER_TO_RESET_OFFSET: (T, UPDATE, (("group", G, ""), ("topic", T, ""))),
    C.RESUME_CHECK_HALF_MESSAGE: (T, UPDATE, (("topic", T, ""),)),
    C.SEARCH_OFFSET_BY_TIMESTAMP: (T, GET, (("topic", T, ""),)),
    C.UPDATE_AND_GET_GROUP_FORBIDDEN: (T, UPDATE, (("group", G, ""), ("topic", T, ""))),
    C.VIEW_MESSAGE_BY_ID: (T, GET, (("topic", T, ""),)),
    C.VIEW_BROKER_STATS_DATA: (CL, GET, ()),
    # ACL 2.0 admin calls: Update or Get on the cluster.
    **{code: (CL, UPDATE, ()) for code in (C.AUTH_CREATE_USER, C.AUTH_UPDATE_USER)},
    **{code: (CL, UPDATE, ()) for code in (C.AUTH_DELETE_USER, C.AUTH_CREATE_ACL)},
    **{code: (CL, UPDATE, ()) for code in (C.AUTH_UPDATE_ACL, C.AUTH_DELETE_ACL)},
    **{code: (CL, GET, ()) for code in (C.AUTH_GET_USER, C.AUTH_LIST_USER)},
    **{code: (CL, GET, ()) for code in (C.AUTH_GET_ACL, C.AUTH_LIST_ACL)},
    # Broker container, HA, controller and name server calls.
    **{
        code: (CL, UPDATE, ())
        for code in (
            C.ADD_BROKER,
            C.EXCHANGE_BROKER_HA_INFO,
            C.NOTIFY_BROKER_ROLE_CHANGED,
            C.NOTIFY_MIN_BROKER_ID_CHANGE,
            C.RESET_MASTER_FLUSH_OFFSET,
            C.CONTROLLER_ALTER_SYNC_STATE_SET,
            C.ADD_WRITE_PERM_OF_BROKER,
            C.DELETE_KV_CONFIG,
            C.PUT_KV_CONFIG,
            C.REGISTER_TOPIC_IN_NAMESRV,
            C.WIPE_WRITE_PERM_OF_BROKER,
        )
    },
    **{
        code: (CL, GET, ())
        for code in (C.CONTROLLER_GET_REPLICA_INFO, C.GET_KV_CONFIG, C.GET_KVLIST_BY_NAMESPACE)
    },
    C.REMOVE_BROKER: (CL, UPDATE, (("brokerClusterName", CL, ""),)),
    **{
        code: (CL, UPDATE, (("clusterName", CL, ""),))
        for code in (
            C.CONTROLLER_ELECT_MASTER,
            C.CLEAN_BROKER_DATA,
            C.CONTROLLER_APPLY_BROKER_ID,
            C.CONTROLLER_REGISTER_BROKER,
            C.BROKER_HEARTBEAT,
            C.DELETE_TOPIC_IN_NAMESRV,
            C.REGISTER_BROKER,
            C.UNREGISTER_BROKER,
        )
    },
    **{
        code: (CL, GET, (("clusterName", CL, ""),))
        for code in (C.CONTROLLER_GET_NEXT_BROKER_ID, C.QUERY_DATA_VERSION)
    },
}
"""code -> (annotation resource type, actions, resource fields in declaration order)."""


def _is_retry(name: str | None) -> bool:
    return bool(name and name.strip()) and (name or "").startswith(RETRY_GROUP_TOPIC_PREFIX)


def _by_annotation(code: int, fields: Mapping[str, str], cluster_name: str | None) -> Requested:
    kind, actions, resource_fields = _ANNOTATED[code]
    result: Requested = []
    for name, field_kind, splitter in resource_fields:
        value = fields.get(name)
        if value is None:
            continue
        values = [v for v in value.split(splitter) if v] if splitter else [value]
        for one in values:
            if field_kind is ResourceType.TOPIC and _is_retry(one):
                result.append((Resource.group(one), actions))
            else:
                result.append((Resource(field_kind, one), actions))
    if not result and kind is ResourceType.CLUSTER:
        result.append((Resource.cluster(cluster_name), actions))
    return result


def _json(body: bytes | None) -> dict[str, object]:
    try:
        data = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError):
        raise RequestParseError(PARSE_ERROR_REMARK) from None
    if not isinstance(data, dict):
        raise RequestParseError(PARSE_ERROR_REMARK)
    return data


def _dicts(value: object) -> list[dict[str, object]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RequestParseError(PARSE_ERROR_REMARK)
    return value


def _str(value: object) -> str | None:
    return None if value is None else str(value)


def _heartbeat(f: Mapping[str, str], body: bytes | None) -> Requested:
    # Producers ask nothing; each consumer asks Sub on its group and its non-retry topics.
    result: Requested = []
    for consumer in _dicts(_json(body).get("consumerDataSet")):
        result.append((Resource.group(_str(consumer.get("groupName"))), SUB))
        for subscription in _dicts(consumer.get("subscriptionDataSet")):
            topic = _str(subscription.get("topic"))
            if not _is_retry(topic):
                result.append((Resource.topic(topic), SUB))
    return result


def _lock(f: Mapping[str, str], body: bytes | None) -> Requested:
    data = _json(body)
    result: Requested = [(Resource.group(_str(data.get("consumerGroup"))), SUB)]
    for queue in _dicts(data.get("mqSet")):
        topic = _str(queue.get("topic"))
        if not _is_retry(topic):
            result.append((Resource.topic(topic), SUB))
    return result


def _send(
    topic_field: str, group_field: str
) -> Callable[[Mapping[str, str], bytes | None], Requested]:
    def requested(f: Mapping[str, str], body: bytes | None) -> Requested:
        topic = f.get(topic_field)
        if _is_retry(topic):
            # A resend to a retry topic is the consumer group's act.
            group = f.get(group_field)
            return [(Resource.group(group if group and group.strip() else topic), SUB)]
        return [(Resource.topic(topic), PUB)]

    return requested


def _topic_unless_retry_and_group(
    group_field: str, actions: tuple[Action, ...]
) -> Callable[[Mapping[str, str], bytes | None], Requested]:
    def requested(f: Mapping[str, str], body: bytes | None) -> Requested:
        result: Requested = []
        if not _is_retry(f.get("topic")):
            result.append((Resource.topic(f.get("topic")), actions))
        result.append((Resource.group(f.get(group_field)), actions))
        return result

    return requested


def _route(f: Mapping[str, str], body: bytes | None) -> Requested:
    topic = f.get("topic")
    if _is_retry(topic):
        return [(Resource.group(topic), SUB_GET)]
    return [(Resource.topic(topic), (Action.PUB, Action.SUB, Action.GET))]


_Special = Callable[[Mapping[str, str], bytes | None], Requested]
_SPECIAL: Final[dict[int, _Special]] = {
    C.GET_ROUTEINFO_BY_TOPIC: _route,
    # V1 headers have no `group` field, so a V1 retry send names the group by its topic.
    C.SEND_MESSAGE: _send("topic", "group"),
    C.SEND_MESSAGE_V2: _send("b", "a"),
    C.SEND_BATCH_MESSAGE: _send("b", "a"),
    C.RECALL_MESSAGE: lambda f, b: [(Resource.topic(f.get("topic")), PUB)],
    C.END_TRANSACTION: lambda f, b: (
        [(Resource.topic(f.get("topic")), PUB)] if (f.get("topic") or "").strip() else []
    ),
    C.CONSUMER_SEND_MSG_BACK: lambda f, b: [(Resource.group(f.get("group")), SUB)],
    C.PULL_MESSAGE: _topic_unless_retry_and_group("consumerGroup", SUB),
    C.QUERY_MESSAGE: lambda f, b: [(Resource.topic(f.get("topic")), SUB_GET)],
    C.HEART_BEAT: _heartbeat,
    C.UNREGISTER_CLIENT: lambda f, b: (
        [(Resource.group(f.get("consumerGroup")), SUB)]
        if (f.get("consumerGroup") or "").strip()
        else []
    ),
    C.GET_CONSUMER_LIST_BY_GROUP: lambda f, b: [(Resource.group(f.get("consumerGroup")), SUB_GET)],
    C.QUERY_CONSUMER_OFFSET: _topic_unless_retry_and_group("consumerGroup", SUB_GET),
    C.UPDATE_CONSUMER_OFFSET: _topic_unless_retry_and_group(
        "consumerGroup", (Action.SUB, Action.UPDATE)
    ),
    C.LOCK_BATCH_MQ: _lock,
    C.UNLOCK_BATCH_MQ: _lock,
}


def requested(
    code: int, ext_fields: Mapping[str, str], body: bytes | None, *, cluster_name: str | None = None
) -> Requested:
    """The resources a request asks and the actions on each, in RocketMQ's order.

    Args:
        code: The request code.
        ext_fields: The request's ext fields.
        body: The body (HEART_BEAT, LOCK_BATCH_MQ and UNLOCK_BATCH_MQ read it), or None.
        cluster_name: `AuthConfig.clusterName`, named by Cluster-typed codes.

    Returns:
        (resource, actions) pairs, duplicates kept; empty when nothing is to be authorized.

    Raises:
        RequestParseError: The body cannot be read; refuse with NO_PERMISSION.
    """
    if not ext_fields:
        return []
    if code == C.UPDATE_AND_CREATE_TOPIC and ext_fields.get("topicFilterType") not in _FILTER_TYPES:
        # RocketMQ decodes the header to find the topic, and its `checkFields` refuses a
        # missing or unknown filter type (Apache RocketMQ 5.5.0 answers so, test_acl2_matrix).
        raise RequestParseError("topicFilterType")
    special = _SPECIAL.get(code)
    if special is not None:
        return special(ext_fields, body)
    if code in _ANNOTATED:
        return _by_annotation(code, ext_fields, cluster_name)
    return []


_FILTER_TYPES: Final = frozenset({"SINGLE_TAG", "MULTI_TAG"})


def annotated_codes() -> frozenset[int]:
    """Every code with a rule here (hand-decoded or annotated)."""
    return frozenset(_SPECIAL) | frozenset(_ANNOTATED)
