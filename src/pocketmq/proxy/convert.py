"""Messages between the 5.x gRPC form (`apache.rocketmq.v2.Message`) and the broker's (remoting
properties, stored records), with the proxy's checks of what a client sends (RocketMQ's
`SendMessageActivity` order and codes).

System properties travel as RocketMQ's reserved property keys; a received message shows the
client every other property as a user property, as RocketMQ's proxy does (its reserved set is
`MessageConst.STRING_HASH_SET`; pocketmq also hides its own POP_REVIVE_OF).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from pocketmq.common.constants import (
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.java_hash import java_string_hash
from pocketmq.common.stored_message import StoredMessage
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.status import ProxyError

SYSFLAG_COMPRESSED: Final = 0x1
SYSFLAG_TRANSACTION_PREPARED: Final = 0x4
PROPERTY_TRACE_CONTEXT: Final = "TRACE_CONTEXT"
PROPERTY_BORN_HOST: Final = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_CHECK_IMMUNITY: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_DLQ_ORIGIN_TOPIC: Final = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID: Final = "DLQ_ORIGIN_MESSAGE_ID"

# RocketMQ's reserved property keys (`MessageConst.STRING_HASH_SET`): not user properties.
RESERVED_KEYS: Final = frozenset(
    (
        "TRACE_ON",
        "MSG_REGION",
        "KEYS",
        "TAGS",
        "WAIT",
        "DELAY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "ORIGIN_MESSAGE_ID",
        "TRANSFER_FLAG",
        "CORRECTION_FLAG",
        "MQ2_FLAG",
        "RECONSUME_TIME",
        "UNIQ_KEY",
        "MAX_RECONSUME_TIMES",
        "CONSUME_START_TIME",
        "POP_CK",
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "DUP_INFO",
        "EXTEND_UNIQ_INFO",
        "INSTANCE_ID",
        "CORRELATION_ID",
        "REPLY_TO_CLIENT",
        "TTL",
        "ARRIVE_TIME",
        "PUSH_REPLY_TIME",
        "CLUSTER",
        "MSG_TYPE",
        "INNER_MULTI_QUEUE_OFFSET",
        "TIMER_DELAY_MS",
        "TIMER_DELAY_SEC",
        "TIMER_DELIVER_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_OUT_MS",
        "TIMER_DEL_UNIQKEY",
        "TIMER_DELAY_LEVEL",
        "__BORNHOST",
        "BORN_TIMESTAMP",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
        "__CRC32#",
    )
)
HIDDEN_KEYS: Final = RESERVED_KEYS | {"POP_REVIVE_OF"}


@dataclass(frozen=True, slots=True)
class SendLimits:
    max_body_size: int = 4 * 1024 * 1024
    """`maxMessageSize`."""
    max_user_property_size: int = 16 * 1024
    """`maxUserPropertySize`."""
    user_property_max_num: int = 128
    """`userPropertyMaxNum`."""
    max_message_group_size: int = 64
    """`maxMessageGroupSize`."""
    max_delay_ms: int = 24 * 3600 * 1000
    """`maxDelayTimeMills`."""
    max_transaction_recovery_s: int = 3600
    """`maxTransactionRecoverySecond`."""


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """One gRPC message as the broker stores it."""

    topic: str
    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    message_type: Any
    message_group: str | None


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def outgoing(message: v2.Message, now_ms: int, limits: SendLimits) -> OutgoingMessage:
    """Checks one message of a SendMessage and builds its broker form.

    Raises:
        ProxyError: the first check that fails, with RocketMQ's code.
    """
    system = message.system_properties
    body = message.body
    if not body:
        raise ProxyError(v2.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if limits.max_body_size > 0 and len(body) > limits.max_body_size:
        raise ProxyError(
            v2.MESSAGE_BODY_TOO_LARGE,
            f"message body cannot exceed the max {limits.max_body_size}",
        )
    user = dict(message.user_properties)
    if len(user) > limits.user_property_max_num:
        raise ProxyError(
            v2.MESSAGE_PROPERTIES_TOO_LARGE,
            f"message user property number cannot exceed {limits.user_property_max_num}",
        )
    size = 0
    for key, value in user.items():
        if key in RESERVED_KEYS:
            raise ProxyError(
                v2.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property key {key} is used by the system"
            )
        if _has_control(key) or _has_control(value):
            raise ProxyError(
                v2.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property {key} contains a control character"
            )
        size += len(key.encode()) + len(value.encode())
    properties = dict(user)
    if system.HasField("tag"):
        tag = system.tag
        if not tag.strip() or "|" in tag or _has_control(tag):
            raise ProxyError(v2.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is illegal")
        properties[PROPERTY_TAGS] = tag
        size += len(tag.encode())
    keys = [key for key in system.keys if key]
    for key in keys:
        if not key.strip() or _has_control(key):
            raise ProxyError(v2.ILLEGAL_MESSAGE_KEY, f"key {key!r} is illegal")
        size += len(key.encode())
    if keys:
        properties[PROPERTY_KEYS] = " ".join(keys)
    if size > limits.max_user_property_size:
        raise ProxyError(
            v2.MESSAGE_PROPERTIES_TOO_LARGE,
            f"the total size of user properties, tag and keys cannot exceed "
            f"{limits.max_user_property_size} bytes",
        )
    if not system.message_id.strip():
        raise ProxyError(v2.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = system.message_id
    sys_flag = SYSFLAG_COMPRESSED if system.body_encoding == v2.GZIP else 0
    message_type = system.message_type
    if message_type == v2.TRANSACTION:
        properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        sys_flag |= SYSFLAG_TRANSACTION_PREPARED
        if system.HasField("orphaned_transaction_recovery_duration"):
            seconds = system.orphaned_transaction_recovery_duration.seconds
            if seconds > limits.max_transaction_recovery_s:
                raise ProxyError(
                    v2.BAD_REQUEST,
                    f"the max orphaned transaction recovery duration is "
                    f"{limits.max_transaction_recovery_s} s",
                )
            properties[PROPERTY_CHECK_IMMUNITY] = str(seconds)
    if system.HasField("delivery_timestamp"):
        deliver_ms = system.delivery_timestamp.ToMilliseconds()
        if deliver_ms - now_ms > limits.max_delay_ms:
            raise ProxyError(
                v2.ILLEGAL_DELIVERY_TIME,
                f"the delivery time may be at most {limits.max_delay_ms} ms ahead",
            )
        properties[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
    properties[PROPERTY_RECONSUME_TIME] = str(system.delivery_attempt)
    properties[PROPERTY_PRODUCER_GROUP] = message.topic.name
    group = system.message_group if system.HasField("message_group") else ""
    if group:
        if (
            not group.strip()
            or len(group.encode()) >= limits.max_message_group_size
            or _has_control(group)
        ):
            raise ProxyError(v2.ILLEGAL_MESSAGE_GROUP, f"message group {group!r} is illegal")
        properties[PROPERTY_SHARDING_KEY] = group
    if system.HasField("trace_context"):
        properties[PROPERTY_TRACE_CONTEXT] = system.trace_context
    if system.born_host:
        properties[PROPERTY_BORN_HOST] = system.born_host
    born_ms = system.born_timestamp.ToMilliseconds() if system.HasField("born_timestamp") else 0
    if born_ms > 0:
        properties[PROPERTY_BORN_TIMESTAMP] = str(born_ms)
    return OutgoingMessage(
        topic=message.topic.name,
        body=body,
        properties=properties,
        sys_flag=sys_flag,
        born_timestamp=born_ms or now_ms,
        message_type=message_type,
        message_group=group or None,
    )


def message_type_of(properties: dict[str, str]) -> Any:
    """The v2 message type a stored message's properties say (RocketMQ's
    `TopicMessageType.parseFromMessageProperty`)."""
    if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return v2.TRANSACTION
    if any(
        key in properties
        for key in (
            "DELAY",
            PROPERTY_TIMER_DELIVER_MS,
            PROPERTY_TIMER_DELAY_SEC,
            PROPERTY_TIMER_DELAY_MS,
        )
    ):
        return v2.DELAY
    if PROPERTY_SHARDING_KEY in properties:
        return v2.FIFO
    return v2.NORMAL


def _timestamp(ms: int) -> Timestamp:
    stamp = Timestamp()
    stamp.FromMilliseconds(ms)
    return stamp


def incoming(
    stored: StoredMessage, topic: str, receipt_handle: str | None, now_ms: int
) -> v2.Message:
    """A stored message as a 5.x client receives it."""
    properties = stored.properties
    system = v2.SystemProperties(
        message_id=properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        body_digest=v2.Digest(
            type=v2.MD5,
            checksum=hashlib.md5(stored.body, usedforsecurity=False).hexdigest().upper(),
        ),
        body_encoding=v2.GZIP if stored.sys_flag & SYSFLAG_COMPRESSED else v2.IDENTITY,
        message_type=message_type_of(properties),
        born_timestamp=_timestamp(stored.born_timestamp),
        born_host=properties.get(PROPERTY_BORN_HOST)
        or f"{stored.born_host[0]}:{stored.born_host[1]}",
        store_timestamp=_timestamp(stored.store_timestamp),
        store_host=_host(stored.store_host),
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        delivery_attempt=stored.reconsume_times + 1,
    )
    if PROPERTY_TAGS in properties:
        system.tag = properties[PROPERTY_TAGS]
    if properties.get(PROPERTY_KEYS):
        system.keys.extend(properties[PROPERTY_KEYS].split(" "))
    if receipt_handle is not None:
        system.receipt_handle = receipt_handle
    if PROPERTY_TIMER_DELAY_SEC in properties:
        system.delivery_timestamp.CopyFrom(
            _timestamp(now_ms + int(properties[PROPERTY_TIMER_DELAY_SEC]) * 1000)
        )
    elif PROPERTY_TIMER_DELIVER_MS in properties:
        system.delivery_timestamp.CopyFrom(_timestamp(int(properties[PROPERTY_TIMER_DELIVER_MS])))
    if PROPERTY_SHARDING_KEY in properties:
        system.message_group = properties[PROPERTY_SHARDING_KEY]
    if PROPERTY_TRACE_CONTEXT in properties:
        system.trace_context = properties[PROPERTY_TRACE_CONTEXT]
    origin_topic = properties.get(PROPERTY_DLQ_ORIGIN_TOPIC)
    origin_id = properties.get(PROPERTY_DLQ_ORIGIN_MESSAGE_ID)
    if origin_topic and origin_id:
        system.dead_letter_queue.CopyFrom(
            v2.DeadLetterQueue(topic=origin_topic, message_id=origin_id)
        )
    return v2.Message(
        topic=v2.Resource(name=topic),
        user_properties={k: v for k, v in properties.items() if k not in HIDDEN_KEYS},
        system_properties=system,
        body=stored.body,
    )


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def duration_ms(duration: Duration) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def duration_of(ms: int) -> Duration:
    value = Duration()
    value.FromMilliseconds(ms)
    return value


def fifo_queue(message_group: str, queue_count: int) -> int:
    """The queue of a message group: Guava's `consistentHash` of the group's Java hash code, as
    RocketMQ's proxy chooses it."""
    state = java_string_hash(message_group) & 0xFFFFFFFFFFFFFFFF
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        next_double = ((state >> 33) + 1) / float(1 << 31)
        following = int((candidate + 1) / next_double)
        if 0 <= following < queue_count:
            candidate = following
        else:
            return candidate
