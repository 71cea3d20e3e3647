"""PULL_MESSAGE (11): reading a queue for a consumer, with long polling (`PullMessageProcessor`).

A pull names a queue and an offset; the answer carries the stored records from there on,
back to back and untouched (C++ and Java clients decode them as they are), and always the four
header fields `nextBeginOffset`, `minOffset`, `maxOffset` and `suggestWhichBrokerId`.

Order of checks, as RocketMQ's: broker readable, topic exists, topic readable, queue id in
range, subscription, then the commit of `commitOffset` (FLAG_COMMIT_OFFSET), then the read.
Unlike RocketMQ, a pull's `commitOffset` only ever moves the group's offset forward: lower than
the committed one it is stale (`ConsumerOffsetTable.advance`).
Store statuses map to response codes and next offsets as in `PullMessageProcessor` (the store
has already applied a master's offset corrections):

    store status                               code (nextBeginOffset)
    FOUND                                      SUCCESS (past the last record read)
    NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING   PULL_RETRY_IMMEDIATELY (past the entries scanned)
    NO_MESSAGE_IN_QUEUE, NO_MATCHED_LOGIC_QUEUE
                                               PULL_OFFSET_MOVED (0); PULL_NOT_FOUND if asked 0
    OFFSET_TOO_SMALL                           PULL_OFFSET_MOVED (min offset)
    OFFSET_OVERFLOW_BADLY                      PULL_OFFSET_MOVED (max offset)
    OFFSET_OVERFLOW_ONE                        PULL_NOT_FOUND (the offset asked)
    OFFSET_FOUND_NULL                          PULL_NOT_FOUND

Long polling: a PULL_NOT_FOUND pull with FLAG_SUSPEND is held up to `suspendTimeoutMillis`
(capped at `hold_ms_max`; `shortPollingTimeMills` when long polling is off) by
`PullHoldService`, then read again. A held pull is only an awaiting coroutine: the transport
runs each request as its own task, so other requests on the same connection (the C++ client
shares one socket for everything) go on. Differences from Java, all on the side of answering
sooner: a held pull wakes on any arrival in its queue, even with short polling; when
everything that arrived is filtered out it waits on from past those messages (Java's hold
service is not woken by them), and if its time runs out it answers PULL_NOT_FOUND with
nextBeginOffset past them; when the hold service is full the pull is answered at once.
A pull without FLAG_SUBSCRIPTION (Java push consumers) filters by the subscription the group's
heartbeat registered, or takes every message when there is none. SQL92 subscriptions (with
`enablePropertyFilter`) are evaluated on each record's properties after the tag-hash step.
Not done yet: OFFSET_MOVED_EVENT messages, and slave-side reads (#6).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.headers import (
    INT_DIGITS,
    answers_header_errors,
    error_response,
    optional_int,
    required_int,
    required_long,
    required_text,
)
from pocketmq.broker.long_polling import PullHoldService
from pocketmq.broker.metrics import BrokerMetrics
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import PERM_READ
from pocketmq.common.properties import decode_properties
from pocketmq.common.property_filter import PropertyFilter
from pocketmq.common.route import MASTER_ID
from pocketmq.common.stored_message import ReadableBuffer, parse_layout
from pocketmq.common.subscription import (
    EXPRESSION_TYPE_SQL92,
    SubscriptionData,
    SubscriptionError,
    UnsupportedExpressionTypeError,
    parse_subscription,
)
from pocketmq.remoting.command import RemotingCommand
from pocketmq.store.api import GetResult, GetStatus
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel

log = logging.getLogger(__name__)

# PullSysFlag bits (`PullSysFlag`).
FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4
FLAG_CLASS_FILTER: Final = 0x8
FLAG_LITE_PULL_MESSAGE: Final = 0x10

SLAVE_ID_WHEN_CONSUME_SLOWLY: Final = 1
"""`SubscriptionGroupConfig.whichBrokerWhenConsumeSlowly` default."""

# RocketMQ's `maxTransferCountOnMessageInMemory` / `maxTransferBytesOnMessageInMemory`: one
# pull carries at most this much, whatever the client asks, so a response stays well below the
# frame limit of every client and one consumer cannot monopolise the loop.
TRANSFER_COUNT_MAX_DEFAULT: Final = 32
TRANSFER_BYTES_MAX_DEFAULT: Final = 256 * 1024
HOLD_MS_MAX_DEFAULT: Final = 120_000
"""A held pull never waits longer than this, whatever `suspendTimeoutMillis` says (clients use
15-30 s)."""


@dataclass(frozen=True, slots=True)
class PullSettings:
    """What the broker's settings say about pulls."""

    broker_permission: int
    """`brokerPermission`; without PERM_READ every pull is refused."""
    long_polling_enable: bool = True
    """`longPollingEnable`; when off, pulls are held `short_polling_ms` instead of their
    `suspendTimeoutMillis`."""
    enable_property_filter: bool = False
    """`enablePropertyFilter`: serve SQL92 subscriptions."""
    short_polling_ms: int = 1000
    """`shortPollingTimeMills`."""
    slave_read_enable: bool = False
    """`slaveReadEnable`: only then does a pull that reads far behind the head get
    suggestWhichBrokerId 1 (a slave); otherwise always 0."""
    transfer_count_max: int = TRANSFER_COUNT_MAX_DEFAULT
    """Messages per pull at most."""
    transfer_bytes_max: int = TRANSFER_BYTES_MAX_DEFAULT
    """Bytes per pull at most (one message is always sent)."""
    hold_ms_max: int = HOLD_MS_MAX_DEFAULT
    """Longest hold, whatever the client asks."""

    @classmethod
    def from_config(cls, config: BrokerConfig, store_config: MessageStoreConfig) -> PullSettings:
        return cls(
            broker_permission=config.broker_permission,
            long_polling_enable=config.long_polling_enable,
            enable_property_filter=config.enable_property_filter,
            short_polling_ms=config.short_polling_time_mills,
            slave_read_enable=config.slave_read_enable,
            transfer_count_max=store_config.max_transfer_count_on_message_in_memory,
            transfer_bytes_max=store_config.max_transfer_bytes_on_message_in_memory,
        )


