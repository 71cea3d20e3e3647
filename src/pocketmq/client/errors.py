"""The client's exceptions: one base, one class per family of failures.

A broker or NameServer answer that is not a success becomes the exception of its code's family
(`error_for_response`); every class says whether trying again (on another broker, later) can
help (`retriable`), which is what the producer's retry loop and the consumer's pull loop look
at. Transport failures (no connection, no answer in time) are `ConnectionFailedError` and
`RequestTimeoutError`, both retriable. Their message is one line that names the address and
what to check; the low-level `OSError` stays chained as the cause, for those who want it.
"""

from __future__ import annotations

import socket
from typing import ClassVar, Final

from pocketmq.common.codes import ResponseCode


class RocketMQError(Exception):
    """Base of every error the client raises.

    Attributes:
        code: The RocketMQ response code behind it, if the server sent one.
        retriable: Whether the same request may succeed elsewhere or later.
    """

    retriable: ClassVar[bool] = False

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class ClientConfigError(RocketMQError):
    """The client was set up or called wrongly (no NameServer, bad group name, not started)."""


class MessageError(RocketMQError):
    """The message itself is refused (too large, bad topic, bad properties): fix it."""


class TopicNotFoundError(RocketMQError):
    """The topic has no route: create it (`pocketmq admin updateTopic -t ...`)."""


class PermissionDeniedError(RocketMQError):
    """The broker or topic forbids the operation (not writable, not readable, ACL)."""


class BrokerBusyError(RocketMQError):
    """The broker sheds load or cannot serve right now; another broker, or later, may."""

    retriable = True


class StoreError(RocketMQError):
    """The broker could not store the message (disk full, store not writable)."""

    retriable = True


class ConnectionFailedError(RocketMQError):
    """No connection to a broker or NameServer.

    Attributes:
        reason: Why, in a few words ("connection refused"), without the address.
    """

    retriable = True

    def __init__(self, message: str, code: int | None = None, *, reason: str = "") -> None:
        super().__init__(message, code)
        self.reason = reason or message


def connection_problem(exc: BaseException) -> str:
    """A few words on why a connection failed, from the first `OSError` in `exc`'s causes.

    The words replace errno numbers and asyncio's "Connect call failed ('127.0.0.1', 1)", which
    say the same thing less plainly.
    """
    cause: BaseException | None = exc
    for _ in range(8):  # a cause chain is short; the bound guards against a cycle
        if cause is None:
            break
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, socket.gaierror):
            return "host name not found"
        if isinstance(cause, TimeoutError):
            return "no answer in time"
        if isinstance(cause, ConnectionResetError):
            return "connection reset"
        if isinstance(cause, OSError):
            return (cause.strerror or str(cause)).lower()
        cause = cause.__cause__
    return str(exc)


class RequestTimeoutError(RocketMQError):
    """A request got no answer in time; it may or may not have been applied."""

    retriable = True


class OffsetError(RocketMQError):
    """An offset request was refused (unknown group or queue)."""


class SubscriptionError(RocketMQError):
    """A subscription the broker cannot serve (bad expression, unknown type)."""


class ProtocolError(RocketMQError):
    """The peer answered with something the client cannot read."""

    retriable = True


_BY_CODE: Final[dict[int, type[RocketMQError]]] = {
    ResponseCode.SYSTEM_BUSY: BrokerBusyError,
    ResponseCode.SERVICE_NOT_AVAILABLE: StoreError,
    ResponseCode.SYSTEM_ERROR: BrokerBusyError,
    ResponseCode.FLOW_CONTROL: BrokerBusyError,
    ResponseCode.POLLING_FULL: BrokerBusyError,
    ResponseCode.MESSAGE_ILLEGAL: MessageError,
    ResponseCode.INVALID_PARAMETER: MessageError,
    ResponseCode.NO_PERMISSION: PermissionDeniedError,
    ResponseCode.TOPIC_NOT_EXIST: TopicNotFoundError,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: SubscriptionError,
    ResponseCode.SUBSCRIPTION_NOT_EXIST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_NOT_LATEST: SubscriptionError,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: SubscriptionError,
    ResponseCode.QUERY_NOT_FOUND: OffsetError,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: ProtocolError,
}


def error_for_response(code: int, remark: str | None, what: str) -> RocketMQError:
    """The exception for a failed answer.

    Args:
        code: The response code.
        remark: The server's explanation, if any.
        what: What was asked and of whom ("send to broker-a (127.0.0.1:10911)").
    """
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = f"code {code}"
    kind = _BY_CODE.get(code, RocketMQError)
    detail = f": {remark}" if remark else ""
    return kind(f"{what} failed with {name}{detail}", code)
