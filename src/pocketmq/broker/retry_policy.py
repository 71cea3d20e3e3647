"""Retry topics and dead-letter queues: where a failed message goes next, without I/O.

RocketMQ's rules (`consumerSendMsgBack` and `handleRetryAndDLQ` of its send processors, topic
names from `MixAll`):

- A consumer hands a failed message back (CONSUMER_SEND_MSG_BACK). Its copy goes to
  `%RETRY%<group>` with one more reconsume time and delay level `3 + reconsume times` unless
  the consumer chose one (10 s, 30 s, 1 min, ... with the default levels), or to `%DLQ%<group>`
  without a delay once the message was consumed `max reconsume times` times, or when the
  consumer asks for it (delay level < 0). The maximum is the request's `maxReconsumeTimes`
  (clients from 3.4.9 on send it), else the group's `retryMaxTimes` (16 by default).
- The copy keeps body, flags, born time and host, and every property; RETRY_TOPIC keeps the
  topic it was first sent to (consumers see that topic), ORIGIN_MESSAGE_ID the id of the first
  copy, and the reconsume count travels in the record.
- A message sent straight to `%RETRY%<group>` (clients do so when the send-back failed) with
  more reconsume times than the maximum goes to `%DLQ%<group>` instead.

Dead-letter topics have one queue and are readable and writable (RocketMQ since 4.9).
The handlers that act on these decisions are in `broker/send_back.py` and `broker/send.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final, Protocol

from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_RETRY_TOPIC,
)
from pocketmq.common.message_id import create_offset_msg_id
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import StoredMessage
from pocketmq.common.topic_names import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    retry_topic,
)
from pocketmq.store.api import MessageToStore

PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
FIRST_RETRY_LEVEL: Final = 3
"""Delay level of the first retry (10 s with RocketMQ's default levels)."""
DLQ_QUEUE_NUMS: Final = 1
"""Queues of a dead-letter topic (`DLQ_NUMS_PER_GROUP`)."""
MAX_RECONSUME_TIMES_HEADER_VERSION: Final = 121
"""`MQVersion.Version.V3_4_9.ordinal()`: from this client version on, a request's
`maxReconsumeTimes` overrides the group's `retryMaxTimes`."""
_POP_RETRY_SEPARATOR: Final = "+"


class RetrySettings(Protocol):
    """What the decisions need of a consumer group (`SubscriptionGroupConfig`)."""

    @property
    def retry_max_times(self) -> int: ...

    @property
    def retry_queue_nums(self) -> int: ...


def group_of_retry_topic(topic: str) -> str | None:
    """The group a retry topic belongs to, or None for any other topic.

    Pop retry topics of RocketMQ 5 (`%RETRY%<group>+<topic>`) name their group before the `+`
    (`KeyBuilder.parseGroup`); group names cannot hold a `+`.
    """
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return None
    rest = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
    parts = rest.split(_POP_RETRY_SEPARATOR)
    return parts[0] if len(parts) == 2 else rest


def max_reconsume_times(group_max: int, header_max: int | None, request_version: int) -> int:
    """The limit that applies: the request's, from clients 3.4.9 and later, else the group's."""
    if header_max is not None and request_version >= MAX_RECONSUME_TIMES_HEADER_VERSION:
        return header_max
    return group_max


@dataclass(frozen=True, slots=True)
class SendBackDecision:
    """Where a handed-back message goes.

    Attributes:
        topic: `%RETRY%<group>` or `%DLQ%<group>`.
        delay_level: The copy's DELAY level; 0 for a dead letter (delivered at once, never
            consumed by the group again).
        reconsume_times: The copy's reconsume count (the message's + 1).
    """

    topic: str
    delay_level: int
    reconsume_times: int

    @property
    def dead(self) -> bool:
        return self.topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def decide_send_back(
    group: str, reconsume_times: int, delay_level: int, max_reconsume_times: int
) -> SendBackDecision:
    """Retry topic with a growing delay, or the dead-letter queue once tries are used up.

    Args:
        group: The consumer group handing the message back.
        reconsume_times: How often the message was consumed again already (from its record).
        delay_level: As the consumer asked: 0 lets the broker choose, < 0 means dead letter.
        max_reconsume_times: The limit that applies (`max_reconsume_times()`).
    """
    if reconsume_times >= max_reconsume_times or delay_level < 0:
        return SendBackDecision(dlq_topic(group), 0, reconsume_times + 1)
    level = delay_level if delay_level > 0 else FIRST_RETRY_LEVEL + reconsume_times
    return SendBackDecision(retry_topic(group), level, reconsume_times + 1)


def send_back_copy(
    stored: StoredMessage, decision: SendBackDecision, queue_id: int
) -> MessageToStore:
    """The copy stored for a send-back, from the message as it is stored.

    RETRY_TOPIC is set to the stored topic unless the message already carries one (a retry of
    a retry keeps the original); ORIGIN_MESSAGE_ID is kept, or set to the stored message's
    offset message id. DELAY is the decision's level; a dead letter has none.
    """
    properties = {k: v for k, v in stored.properties.items() if v}
    properties.setdefault(PROPERTY_RETRY_TOPIC, stored.topic)
    properties.setdefault(
        PROPERTY_ORIGIN_MESSAGE_ID,
        create_offset_msg_id(stored.store_host, stored.physical_offset),
    )
    properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    if decision.delay_level > 0:
        properties[PROPERTY_DELAY_TIME_LEVEL] = str(decision.delay_level)
    return MessageToStore(
        topic=decision.topic,
        body=stored.body,
        properties=encode_properties(properties),
        queue_id=queue_id,
        flag=stored.flag,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        reconsume_times=decision.reconsume_times,
    )


def retry_send_is_dead(reconsume_times: int, max_reconsume_times: int) -> bool:
    """Whether a message sent to a retry topic goes to the dead-letter queue instead.

    `>`, not `>=`: a client that sends to the retry topic itself has counted this try already.
    """
    return reconsume_times > max_reconsume_times


def as_dead_letter(message: MessageToStore, group: str) -> MessageToStore:
    """A message sent to `%RETRY%<group>` redirected to `%DLQ%<group>`: queue 0, no delay."""
    properties = message.properties
    if PROPERTY_DELAY_TIME_LEVEL in properties:
        decoded = decode_properties(properties)
        decoded.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        properties = encode_properties(decoded)
    return replace(message, topic=dlq_topic(group), queue_id=0, properties=properties)
