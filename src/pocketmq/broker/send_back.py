"""CONSUMER_SEND_MSG_BACK (code 36): a consumer hands back a message it could not process.

The handler (RocketMQ's `AbstractSendMessageProcessor.consumerSendMsgBack`) finds the group,
creates its retry topic (`retryQueueNums` queues) on first use, reads the message at the
request's CommitLog offset, and stores a copy where `retry_policy.decide_send_back` says: the
retry topic with a growing delay, or the dead-letter topic (created with one queue) once the
tries are used up. The copy is stored through the put path, so its DELAY level takes it through
SCHEDULE_TOPIC_XXXX like any delayed message.

Answers: SUCCESS (also when the group has `retryQueueNums` <= 0: nothing is stored, as in
RocketMQ); SUBSCRIPTION_GROUP_NOT_EXIST; NO_PERMISSION (broker or retry topic not writable);
SYSTEM_ERROR for a bad header, a CommitLog offset with no message, or a failed store.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from pocketmq.broker.headers import (
    answers_header_errors,
    error_response,
    optional_int,
    required_int,
    required_long,
    required_text,
)
from pocketmq.broker.metrics import BrokerMetrics
from pocketmq.broker.put_path import PutPath
from pocketmq.broker.retry_policy import (
    DLQ_QUEUE_NUMS,
    RetrySettings,
    SendBackDecision,
    decide_send_back,
    max_reconsume_times,
    send_back_copy,
)
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    PERM_READ,
    PERM_WRITE,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.topic_names import retry_topic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import Clock
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel, RequestHandler

__all__ = ["SendBackDecision", "SendBackHandler", "decide_send_back"]

log = logging.getLogger(__name__)

_FAQ_SUGGESTION: Final = (
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
)


class SendBackHandler:
    """Answers CONSUMER_SEND_MSG_BACK on one broker."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        find_group: Callable[[str], Awaitable[RetrySettings | None]],
        put_path: PutPath,
        clock: Clock,
        topics_created: Callable[[list[str]], Awaitable[None]],
        *,
        broker_permission: Callable[[], int] = lambda: PERM_READ | PERM_WRITE,
        rng: random.Random | None = None,
    ) -> None:
        """Wires the handler.

        Args:
            store: Where the handed-back message is read (by CommitLog offset).
            topics: Retry and dead-letter topics are created here on first use.
            find_group: A group's settings, or None for an unknown group; may create the group
                (`autoCreateSubscriptionGroup`).
            put_path: Where the copy is stored.
            clock: For topic data versions.
            topics_created: Awaited after a retry or dead-letter topic was created: the broker
                saves its topics and registers the new one before going on.
            broker_permission: The broker's current `brokerPermission`.
            rng: Picks the retry queue when a group has several.
        """
        self._store = store
        self._topics = topics
        self._find_group = find_group
        self._put_path = put_path
        self.metrics: BrokerMetrics | None = None
        self._clock = clock
        self._topics_created = topics_created
        self._broker_permission = broker_permission
        self._rng = rng or random.Random()

    def routes(self) -> dict[int, RequestHandler]:
        """The request code this handler answers, for the server's dispatch table."""
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.handle}

    @answers_header_errors()
    async def handle(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """Stores a copy of the message at the request's `offset` in the group's retry or
        dead-letter topic; see the module docstring for the answers."""
        fields = request.ext_fields
        offset = required_long(fields, "offset")
        group = required_text(fields, "group")
        delay_level = required_int(fields, "delayLevel")
        header_max = optional_int(fields, "maxReconsumeTimes")
        settings = await self._find_group(group)
        if settings is None:
            return error_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group} {_FAQ_SUGGESTION}",
            )
        if not self._broker_permission() & PERM_WRITE:
            return error_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the broker[{self._store.store_host[0]}] sending message is forbidden",
            )
        if settings.retry_queue_nums <= 0:
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
        retry_config = await self._ensure_topic(retry_topic(group), settings.retry_queue_nums)
        if not retry_config.perm & PERM_WRITE:
            return error_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{retry_config.topic_name}] sending message is forbidden",
            )
        stored = self._store.look_message_by_offset(offset)
        if stored is None:
            return error_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"look message by offset failed, {offset}: no message is stored there",
            )
        limit = max_reconsume_times(settings.retry_max_times, header_max, request.version)
        decision = decide_send_back(group, stored.reconsume_times, delay_level, limit)
        if decision.dead:
            config = await self._ensure_topic(decision.topic, DLQ_QUEUE_NUMS)
        else:
            config = retry_config
        queue_id = self._rng.randrange(max(config.write_queue_nums, 1))
        copy = send_back_copy(stored, decision, queue_id)
        put = await self._put_path.put([copy])
        if not put.stored:
            result = put.result
            detail = f" ({result.remark})" if result.remark else ""
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"{result.status.value}{detail}"
            )
        if decision.dead:
            if self.metrics is not None:
                self.metrics.dead_lettered(group, fields.get("originTopic") or stored.topic)
            log.info(
                "message %s of topic %s moved to %s after %d reconsume times (max %d, "
                "delay level asked %d)",
                stored.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                or fields.get("originMsgId")
                or offset,
                fields.get("originTopic") or stored.topic,
                decision.topic,
                stored.reconsume_times,
                limit,
                delay_level,
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def _ensure_topic(self, topic: str, queues: int) -> TopicConfig:
        config = self._topics.get(topic)
        if config is None:
            config = self._topics.create_system_topic(
                topic, queues, PERM_READ | PERM_WRITE, self._clock.now_ms()
            )
            log.info("created %s with %d queue(s)", topic, queues)
            await self._topics_created([topic])
        return config
