"""ACL 1.0 on the proxy's gRPC port (RocketMQ 5.2's `enableACL`): who sent a call, may they.

Every call of a 5.x client carries `authorization: MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex>` where the hex is HMAC-SHA1(secret key, the
`x-mq-date-time` header); it is compared without regard to case (the clients differ). The date
is the client's local time, so no clock-skew window is enforced: a captured header can be
replayed, which TLS prevents and the RocketMQ proxy allows too.

The request message names the resources, as RocketMQ's `PlainAccessValidator` reads them:
a send or an end of transaction needs PUB on its topic, every consumer call SUB on its topic
and on its group (`%RETRY%<group>`); QueryRoute and Telemetry need only a valid signature. The
rules and their order are the broker's (`pocketmq.acl.validator`). A refusal aborts the call
with PERMISSION_DENIED and the remark; the audit log gets one line.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

import grpc

from pocketmq.acl.accounts import PUB, SUB
from pocketmq.acl.resources import ResourcePerm
from pocketmq.acl.validator import AclValidator, Refusal
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX

audit = logging.getLogger("pocketmq.audit")

_HEADER: Final = re.compile(
    r"MQv2-HMAC-SHA1\s+Credential=(?P<ak>[^,/]*)[^,]*,\s*SignedHeaders=[^,]*,\s*"
    r"Signature=(?P<signature>[0-9A-Fa-f]*)"
)
_PUBLISHING: Final = frozenset(
    {"SendMessageRequest", "EndTransactionRequest", "RecallMessageRequest"}
)


def signed_by(authorization: str, date_time: str) -> tuple[str, Callable[[str], bool]]:
    """The access key of an `authorization` header and the check of its signature."""
    found = _HEADER.match(authorization.strip())
    if found is None:
        return "", lambda secret: False
    signature = found.group("signature").lower()

    def verified(secret_key: str) -> bool:
        expected = hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()
        return hmac.compare_digest(expected, signature)

    return found.group("ak"), verified


def needs(request: Any) -> tuple[ResourcePerm, ...]:
    """The (resource, perm) pairs a 5.x request message asks for."""
    kind = type(request).__name__
    if kind == "SendMessageRequest":
        return tuple(ResourcePerm(t, PUB) for t in sorted({m.topic.name for m in request.messages}))
    if kind in _PUBLISHING:
        return (ResourcePerm(request.topic.name, PUB),)
    if kind in ("QueryRouteRequest", "TelemetryCommand"):
        return ()
    found: list[ResourcePerm] = []
    topic = _field(request, "topic") or _field(_field(request, "message_queue"), "topic")
    if topic is not None and topic.name:
        found.append(ResourcePerm(topic.name, SUB))
    group = _field(request, "group")
    if group is not None and group.name:
        found.append(ResourcePerm(RETRY_GROUP_TOPIC_PREFIX + group.name, SUB))
    return tuple(found)


def _field(message: Any, name: str) -> Any:
    if message is None or name not in type(message).DESCRIPTOR.fields_by_name:
        return None
    return getattr(message, name) if message.HasField(name) else None


Check = Callable[[Any, str, str, Callable[[str], bool]], Refusal | None]
"""(request message or None for a stream's opening, access key, peer IP, signature check) to
a refusal or None."""


def acl1_check(validator: AclValidator) -> Check:
    """ACL 1.0: the accounts file's rules, on the resources `needs` finds."""

    def check(
        request: Any, access_key: str, ip: str, verified: Callable[[str], bool]
    ) -> Refusal | None:
        return validator.check_needs(0, needs(request), access_key, ip, verified)

    return check


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Checks every call (`check`: ACL 1.0's or 2.0's) before the service sees it."""

    def __init__(self, check: Check) -> None:
        self.check = check

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if handler is None:
            return handler
        metadata = dict(details.invocation_metadata or ())
        method: str = details.method
        access_key, verified = signed_by(
            str(metadata.get("authorization", "")), str(metadata.get("x-mq-date-time", ""))
        )

        def refusal(request: Any, context: Any) -> Refusal | None:
            found = self.check(request, access_key, _peer_ip(context.peer()), verified)
            if found is not None:
                audit.warning(
                    "refused %s from %s accessKey=%s rule=%s: %s",
                    method.rpartition("/")[2],
                    context.peer(),
                    access_key or "-",
                    found.rule,
                    found.remark,
                )
            return found

        return _guarded(handler, refusal)


def _guarded(handler: Any, refusal: Callable[[Any, Any], Refusal | None]) -> Any:
    """`handler` with `refusal` run on each request first."""
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: Any) -> Any:
            found = refusal(request, context)
            if found is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, found.remark)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, handler.request_deserializer, handler.response_serializer
        )
    if handler.unary_stream is not None:
        inner_stream = handler.unary_stream

        async def streamed(request: Any, context: Any) -> AsyncIterator[Any]:
            found = refusal(request, context)
            if found is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, found.remark)
            async for response in inner_stream(request, context):
                yield response

        return grpc.unary_stream_rpc_method_handler(
            streamed, handler.request_deserializer, handler.response_serializer
        )
    if handler.stream_stream is not None:
        inner_both = handler.stream_stream

        async def both(requests: Any, context: Any) -> AsyncIterator[Any]:
            # Telemetry: the stream names no resource; its opening call is signed.
            found = refusal(None, context)
            if found is not None:
                await context.abort(grpc.StatusCode.PERMISSION_DENIED, found.remark)
            async for response in inner_both(requests, context):
                yield response

        return grpc.stream_stream_rpc_method_handler(
            both, handler.request_deserializer, handler.response_serializer
        )
    return handler


def _peer_ip(peer: str) -> str:
    """`ipv4:127.0.0.1:5000` or `ipv6:[::1]:5000` -> the address."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return rest.rpartition(":")[0] if kind == "ipv4" else rest