class PullHeader(NamedTuple):
    """`PullMessageRequestHeader`. A named tuple: made for every pull, and built in a fifth of a
    frozen dataclass's time."""

    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_ms: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> PullHeader:
        """Reads the header from a request's ext fields (values are strings).

        Raises:
            HeaderError: a required field is missing, or a number field is not a number.
        """
        return _usual_pull_header(ext_fields) or cls._decode_carefully(ext_fields)

    @classmethod
    def _decode_carefully(cls, ext_fields: Mapping[str, str]) -> PullHeader:
        """Any header, field by field, raising `HeaderError` for the first bad one."""
        return cls(
            consumer_group=required_text(ext_fields, "consumerGroup"),
            topic=required_text(ext_fields, "topic"),
            queue_id=required_int(ext_fields, "queueId"),
            queue_offset=required_long(ext_fields, "queueOffset"),
            max_msg_nums=required_int(ext_fields, "maxMsgNums"),
            sys_flag=required_int(ext_fields, "sysFlag"),
            commit_offset=required_long(ext_fields, "commitOffset"),
            suspend_timeout_ms=required_long(ext_fields, "suspendTimeoutMillis"),
            sub_version=required_long(ext_fields, "subVersion"),
            subscription=ext_fields.get("subscription"),
            expression_type=ext_fields.get("expressionType"),
            max_msg_bytes=optional_int(ext_fields, "maxMsgBytes"),
        )

    @property
    def commits_offset(self) -> bool:
        return bool(self.sys_flag & FLAG_COMMIT_OFFSET)

    @property
    def may_suspend(self) -> bool:
        return bool(self.sys_flag & FLAG_SUSPEND)

    @property
    def has_subscription(self) -> bool:
        return bool(self.sys_flag & FLAG_SUBSCRIPTION)


def _usual_pull_header(fields: Mapping[str, str]) -> PullHeader | None:
    """The header of the usual pull, read in one pass: every number plain digits that surely
    fit, no `maxMsgBytes`; None for anything else, which `PullHeader._decode_carefully` reads
    or refuses field by field. A consumer pulls all the time, and this takes about a third of
    the careful reading's time."""
    get = fields.get
    group = get("consumerGroup")
    topic = get("topic")
    queue_id = get("queueId")
    queue_offset = get("queueOffset")
    max_nums = get("maxMsgNums")
    sys_flag = get("sysFlag")
    commit_offset = get("commitOffset")
    suspend_ms = get("suspendTimeoutMillis")
    sub_version = get("subVersion")
    if (
        group is None
        or topic is None
        or queue_id is None
        or queue_offset is None
        or max_nums is None
        or sys_flag is None
        or commit_offset is None
        or suspend_ms is None
        or sub_version is None
        or not 0 < len(queue_id) <= INT_DIGITS
        or not 0 < len(max_nums) <= INT_DIGITS
        or not 0 < len(sys_flag) <= INT_DIGITS
        or not 0 < len(queue_offset) <= 2 * INT_DIGITS
        or not 0 < len(commit_offset) <= 2 * INT_DIGITS
        or not 0 < len(suspend_ms) <= 2 * INT_DIGITS
        or not 0 < len(sub_version) <= 2 * INT_DIGITS
        or "maxMsgBytes" in fields
    ):
        return None
    digits = queue_id + queue_offset + max_nums + sys_flag + commit_offset + suspend_ms
    digits += sub_version
    if not (digits.isdigit() and digits.isascii()):
        return None
    return PullHeader(
        group,
        topic,
        int(queue_id),
        int(queue_offset),
        int(max_nums),
        int(sys_flag),
        int(commit_offset),
        int(suspend_ms),
        int(sub_version),
        get("subscription"),
        get("expressionType"),
        None,
    )


def pull_status_code(status: GetStatus, request_offset: int) -> ResponseCode:
    """The response code of a read's status (`PullMessageProcessor`, on a master)."""
    if status is GetStatus.FOUND:
        return ResponseCode.SUCCESS
    if status in (GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING):
        return ResponseCode.PULL_RETRY_IMMEDIATELY
    if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return (
            ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
        )
    if status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
        return ResponseCode.PULL_OFFSET_MOVED
    assert status in (GetStatus.OFFSET_OVERFLOW_ONE, GetStatus.OFFSET_FOUND_NULL), status
    return ResponseCode.PULL_NOT_FOUND


class PullHandler:
    """Answers PULL_MESSAGE requests from one store."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        *,
        hold_service: PullHoldService,
        settings: PullSettings,
        registered_subscription: Callable[[str, str], SubscriptionData | None] | None = None,
    ) -> None:
        """
        Args:
            store: Where messages are read.
            topics: The broker's topics.
            offsets: Consumer offsets; FLAG_COMMIT_OFFSET pulls commit into it.
            hold_service: Holds pulls that found nothing (hook its `on_dispatched` into the
                store's dispatcher so arrivals wake them).
            settings: The broker's settings for pulls.
            registered_subscription: (group, topic) -> the subscription the group's heartbeat
                registered; used for pulls that carry none (Java push consumers).
        """
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._hold = hold_service
        self._registered_subscription = registered_subscription
        self._settings = settings
        self.pulled_messages = 0
        """Messages served so far (runtime info `pulledMessageCount`)."""
        self.metrics: BrokerMetrics | None = None

    @answers_header_errors()
    async def handle(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        """Answers one pull; may wait (long polling) but never blocks the loop.

        Args:
            request: The PULL_MESSAGE request.
            channel: The connection it came on (for log lines only).

        Returns:
            The response: found records in the body, or a code saying why not.
        """
        header = PullHeader.decode(request.ext_fields)
        settings = self._settings
        if not settings.broker_permission & PERM_READ:
            return error_response(
                request, ResponseCode.NO_PERMISSION, "the broker pulling message is forbidden"
            )
        topic_config = self._topics.get(header.topic)
        if topic_config is None:
            log.warning(
                "pull from %s for unknown topic %s (group %s)",
                _peer(channel),
                header.topic,
                header.consumer_group,
            )
            return error_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
            )
        if not topic_config.perm & PERM_READ:
            return error_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] pulling message is forbidden",
            )
        if not 0 <= header.queue_id < topic_config.read_queue_nums:
            return error_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}] "
                f"consumer:[{_peer(channel)}]",
            )
        subscription: SubscriptionData | None = None
        if header.has_subscription:
            try:
                subscription = parse_subscription(
                    header.topic,
                    header.subscription,
                    header.expression_type,
                    sub_version=header.sub_version,
                )
            except SubscriptionError as exc:
                return error_response(request, exc.response_code, str(exc))
        elif self._registered_subscription is not None:
            subscription = self._registered_subscription(header.consumer_group, header.topic)
        sql = subscription.property_filter if subscription is not None else None
        if sql is not None and not settings.enable_property_filter:
            error = UnsupportedExpressionTypeError(EXPRESSION_TYPE_SQL92)
            return error_response(request, error.response_code, str(error))
        if header.commits_offset:
            # Forward only: see `ConsumerOffsetTable.advance`. Like RocketMQ, the broker does
            # not check that the puller still owns the queue (ownership is the clients' own
            # agreement); a stale owner can at worst repeat progress, never undo it.
            self._offsets.advance(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset
            )
        return await self._pull(request, header, MessageFilter.of(subscription))

    async def _pull(
        self, request: RemotingCommand, header: PullHeader, selection: MessageFilter
    ) -> RemotingCommand:
        offset = header.queue_offset
        result = self._read(header, offset, selection)
        code = pull_status_code(result.status, offset)
        if code is ResponseCode.PULL_NOT_FOUND and header.may_suspend:
            settings = self._settings
            hold_ms = (
                header.suspend_timeout_ms
                if settings.long_polling_enable
                else settings.short_polling_ms
            )
            loop = asyncio.get_running_loop()
            request.suspended = True
            deadline = loop.time() + min(hold_ms, settings.hold_ms_max) / 1000
            while (remaining_s := deadline - loop.time()) > 0:
                arrived = await self._hold.hold(header.topic, header.queue_id, offset, remaining_s)
                result = self._read(header, offset, selection)
                if not arrived:
                    break
                if (
                    result.status is not GetStatus.NO_MATCHED_MESSAGE
                    or result.next_begin_offset < result.max_offset
                ):
                    break
                # Everything that arrived was filtered out and the scan reached the end: wait on
                # from past it, as Java's hold service is not woken by non-matching tags.
                offset = result.next_begin_offset
            code = pull_status_code(result.status, header.queue_offset)
        if log.isEnabledFor(logging.DEBUG):  # its arguments cost a pull more than the call
            log.debug(
                "pull %s %s/%d from %d (commit %s): %s, %d messages, next %d, max %d",
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.queue_offset,
                header.commit_offset if header.commits_offset else "-",
                code.name,
                result.message_count,
                result.next_begin_offset,
                result.max_offset,
            )
        if code is ResponseCode.SUCCESS and self.metrics is not None:
            self.metrics.pulled_messages(
                header.consumer_group,
                header.topic,
                header.queue_id,
                len(result.buffers),
                result.total_bytes,
                result.next_begin_offset,
            )
        return self._response(request, code, result)

    def _read(self, header: PullHeader, offset: int, selection: MessageFilter) -> GetResult:
        max_bytes = self._settings.transfer_bytes_max
        if header.max_msg_bytes is not None:
            max_bytes = max(1, min(max_bytes, header.max_msg_bytes))
        return self._store.get_message(
            header.topic,
            header.queue_id,
            offset,
            max(1, min(header.max_msg_nums, self._settings.transfer_count_max)),
            max_bytes=max_bytes,
            tag_codes=selection.tag_codes,
            record_filter=selection.record_filter,
        )

    def _response(
        self, request: RemotingCommand, code: ResponseCode, result: GetResult
    ) -> RemotingCommand:
        if code is ResponseCode.SUCCESS:
            self.pulled_messages += len(result.buffers)
        suggest = (
            SLAVE_ID_WHEN_CONSUME_SLOWLY
            if self._settings.slave_read_enable and result.suggest_slave
            else MASTER_ID
        )
        return RemotingCommand.response_to(
            request,
            code,
            _STATUS_NAMES[result.status],
            {
                "nextBeginOffset": str(result.next_begin_offset),
                "minOffset": str(result.min_offset),
                "maxOffset": str(result.max_offset),
                "suggestWhichBrokerId": str(suggest),
            },
            b"".join(result.buffers) if code is ResponseCode.SUCCESS else b"",
        )


_STATUS_NAMES: Final = {status: status.name for status in GetStatus}
"""The remark of a pull's answer (an enum's `name` is a descriptor, slow for every pull)."""


def _peer(channel: Channel | None) -> str:
    return channel.remote_address if channel is not None else "?"


class MessageFilter(NamedTuple):
    """What a pull keeps: tag hashes from the ConsumeQueue, then SQL92 on each record (a named
    tuple: one is made for every pull)."""

    tag_codes: frozenset[int] | None = None
    record_filter: Callable[[ReadableBuffer], bool] | None = None

    @classmethod
    def of(cls, subscription: SubscriptionData | None) -> MessageFilter:
        if subscription is None:
            return _KEEP_ALL
        sql = subscription.property_filter
        return cls(subscription.tag_codes, None if sql is None else _record_filter(sql))


_KEEP_ALL: Final = MessageFilter()


def _record_filter(sql: PropertyFilter) -> Callable[[ReadableBuffer], bool]:
    def keep(record: ReadableBuffer) -> bool:
        layout = parse_layout(record, 0)
        start = layout.properties_pos
        text = bytes(record[start : start + layout.properties_len]).decode("utf-8", "replace")
        return sql.matches(decode_properties(text))

    return keep
