"""The broker's send door: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Owns the checks RocketMQ's `SendMessageProcessor.msgCheck` makes before storing (broker and
topic write permission, topic name, topic lookup or auto-creation through the default topic,
queue id, body size), building the `MessageToStore` list, deciding whether a send to
`%RETRY%<group>` is dead (RocketMQ's `handleRetryAndDLQ`, rules in `broker/retry_policy.py`)
or a transactional half, and answering with where the messages went. The rewrites themselves
(dead letter, half, timer, delay) and the store's outcome codes belong to the put path
(`broker/put_path.py`); the header to `broker/send_header.py`.

Every request gets an answer: a bad header, a bad topic or a garbage batch body is a response
code with a remark, never an exception out of `handle`. Every answer, error or not, carries the
`MSG_REGION` and `TRACE_ON` ext fields, as the Java broker adds them before any check.

Batch is decided by the header flag (`batch` / `m`) or by code 320: the C++ client of PyPI
`rocketmq` 0.4.4 sends batches as code 10 with `batch`="1", where Java would only accept "true".
A timer message's answer carries a `recallHandle`. Deliberately not here yet: static-topic
queue mapping.
"""

from __future__ import annotations

import ipaddress
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Final, Protocol

from pocketmq.broker.headers import HeaderError
from pocketmq.broker.metrics import BrokerMetrics, message_type
from pocketmq.broker.put_path import Put, PutPath, PutRefusal
from pocketmq.broker.retry_policy import (
    DLQ_QUEUE_NUMS,
    RetrySettings,
    group_of_retry_topic,
    max_reconsume_times,
    retry_send_is_dead,
)
from pocketmq.broker.send_header import SendRequestHeader, decode_send_header
from pocketmq.broker.timer_messages import recall_handle
from pocketmq.broker.topics import TopicConfig, TopicFilterType, TopicTable
from pocketmq.broker.transaction.half_messages import is_transaction_send
from pocketmq.common.batch import BatchError, scan_batch_body
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import (
    MULTI_TAGS_FLAG,
    PERM_READ,
    PERM_WRITE,
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.message_id import offset_msg_ids
from pocketmq.common.properties import find_property
from pocketmq.common.stored_message import HostAddress
from pocketmq.common.topic_names import (
    OFFSET_MOVED_EVENT,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TRANSACTION_CHECK_MAX_TIME_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_OP_HALF_TOPIC,
    TopicError,
    dlq_topic,
    validate_topic_name,
)
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import STORED_STATUSES, BatchToStore, MessageToStore, PutStatus

if TYPE_CHECKING:
    from pocketmq.broker.config import BrokerConfig

log = logging.getLogger(__name__)

NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANSACTION_HALF_TOPIC,
        TRANSACTION_OP_HALF_TOPIC,
        TRANSACTION_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
"""Internal topics producers may not write to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`)."""
UNKNOWN_BORN_HOST: Final[HostAddress] = ("0.0.0.0", 0)
"""Stored as born host when the channel's remote address is not an `ip:port`."""
_FAQ_SUGGESTION: Final = (
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
)


# -- the handler --------------------------------------------------------------------------


class PeerChannel(Protocol):
    """What the send path needs of the connection a request came on."""

    @property
    def remote_address(self) -> str:
        """The peer's `ip:port`."""
        ...


# Cached: every send of a connection parses the same peer address (`ipaddress` is slow).
@lru_cache(maxsize=4096)
def parse_host_address(text: str) -> HostAddress | None:
    """Parses `ip:port` (IPv6 with or without brackets) as a stored host address.

    IPv4-mapped IPv6 addresses become plain IPv4, so the record keeps the 8-byte host form
    that C++ clients decode.

    Returns:
        The address, or None when `text` is not an ip and a port.
    """
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isascii() or not port_text.isdigit():
        return None
    try:
        ip = ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None
    port = int(port_text)
    if port > 0xFFFF:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped), port
    return str(ip), port


