"""What every RPC of the proxy shares: the settings that shape answers, the checks of names,
the client's id, and how a batch of per-entry statuses becomes one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from pocketmq.client.errors import RocketMQError
from pocketmq.client.pop import PopError
from pocketmq.common.codes import ResponseCode
from pocketmq.common.topic_names import TopicError, is_system_topic, validate_topic_name
from pocketmq.proxy.brokers import Brokers
from pocketmq.proxy.convert import SendLimits
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.status import ProxyError, ok

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
TOPIC_TYPES: Final = {
    "NORMAL": [v2.NORMAL],
    "FIFO": [v2.FIFO],
    "DELAY": [v2.DELAY],
    "TRANSACTION": [v2.TRANSACTION],
    "MIXED": [v2.NORMAL, v2.FIFO, v2.DELAY, v2.TRANSACTION],
}


@dataclass(frozen=True, slots=True)
class ProxySettings:
    """RocketMQ's proxy keys (`ProxyConfig`) that shape answers."""

    limits: SendLimits = field(default_factory=SendLimits)
    enable_topic_message_type_check: bool = True
    producer_max_attempts: int = 3
    producer_backoff_initial_ms: int = 10
    producer_backoff_max_ms: int = 1000
    producer_backoff_multiplier: float = 2.0
    consumer_min_polling_ms: int = 5_000
    consumer_max_polling_ms: int = 20_000
    consumer_batch_size: int = 32
    default_invisible_ms: int = 60_000
    min_invisible_ms: int = 10_000
    max_invisible_ms: int = 12 * 3600 * 1000


def client_id(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "x-mq-client-id":
            return str(value)
    return ""


def check_topic(name: str) -> None:
    try:
        validate_topic_name(name)
    except TopicError as exc:
        raise ProxyError(v2.ILLEGAL_TOPIC, f"topic name {name!r} is illegal: {exc}") from None
    if is_system_topic(name):
        raise ProxyError(v2.ILLEGAL_TOPIC, f"topic {name} is a system topic")


def check_group(name: str) -> None:
    if not name or len(name) > 255 or not all(c.isalnum() or c in "%|-_" for c in name):
        raise ProxyError(v2.ILLEGAL_CONSUMER_GROUP, f"consumer group {name!r} is illegal")


async def accepted_types(brokers: Brokers, topic: str) -> list[Any]:
    """The message types a topic takes, by its `message.type` attribute (NORMAL without one)."""
    attributes = await brokers.topic_attributes(topic)
    if attributes is None:
        return [v2.MESSAGE_TYPE_UNSPECIFIED]
    kind = attributes.get(MESSAGE_TYPE_ATTRIBUTE, attributes.get("+" + MESSAGE_TYPE_ATTRIBUTE))
    return TOPIC_TYPES.get((kind or "NORMAL").upper(), [v2.MESSAGE_TYPE_UNSPECIFIED])


def pop_status(error: PopError) -> v2.Status:
    """A broker's refusal of an ack or a change: a message not in flight is an invalid handle."""
    if error.code == ResponseCode.NO_MESSAGE:
        return v2.Status(code=v2.INVALID_RECEIPT_HANDLE, message=error.remark)
    return ProxyError.from_remoting(error.code, error.remark).status()


def status_of(error: ProxyError | PopError | RocketMQError) -> v2.Status:
    """The status of a failed call to a broker: the proxy's own refusal, the broker's refusal
    of an ack or a change, or a broker that could not be reached."""
    if isinstance(error, ProxyError):
        return error.status()
    if isinstance(error, PopError):
        return pop_status(error)
    return v2.Status(code=v2.INTERNAL_SERVER_ERROR, message=str(error))


def overall(entries: list[Any]) -> v2.Status:
    """One status for per-entry ones: the common code, or MULTIPLE_RESULTS."""
    codes = {entry.status.code for entry in entries}
    if len(codes) == 1:
        only = entries[0].status
        return only if only.code != v2.OK else ok()
    return v2.Status(code=v2.MULTIPLE_RESULTS, message="multiple results")


def type_names(types: list[Any]) -> str:
    return "/".join(v2.MessageType.Name(t) for t in types)


def now_timestamp() -> Timestamp:
    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp
