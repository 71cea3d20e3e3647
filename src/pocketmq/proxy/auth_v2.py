"""ACL 2.0 on the proxy's gRPC port: the 5.x clients' signature checked against the users'
passwords, and each request message's resources against the user's ACL, as RocketMQ 5.3's
proxy reads them (`DefaultAuthorizationContextBuilder` for gRPC): a send, a recall or an end of
transaction asks Pub on its topic; a receive, an ack, a dead-lettering and an assignment ask Sub
on the group and on the topic (a retry topic is its group's); a change of invisible time and a
consumer's heartbeat or termination ask Sub on the group; a route lookup asks Pub or Sub on the
topic. The users and ACLs are the broker's (local mode shares them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pocketmq.acl.auth_hook import AuthHook
from pocketmq.acl.authorization import authorize_all
from pocketmq.acl.policies import Action, Resource
from pocketmq.acl.users import SUBJECT_PREFIX
from pocketmq.acl.validator import Refusal
from pocketmq.common.codes import ResponseCode
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX
from pocketmq.proxy.auth import Check

Requested = list[tuple[Resource, tuple[Action, ...]]]
PUB = (Action.PUB,)
SUB = (Action.SUB,)
CONSUMER_CLIENT_TYPES = frozenset({2, 3, 4, 5, 6})  # push, simple, pull and their lite kinds


def _topic(name: str, actions: tuple[Action, ...]) -> Requested:
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return [(Resource.group(name), actions)]
    return [(Resource.topic(name), actions)]


def _consuming(group: str, topic: str) -> Requested:
    return [(Resource.group(group), SUB), *_topic(topic, SUB)]


def requested(request: Any) -> Requested:
    """The resources and actions a 5.x request message asks."""
    kind = type(request).__name__
    if kind == "SendMessageRequest":
        return _topic(request.messages[0].topic.name, PUB) if request.messages else []
    if kind in ("RecallMessageRequest", "EndTransactionRequest"):
        return _topic(request.topic.name, PUB)
    if kind == "QueryRouteRequest":
        return [(Resource.topic(request.topic.name), (Action.PUB, Action.SUB))]
    if kind == "ReceiveMessageRequest":
        return _consuming(request.group.name, request.message_queue.topic.name)
    if kind in ("AckMessageRequest", "ForwardMessageToDeadLetterQueueRequest"):
        return _consuming(request.group.name, request.topic.name)
    if kind == "QueryAssignmentRequest":
        return _consuming(request.group.name, request.topic.name)
    if kind == "ChangeInvisibleDurationRequest":
        return [(Resource.group(request.group.name), SUB)]
    if kind == "HeartbeatRequest":
        consumer = request.client_type in CONSUMER_CLIENT_TYPES and request.group.name
        return [(Resource.group(request.group.name), SUB)] if consumer else []
    if kind == "NotifyClientTerminationRequest":
        named = request.HasField("group") and request.group.name
        return [(Resource.group(request.group.name), SUB)] if named else []
    return []


def _refuse(rule: str, remark: str) -> Refusal:
    return Refusal(int(ResponseCode.NO_PERMISSION), remark, rule)


def acl2_check(hook: AuthHook) -> Check:
    """ACL 2.0 with `hook`'s users and ACLs and its settings."""

    def check(
        request: Any, access_key: str, ip: str, verified: Callable[[str], bool]
    ) -> Refusal | None:
        user = hook.user_of(access_key)
        if hook.settings.authentication:
            if not access_key:
                return _refuse("access-key", "username cannot be null.")
            if user is None:
                return _refuse("user", f"User:{access_key} is not found.")
            if user.is_disabled:
                return _refuse("user", f"User:{access_key} is disabled.")
            if not verified(user.password or ""):
                return _refuse("signature", "check signature failed.")
        if hook.settings.authorization and request is not None:
            acl = hook.store.acls.get(SUBJECT_PREFIX + access_key) if access_key else None
            return authorize_all(access_key or None, user, acl, requested(request), ip)
        return None

    return check