@dataclass(frozen=True, slots=True)
class SendSettings:
    """The broker settings a send follows."""

    store_host: HostAddress
    """The broker's address as written into records; `msgId`s encode it, so it must be the
    store's `store_host`."""
    default_topic_queue_nums: int = 8
    """Queues of an auto-created topic when the request does not ask for a positive number
    (`defaultTopicQueueNums`)."""
    region_id: str = "DefaultRegion"
    """`regionId`, echoed as the `MSG_REGION` ext field."""
    trace_on: bool = True
    """`traceOn`, echoed as the `TRACE_ON` ext field."""

    @classmethod
    def from_config(cls, config: BrokerConfig, store_host: HostAddress) -> SendSettings:
        return cls(
            store_host=store_host,
            default_topic_queue_nums=config.default_topic_queue_nums,
            region_id=config.region_id,
            trace_on=config.trace_on,
        )


class SendHandler:
    """Answers send requests: checks, stores through the put path, and reports where the
    messages went.

    Register `handle` for codes 10, 310 and 320. `broker_permission` is a plain attribute so
    the broker can wipe and restore write permission at run time.
    """

    def __init__(
        self,
        put_path: PutPath,
        topics: TopicTable,
        settings: SendSettings,
        clock: Clock,
        topics_created: Callable[[list[str]], Awaitable[None]],
        *,
        broker_permission: int = PERM_READ | PERM_WRITE,
        find_group: Callable[[str], Awaitable[RetrySettings | None]] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """Wires the send path.

        Args:
            put_path: Where messages go.
            topics: The broker's topic table; auto-created topics are added to it.
            settings: Auto-created topics' size and the fields every answer echoes.
            clock: Time for the topic table's data version.
            topics_created: Awaited with the topics a send created (its own, a dead-letter
                topic) before the send is answered: the broker saves them and registers them
                with the NameServers, as RocketMQ does, so that they survive a crash and the
                producer's next route lookup finds them. A failed save raises (OSError).
            broker_permission: `brokerPermission`; without PERM_WRITE every send is refused.
            find_group: A consumer group's settings, or None for an unknown group; sends to
                retry topics are checked against it. Without it they are stored as sent.
            rng: Picks the queue when the request's queue id is negative.
        """
        assert put_path.settings.max_message_size > 0, "maxMessageSize must be positive"
        self.put_path = put_path
        self.topics = topics
        self.settings = settings
        self.store_host = settings.store_host
        self.clock = clock
        self.topics_created = topics_created
        self.broker_permission = broker_permission
        self.find_group = find_group
        self._rng = rng or random.Random()
        self.metrics: BrokerMetrics | None = None

    async def handle(self, request: RemotingCommand, channel: PeerChannel) -> RemotingCommand:
        """Answers one send request; a `RequestHandler` for codes 10, 310 and 320.

        Returns:
            SUCCESS, or FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT / SLAVE_NOT_AVAILABLE (stored
            all the same), each with `msgId`, `queueId`, `queueOffset` and, when the message
            has a UNIQ_KEY, `transactionId`; or an error code with a remark saying why nothing
            was stored: INVALID_PARAMETER (header, topic name, queue id), NO_PERMISSION,
            TOPIC_NOT_EXIST, MESSAGE_ILLEGAL (size, batch body), SUBSCRIPTION_GROUP_NOT_EXIST
            (a retry topic's group), SERVICE_NOT_AVAILABLE, SYSTEM_BUSY, SYSTEM_ERROR.
        """
        try:
            header = decode_send_header(request)
        except HeaderError as exc:
            return self._answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        new_topic = header.topic not in self.topics.topics
        try:
            topic_config = self._check(header, channel.remote_address)
            queue_id = header.queue_id
            if queue_id < 0:
                queue_id = self._rng.randrange(topic_config.write_queue_nums)
            dead_group = await self._dead_letter_group(header, request.version)
            if header.batch:
                # The door refuses batches to retry topics, so no batch is dead.
                assert dead_group is None
                put = await self.put_path.put_batch(
                    self._build_batch(request, header, topic_config, queue_id, channel)
                )
            else:
                put = await self.put_path.put(
                    [self._build_one(request, header, topic_config, queue_id, channel)],
                    dead_letter_group=dead_group,
                    transaction_send=is_transaction_send(header.properties, header.reconsume_times),
                )
        except HeaderError as exc:
            return self._answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        except PutRefusal as exc:
            return self._answer(request, exc.code, exc.remark)
        finally:
            if new_topic and header.topic in self.topics.topics:
                # Created here, whether the put was refused or not. As RocketMQ: the send is
                # answered once the NameServers know the topic, so the producer's next route
                # lookup finds it.
                await self.topics_created([header.topic])
        return self._answer_put(request, put, queue_id, header)

    # -- checks (`AbstractSendMessageProcessor.msgCheck`) ----------------------------------
    def _check(self, header: SendRequestHeader, producer: str) -> TopicConfig:
        topic = header.topic
        if not self.broker_permission & PERM_WRITE:
            # Java refuses only order topics here and lets routes steer the rest away; a
            # stale route must not write to a broker that was made read-only either.
            raise PutRefusal(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.store_host[0]}] sending message is forbidden",
            )
        try:
            validate_topic_name(topic)
        except TopicError as exc:
            # 4.9.x answered SYSTEM_ERROR here; develop answers INVALID_PARAMETER.
            raise PutRefusal(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise PutRefusal(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = self.topics.get(topic) or self._create_topic(header, producer)
        valid_ids = max(config.write_queue_nums, config.read_queue_nums)
        if header.queue_id >= valid_ids:
            raise PutRefusal(
                ResponseCode.INVALID_PARAMETER,
                f"request queueId[{header.queue_id}] is illegal, topic[{topic}] has "
                f"{config.write_queue_nums} write and {config.read_queue_nums} read queues, "
                f"Producer: {producer}",
            )
        if not config.perm & PERM_WRITE:
            raise PutRefusal(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        if header.batch and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise PutRefusal(
                ResponseCode.MESSAGE_ILLEGAL, f"batch request does not support retry group {topic}"
            )
        return config

    async def _dead_letter_group(self, header: SendRequestHeader, version: int) -> str | None:
        """The group whose dead-letter queue a send to its retry topic goes to, if it does
        (`handleRetryAndDLQ`); creates that dead-letter topic."""
        group = group_of_retry_topic(header.topic)
        if group is None or self.find_group is None:
            return None
        settings = await self.find_group(group)
        if settings is None:
            raise PutRefusal(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group} {_FAQ_SUGGESTION}",
            )
        limit = max_reconsume_times(settings.retry_max_times, header.max_reconsume_times, version)
        if not retry_send_is_dead(header.reconsume_times, limit):
            return None
        topic = dlq_topic(group)
        if self.topics.get(topic) is None:
            self.topics.create_system_topic(
                topic, DLQ_QUEUE_NUMS, PERM_READ | PERM_WRITE, self.clock.now_ms()
            )
            await self.topics_created([topic])
        log.info(
            "message sent to %s after %d reconsume times (max %d) goes to %s",
            header.topic,
            header.reconsume_times,
            limit,
            topic,
        )
        return group

    def _create_topic(self, header: SendRequestHeader, producer: str) -> TopicConfig:
        queue_nums = header.default_topic_queue_nums
        if queue_nums <= 0:
            queue_nums = self.settings.default_topic_queue_nums
        config = self.topics.create_on_send(
            header.topic, header.default_topic, queue_nums, self.clock.now_ms()
        )
        if config is None:
            raise PutRefusal(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!{_FAQ_SUGGESTION}",
            )
        log.info(
            "auto-created topic %s from %s with %d queues for producer %s",
            config.topic_name,
            header.default_topic,
            config.write_queue_nums,
            producer,
        )
        return config

    # -- building and storing --------------------------------------------------------------
    def _build_one(
        self,
        request: RemotingCommand,
        header: SendRequestHeader,
        config: TopicConfig,
        queue_id: int,
        channel: PeerChannel,
    ) -> MessageToStore:
        sys_flag, born_host = self._shared_fields(request, header, config, channel)
        return MessageToStore(
            topic=header.topic,
            body=request.body,
            # Passed through as sent: the store copies the string into the record.
            properties=header.properties,
            queue_id=queue_id,
            flag=header.flag,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born_host,
            reconsume_times=header.reconsume_times,
        )

    def _build_batch(
        self,
        request: RemotingCommand,
        header: SendRequestHeader,
        config: TopicConfig,
        queue_id: int,
        channel: PeerChannel,
    ) -> BatchToStore:
        sys_flag, born_host = self._shared_fields(request, header, config, channel)
        try:
            spans = scan_batch_body(request.body)
        except BatchError as exc:
            raise PutRefusal(
                ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {exc}"
            ) from None
        return BatchToStore(
            topic=header.topic,
            queue_id=queue_id,
            body=request.body,
            spans=spans,
            sys_flag=sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born_host,
            reconsume_times=header.reconsume_times,
        )

    def _shared_fields(
        self,
        request: RemotingCommand,
        header: SendRequestHeader,
        config: TopicConfig,
        channel: PeerChannel,
    ) -> tuple[int, HostAddress]:
        """Checks the request body's size; returns the sys flag and born host that every
        message of the request takes."""
        body = request.body
        if len(body) > self.put_path.settings.max_message_size:
            what = "batch body" if header.batch else "msg body"
            raise PutRefusal(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message is illegal, {what} length {len(body)}B exceeds the limit "
                f"{self.put_path.settings.max_message_size}B (maxMessageSize)",
            )
        sys_flag = header.sys_flag
        if config.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        return sys_flag, parse_host_address(channel.remote_address) or UNKNOWN_BORN_HOST

    # -- answers (`SendMessageProcessor.handlePutMessageResult`) ---------------------------
    def _answer(
        self,
        request: RemotingCommand,
        code: ResponseCode,
        remark: str | None,
        fields: dict[str, str] | None = None,
    ) -> RemotingCommand:
        """The answer, with `fields` (a dict of the caller's own, extended here rather than
        copied) and the fields every send answer carries."""
        ext_fields = {} if fields is None else fields
        ext_fields[PROPERTY_MSG_REGION] = self.settings.region_id
        ext_fields[PROPERTY_TRACE_SWITCH] = "true" if self.settings.trace_on else "false"
        return RemotingCommand.response_to(request, code, remark, ext_fields)

    def _answer_put(
        self, request: RemotingCommand, put: Put, queue_id: int, header: SendRequestHeader
    ) -> RemotingCommand:
        result = put.result
        stored_code = _STORED_CODES.get(result.status)
        if stored_code is None:
            code, remark = self.put_path.failure_answer(result)
            return self._answer(request, code, remark)
        durability = result.durability.value
        if self.metrics is not None:
            self.metrics.stored(
                header.topic,
                message_type(header.properties),
                len(result.physical_offsets),
                result.wrote_bytes,
                durability,
            )
        fields = {
            "msgId": offset_msg_ids(self.store_host, result.physical_offsets),
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            # What "stored" meant for this message; RocketMQ's clients ignore these fields.
            "durability": durability,
            "replicas": str(result.replicas),
        }
        # Java reports the UNIQ_KEY of what it stored: the message's own, or for a batch the
        # batch header's (usually none, as producers set UNIQ_KEY per entry).
        uniq_key = find_property(header.properties, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if uniq_key:
            fields["transactionId"] = uniq_key
        timer = self.put_path.settings.timer
        if timer is not None and not header.batch:
            handle = recall_handle(put.messages[0], timer.broker_name)  # timer messages only
            if handle is not None:
                fields["recallHandle"] = handle
        return self._answer(request, stored_code, None, fields)


_STORED_CODES: Final = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
"""Statuses after which the messages are stored: the answer carries the send result."""
assert _STORED_CODES.keys() == STORED_STATUSES
