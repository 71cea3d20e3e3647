"""Consumer send-back, retry topics and dead-letter queues (RocketMQ's
`SendMessageProcessor.consumerSendMsgBack` and `handleRetryAndDLQ`).

A consumer that could not process a message hands it back (CONSUMER_SEND_MSG_BACK, code 36)
with the message's CommitLog offset. The broker stores a copy in `%RETRY%<group>` with one more
reconsume time and a delay that grows with each try (level 3 + reconsume times: 10 s, 30 s,
1 min, ...), keeping the original topic in RETRY_TOPIC so consumers see it as it was sent. Once
the message was consumed `maxReconsumeTimes` times (the header's, else the group's
`retryMaxTimes`, 16 by default), or when the consumer asks for it (delay level -1), the copy
goes to `%DLQ%<group>` instead and is not delivered again. `decide_send_back` is the pure
decision; `SendBackHandler` does the I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pocketmq.broker.headers import (
    HeaderError,
    error_response,
    optional_int,
    required_int,
    required_long,
    required_text,
)
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    PERM_READ,
    PERM_WRITE,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import StoredMessage
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import MessageToStore, PutResult
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
FIRST_RETRY_LEVEL: Final = 3
"""Delay level of the first retry (10 s with RocketMQ's default levels)."""


@dataclass(frozen=True, slots=True)
class SendBackDecision:
    """Where a handed-back message goes: its topic, and its delay level (0 for a DLQ)."""

    topic: str
    delay_level: int
    reconsume_times: int

    @property
    def dead(self) -> bool:
        return self.topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def decide_send_back(
    group: str, reconsume_times: int, delay_level: int, max_reconsume_times: int
) -> SendBackDecision:
    """Retry topic with a growing delay, or the dead-letter queue once tries are used up."""
    if reconsume_times >= max_reconsume_times or delay_level < 0:
        return SendBackDecision(DLQ_GROUP_TOPIC_PREFIX + group, 0, reconsume_times + 1)
    level = delay_level if delay_level > 0 else FIRST_RETRY_LEVEL + reconsume_times
    return SendBackDecision(RETRY_GROUP_TOPIC_PREFIX + group, level, reconsume_times + 1)


def copy_for(
    stored: StoredMessage, decision: SendBackDecision, origin_msg_id: str, origin_topic: str
) -> MessageToStore:
    """The copy stored for a send-back: original body, flags and properties, plus the retry
    bookkeeping (RETRY_TOPIC, ORIGIN_MESSAGE_ID, DELAY)."""
    properties = dict(stored.properties)
    properties.setdefault(PROPERTY_RETRY_TOPIC, origin_topic or stored.topic)
    properties.setdefault(
        PROPERTY_ORIGIN_MESSAGE_ID,
        origin_msg_id or properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
    )
    properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    if decision.delay_level > 0:
        properties[PROPERTY_DELAY_TIME_LEVEL] = str(decision.delay_level)
    return MessageToStore(
        topic=decision.topic,
        body=stored.body,
        properties=encode_properties({k: v or None for k, v in properties.items()}),
        queue_id=0,
        flag=stored.flag,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        reconsume_times=decision.reconsume_times,
    )


class SendBackHandler:
    """CONSUMER_SEND_MSG_BACK on one broker."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        group_retry_max_times: Callable[[str], int | None],
        store_message: Callable[[list[MessageToStore]], Awaitable[PutResult]],
        clock: Clock,
        on_topic_created: Callable[[], None],
    ) -> None:
        """Args:
        store: Where the handed-back message is read.
        topics: Retry and dead-letter topics are created here on first use.
        group_retry_max_times: A group's `retryMaxTimes`, or None for an unknown group.
        store_message: Stores the copy through the send path (so DELAY is honoured).
        clock: For topic versions.
        on_topic_created: Called after a retry or DLQ topic was created (registration).
        """
        self._store = store
        self._topics = topics
        self._group_retry_max_times = group_retry_max_times
        self._store_message = store_message
        self._clock = clock
        self._on_topic_created = on_topic_created

    def routes(self) -> dict[int, RequestHandler]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.handle}

    async def handle(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        fields = request.ext_fields
        try:
            offset = required_long(fields, "offset")
            group = required_text(fields, "group")
            delay_level = required_int(fields, "delayLevel")
            max_times = optional_int(fields, "maxReconsumeTimes")
        except HeaderError as exc:
            return error_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        group_max = self._group_retry_max_times(group)
        if group_max is None:
            return error_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}",
            )
        stored = self._store.look_message_by_offset(offset)
        if stored is None:
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}"
            )
        decision = decide_send_back(
            group,
            stored.reconsume_times,
            delay_level,
            max_times if max_times is not None else group_max,
        )
        self._ensure_topic(decision.topic)
        copy = copy_for(
            stored, decision, fields.get("originMsgId", ""), fields.get("originTopic", "")
        )
        if decision.dead:
            log.info(
                "message %s of %s moved to %s after %d reconsume times",
                fields.get("originMsgId") or offset,
                group,
                decision.topic,
                stored.reconsume_times,
            )
        result = await self._store_message([copy])
        if not result.ok:
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"storing the send-back failed: {result}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _ensure_topic(self, topic: str) -> None:
        if self._topics.get(topic) is None:
            self._topics.create_system_topic(topic, 1, PERM_READ | PERM_WRITE, self._clock.now_ms())
            log.info("created %s", topic)
            self._on_topic_created()
