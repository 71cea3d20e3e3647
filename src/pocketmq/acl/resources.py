"""What a request touches, for ACL 1.0: (resource, needed permission) pairs and admin-only codes.

Follows RocketMQ 4.9.8's `PlainAccessValidator.parse`:

    code                              resources (needed perm)
    10 SEND_MESSAGE                   ext `topic` (PUB); a `%RETRY%` topic: %RETRY%+group (SUB)
    310 SEND_MESSAGE_V2               ext `b` (PUB); a `%RETRY%` topic: %RETRY%+ext `a` (SUB)
    36 CONSUMER_SEND_MSG_BACK         %RETRY%+`group` (SUB)
    11 PULL_MESSAGE                   `topic` (SUB), %RETRY%+`consumerGroup` (SUB)
    12 QUERY_MESSAGE                  `topic` (SUB)
    34 HEART_BEAT                     per consumer group: %RETRY%+group and each topic (SUB)
    35 UNREGISTER_CLIENT              %RETRY%+`consumerGroup` (SUB)
    38 GET_CONSUMER_LIST_BY_GROUP     %RETRY%+`consumerGroup` (SUB)
    15 UPDATE_CONSUMER_OFFSET         %RETRY%+`consumerGroup` (SUB), `topic` (SUB)
    anything else                     nothing: only the whitelist and the signature apply

Deliberate differences, each closing a hole rather than refusing what 4.9.8 allows to honest
clients:
- 320 SEND_BATCH_MESSAGE is checked like 310 (4.9.8 forgets it, so a batch send escaped
  topic permissions).
- A V1 send to a `%RETRY%` topic names its group by `producerGroup` (the V1 field; 4.9.8 reads
  `group`, which V1 headers never carry, so such sends went unchecked).
- The admin-only codes add the ACL-changing calls 50, 51 and 53 to 4.9.8's five (4.9.8 lets
  any signed account rewrite the ACL file). `ADMIN_ONLY_CODES_4_9_8` is the original set.

RECALL_MESSAGE (370) is a 5.x code and does not exist in 4.9.8; it is not checked here.
A later duplicate of a resource replaces the earlier one, like the Java HashMap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final, NamedTuple

from pocketmq.acl.accounts import PUB, SUB
from pocketmq.common.codes import RequestCode
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX

ADMIN_ONLY_CODES_4_9_8: Final = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.UPDATE_BROKER_CONFIG,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
    }
)
"""`Permission.ADMIN_CODE` of RocketMQ 4.9.8."""

ADMIN_ONLY_CODES: Final = ADMIN_ONLY_CODES_4_9_8 | {
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
    RequestCode.DELETE_ACL_CONFIG,
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
}
"""What pocketmq treats as admin-only: 4.9.8's set plus the calls that rewrite the ACL."""


class ResourcePerm(NamedTuple):
    """One resource a request touches (a topic, or `%RETRY%<group>`) and the perm it needs."""

    resource: str
    perm: int


class AclRequestError(ValueError):
    """The request cannot be classified (a heartbeat body that is not JSON).

    RocketMQ 4.9 refuses such requests before any whitelist check, as an ACL failure. A header
    field left out is not one: the resource it would name is not checked (Apache RocketMQ
    4.9.7 answers so), and the handler then says what is missing.
    """


def _retry(group: str | None) -> str | None:
    return None if group is None else RETRY_GROUP_TOPIC_PREFIX + group


def _send(topic: str | None, group: str | None) -> list[tuple[str | None, int]]:
    if topic is not None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        # Re-sending to a retry topic is a consumer's act: it needs SUB on its group.
        return [(_retry(group), SUB)]
    return [(topic, PUB)]


def _heartbeat(body: bytes | None) -> list[tuple[str | None, int]]:
    # Plain JSON rather than broker.clients.parse_heartbeat: that one also compiles SQL92
    # filters, whose failure is not an ACL matter, and acl/ must not depend on broker/.
    try:
        data = json.loads(body or b"")
    except (ValueError, UnicodeDecodeError):
        raise AclRequestError("the heartbeat body is not JSON") from None
    if not isinstance(data, dict):
        raise AclRequestError("the heartbeat body is not a JSON object")
    pairs: list[tuple[str | None, int]] = []
    for consumer in data.get("consumerDataSet") or []:
        if not isinstance(consumer, dict):
            raise AclRequestError("a heartbeat consumerDataSet entry is not an object")
        group = consumer.get("groupName")
        pairs.append((_retry(None if group is None else str(group)), SUB))
        for subscription in consumer.get("subscriptionDataSet") or []:
            if not isinstance(subscription, dict):
                raise AclRequestError("a heartbeat subscriptionDataSet entry is not an object")
            topic = subscription.get("topic")
            pairs.append((None if topic is None else str(topic), SUB))
    return pairs


def needed_perms(
    code: int, ext_fields: Mapping[str, str], body: bytes | None
) -> tuple[ResourcePerm, ...]:
    """The resources a request touches and the permission each needs.

    Args:
        code: The request code.
        ext_fields: The request's ext fields.
        body: The request body (HEART_BEAT's is read), or None.

    Returns:
        The pairs, each resource once, in first-seen order; empty for unchecked codes.

    Raises:
        AclRequestError: The heartbeat is not JSON; the caller refuses the request.
    """
    get = ext_fields.get
    pairs: list[tuple[str | None, int]]
    if code == RequestCode.SEND_MESSAGE:
        pairs = _send(get("topic"), get("producerGroup"))
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        pairs = _send(get("b"), get("a"))
    elif code == RequestCode.CONSUMER_SEND_MSG_BACK:
        pairs = [(_retry(get("group")), SUB)]
    elif code == RequestCode.PULL_MESSAGE:
        pairs = [(get("topic"), SUB), (_retry(get("consumerGroup")), SUB)]
    elif code == RequestCode.QUERY_MESSAGE:
        pairs = [(get("topic"), SUB)]
    elif code == RequestCode.HEART_BEAT:
        pairs = _heartbeat(body)
    elif code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        pairs = [(_retry(get("consumerGroup")), SUB)]
    elif code == RequestCode.UPDATE_CONSUMER_OFFSET:
        pairs = [(_retry(get("consumerGroup")), SUB), (get("topic"), SUB)]
    else:
        pairs = []
    # Java's addResourceAndPerm ignores a null resource.
    merged = {resource: perm for resource, perm in pairs if resource is not None}
    return tuple(ResourcePerm(r, p) for r, p in merged.items())
