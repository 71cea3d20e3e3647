"""The broker's send path: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320).

Owns decoding the send request header (V1 long names for code 10, V2 one-letter names for 310
and 320), the checks RocketMQ's `SendMessageProcessor.msgCheck` makes before storing (broker and
topic write permission, topic name, topic lookup or auto-creation through the default topic,
queue id), building the `MessageToStore` list, and mapping the store's `PutStatus` to a response
the way `handlePutMessageResult` does.

Every request gets an answer: a bad header, a bad topic or a garbage batch body is a response
code with a remark, never an exception out of `handle`. Every answer, error or not, carries the
`MSG_REGION` and `TRACE_ON` ext fields, as the Java broker adds them before any check.

Batch is decided by the header flag (`batch` / `m`) or by code 320: the C++ client of PyPI
`rocketmq` 0.4.4 sends batches as code 10 with `batch`="1", where Java would only accept "true".

A message with a DELAY level is stored through SCHEDULE_TOPIC_XXXX (`broker/schedule.py`).
A single message with a future TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS waits in the
timer wheel (`broker/timer_messages.py`); its answer carries a `recallHandle`.
A send to `%RETRY%<group>` needs the group to exist; with more reconsume times than the group
allows it goes to `%DLQ%<group>` instead (RocketMQ's `handleRetryAndDLQ`, rules in
`broker/retry_policy.py`). A single send with TRAN_MSG=true is stored as a transactional half
message (`broker/transaction/`). Deliberately not here yet: static-topic queue mapping.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple, Protocol

from pocketmq.broker.retry_policy import (
    DLQ_QUEUE_NUMS,
    RetrySettings,
    as_dead_letter,
    dlq_topic,
    group_of_retry_topic,
    max_reconsume_times,
    retry_send_is_dead,
)
from pocketmq.broker.schedule import redirect_delayed
from pocketmq.broker.timer_messages import (
    TimerRefusal,
    TimerSettings,
    recall_handle,
    redirect_timer,
)
from pocketmq.broker.topics import TopicConfig, TopicFilterType, TopicTable
from pocketmq.broker.transaction.half_messages import is_transaction_send, to_half
from pocketmq.common.batch import BatchError, decode_batch_body
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    MULTI_TAGS_FLAG,
    PERM_READ,
    PERM_WRITE,
    PROPERTY_MSG_REGION,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.message_id import create_offset_msg_id
from pocketmq.common.properties import decode_properties
from pocketmq.common.stored_message import HostAddress
from pocketmq.common.topic_names import TopicError, validate_topic_name
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import STORED_STATUSES, MessageToStore, PutResult, PutStatus
from pocketmq.store.message_store import StoreNotRunningError

log = logging.getLogger(__name__)

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
NOT_ALLOWED_SEND_TOPICS: Final = frozenset(
    {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
)
"""Internal topics producers may not write to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`)."""
UNKNOWN_BORN_HOST: Final[HostAddress] = ("0.0.0.0", 0)
"""Stored as born host when the channel's remote address is not an `ip:port`."""
_FAQ_SUGGESTION: Final = (
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
)
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_JAVA_INTEGER: Final = re.compile(r"[+-]?[0-9]+")


# -- the request header -------------------------------------------------------------------


class HeaderError(ValueError):
    """A send request header missing a required field, or with a value that does not parse.

    Attributes:
        field: The ext field's name as it travels (`queueId` in V1, `e` in V2).
    """

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"the custom field <{field}> {problem}")
        self.field = field


@dataclass(frozen=True, slots=True)
class SendRequestHeader:
    """A send request's header, whichever key set it came in (`SendMessageRequestHeader`)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str = ""
    reconsume_times: int = 0
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    batch: bool = False
    broker_name: str | None = None


class _HeaderKeys(NamedTuple):
    """The ext field names of one header version, by `SendRequestHeader` attribute."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: str
    queue_id: str
    sys_flag: str
    born_timestamp: str
    flag: str
    properties: str
    reconsume_times: str
    unit_mode: str
    max_reconsume_times: str
    batch: str
    broker_name: str


_V1_KEYS: Final = _HeaderKeys(
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
    "properties",
    "reconsumeTimes",
    "unitMode",
    "maxReconsumeTimes",
    "batch",
    "bname",  # from the 5.x `TopicRequestHeader` base class
)
_V2_KEYS: Final = _HeaderKeys(*"abcdefghijklmn")


def decode_send_header(command: RemotingCommand) -> SendRequestHeader:
    """Reads the header of a send request.

    Code 10 carries V1 names (`producerGroup`, `topic`, ...), codes 310 and 320 the V2 letters
    `a`..`n`. Numbers are parsed as Java's `Integer.parseInt` / `Long.parseLong` would, so
    values a C++ client sent as JSON numbers (already strings here) parse alike. A batch is
    marked by the `batch`/`m` flag ("true" in any case, or "1" as the C++ client sends it) or
    by code 320.

    Args:
        command: A request with code SEND_MESSAGE, SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE.

    Returns:
        The decoded header.

    Raises:
        HeaderError: a required field is missing, a number does not parse or does not fit its
            Java type, or the code is not a send code. The message names the field; the
            handler answers with it as the remark.
    """
    code = command.code
    if code == RequestCode.SEND_MESSAGE:
        keys = _V1_KEYS
    elif code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        keys = _V2_KEYS
    else:
        raise HeaderError("code", f"is {code}, which is not a send request")
    fields = command.ext_fields
    reconsume_times = _optional_number(fields, keys.reconsume_times, _INT32_MIN, _INT32_MAX)
    return SendRequestHeader(
        producer_group=_required_text(fields, keys.producer_group),
        topic=_required_text(fields, keys.topic),
        default_topic=_required_text(fields, keys.default_topic),
        default_topic_queue_nums=_required_int(fields, keys.default_topic_queue_nums),
        queue_id=_required_int(fields, keys.queue_id),
        sys_flag=_required_int(fields, keys.sys_flag),
        born_timestamp=_required_long(fields, keys.born_timestamp),
        flag=_required_int(fields, keys.flag),
        properties=fields.get(keys.properties) or "",
        reconsume_times=reconsume_times or 0,
        unit_mode=_flag(fields, keys.unit_mode),
        max_reconsume_times=_optional_number(
            fields, keys.max_reconsume_times, _INT32_MIN, _INT32_MAX
        ),
        batch=_flag(fields, keys.batch) or code == RequestCode.SEND_BATCH_MESSAGE,
        broker_name=fields.get(keys.broker_name) or None,
    )


def _required_text(fields: Mapping[str, str], key: str) -> str:
    value = fields.get(key)
    if value is None:
        raise HeaderError(key, "is null")  # `decodeCommandCustomHeader`'s wording
    return value


def _parse_number(key: str, text: str, low: int, high: int) -> int:
    # Python's int() also takes spaces, underscores and non-ASCII digits; Java's parsers do not.
    if not _JAVA_INTEGER.fullmatch(text):
        raise HeaderError(key, f"is not a number: {text!r}")
    value = int(text)
    if not low <= value <= high:
        bits = 32 if high == _INT32_MAX else 64
        raise HeaderError(key, f"= {text} does not fit a {bits}-bit integer")
    return value


def _required_int(fields: Mapping[str, str], key: str) -> int:
    return _parse_number(key, _required_text(fields, key), _INT32_MIN, _INT32_MAX)


def _required_long(fields: Mapping[str, str], key: str) -> int:
    return _parse_number(key, _required_text(fields, key), _INT64_MIN, _INT64_MAX)


def _optional_number(fields: Mapping[str, str], key: str, low: int, high: int) -> int | None:
    text = fields.get(key)
    if not text:  # absent, or the empty string some clients send for "not set"
        return None
    return _parse_number(key, text, low, high)


def _flag(fields: Mapping[str, str], key: str) -> bool:
    value = fields.get(key)
    return value is not None and (value.lower() == "true" or value == "1")


# -- the handler --------------------------------------------------------------------------


class StoreWriter(Protocol):
    """What the send path needs of the store (`MessageStore.put_messages`)."""

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Stores messages of one topic and queue as one unit."""
        ...


class PeerChannel(Protocol):
    """What the send path needs of the connection a request came on."""

    @property
    def remote_address(self) -> str:
        """The peer's `ip:port`."""
        ...


class _Rejection(Exception):
    """A check failed; `handle` answers with this code and remark."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


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


class SendHandler:
    """Answers send requests: checks, stores, and reports where the messages went.

    Register `handle` for codes 10, 310 and 320. `broker_permission` is a plain attribute so
    the broker can wipe and restore write permission at run time.
    """

    def __init__(
        self,
        store: StoreWriter,
        topics: TopicTable,
        store_host: HostAddress,
        clock: Clock,
        default_topic_queue_nums: int,
        max_message_size: int,
        on_topic_created: Callable[[TopicConfig], None],
        *,
        broker_permission: int = PERM_READ | PERM_WRITE,
        region_id: str = "DefaultRegion",
        trace_on: bool = True,
        delay_level_count: int = 0,
        find_group: Callable[[str], Awaitable[RetrySettings | None]] | None = None,
        rng: random.Random | None = None,
        reject_transaction_message: bool = False,
        timer: TimerSettings | None = None,
    ) -> None:
        """Wires the send path.

        Args:
            store: Where messages go; the broker's `MessageStore`.
            topics: The broker's topic table; auto-created topics are added to it.
            store_host: The broker's address as written into records; `msgId`s encode it,
                so it must be the store's `store_host`.
            clock: Time for the topic table's data version.
            default_topic_queue_nums: Queues of an auto-created topic when the request does
                not ask for a positive number (`defaultTopicQueueNums`).
            max_message_size: Largest body accepted, in bytes; for a batch, the largest
                whole batch body (`maxMessageSize`).
            on_topic_created: Called with each auto-created topic, after it is in the table;
                the broker re-registers with the NameServers then. Must not raise or block.
            broker_permission: `brokerPermission`; without PERM_WRITE every send is refused.
            region_id: `regionId`, echoed as the `MSG_REGION` ext field.
            trace_on: `traceOn`, echoed as the `TRACE_ON` ext field.
            delay_level_count: Levels of `messageDelayLevel`; with 0, DELAY is ignored.
            find_group: A consumer group's settings, or None for an unknown group; sends to
                retry topics are checked against it. Without it they are stored as sent.
            rng: Picks the queue when the request's queue id is negative.
            reject_transaction_message: `rejectTransactionMessage`: refuse half messages.
            timer: Timer message settings; without them TIMER_* properties are stored as sent.
        """
        assert max_message_size > 0, "maxMessageSize must be positive"
        self.store = store
        self.topics = topics
        self.store_host = store_host
        self.clock = clock
        self.default_topic_queue_nums = default_topic_queue_nums
        self.max_message_size = max_message_size
        self.on_topic_created = on_topic_created
        self.broker_permission = broker_permission
        self.region_id = region_id
        self.trace_on = trace_on
        self.delay_level_count = delay_level_count
        self.find_group = find_group
        self._rng = rng or random.Random()
        self.reject_transaction_message = reject_transaction_message
        self.timer = timer

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
            topic_config = self._check(header, channel.remote_address)
            queue_id = header.queue_id
            if queue_id < 0:
                queue_id = self._rng.randrange(topic_config.write_queue_nums)
            dead_group = await self._dead_letter_group(header, request.version)
            messages = self._build(request, header, topic_config, queue_id, channel)
            if dead_group is not None:
                messages = [as_dead_letter(message, dead_group) for message in messages]
            if not header.batch and is_transaction_send(header.properties, header.reconsume_times):
                if self.reject_transaction_message:
                    raise _Rejection(
                        ResponseCode.NO_PERMISSION,
                        f"the broker[{self.store_host[0]}] sending transaction message is "
                        "forbidden",
                    )
                messages = [to_half(messages[0])]
            if self.timer is not None and not header.batch:
                now_ms = self.clock.now_ms()
                messages = [redirect_timer(m, self.timer, now_ms) for m in messages]
            result = await self.store_messages(messages)
        except HeaderError as exc:
            return self._answer(request, ResponseCode.INVALID_PARAMETER, str(exc))
        except _Rejection as exc:
            return self._answer(request, exc.code, exc.remark)
        except TimerRefusal as exc:
            return self._answer(request, exc.code, exc.remark)
        answer = self._answer_put(request, result, queue_id, header.properties)
        if self.timer is not None and not header.batch and result.status in STORED_STATUSES:
            handle = recall_handle(messages[0], self.timer.broker_name)  # timer messages only
            if handle is not None:
                answer.ext_fields["recallHandle"] = handle
        return answer

    # -- checks (`AbstractSendMessageProcessor.msgCheck`) ----------------------------------
    def _check(self, header: SendRequestHeader, producer: str) -> TopicConfig:
        topic = header.topic
        if not self.broker_permission & PERM_WRITE:
            # Java refuses only order topics here and lets routes steer the rest away; a
            # stale route must not write to a broker that was made read-only either.
            raise _Rejection(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.store_host[0]}] sending message is forbidden",
            )
        try:
            validate_topic_name(topic)
        except TopicError as exc:
            # 4.9.x answered SYSTEM_ERROR here; develop answers INVALID_PARAMETER.
            raise _Rejection(ResponseCode.INVALID_PARAMETER, str(exc)) from None
        if topic in NOT_ALLOWED_SEND_TOPICS:
            raise _Rejection(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."
            )
        config = self.topics.get(topic) or self._create_topic(header, producer)
        valid_ids = max(config.write_queue_nums, config.read_queue_nums)
        if header.queue_id >= valid_ids:
            raise _Rejection(
                ResponseCode.INVALID_PARAMETER,
                f"request queueId[{header.queue_id}] is illegal, topic[{topic}] has "
                f"{config.write_queue_nums} write and {config.read_queue_nums} read queues, "
                f"Producer: {producer}",
            )
        if not config.perm & PERM_WRITE:
            raise _Rejection(
                ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden"
            )
        if header.batch and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            raise _Rejection(
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
            raise _Rejection(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group} {_FAQ_SUGGESTION}",
            )
        limit = max_reconsume_times(settings.retry_max_times, header.max_reconsume_times, version)
        if not retry_send_is_dead(header.reconsume_times, limit):
            return None
        topic = dlq_topic(group)
        if self.topics.get(topic) is None:
            config = self.topics.create_system_topic(
                topic, DLQ_QUEUE_NUMS, PERM_READ | PERM_WRITE, self.clock.now_ms()
            )
            self.on_topic_created(config)
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
            queue_nums = self.default_topic_queue_nums
        config = self.topics.create_on_send(
            header.topic, header.default_topic, queue_nums, self.clock.now_ms()
        )
        if config is None:
            raise _Rejection(
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
        self.on_topic_created(config)
        return config

    # -- building and storing --------------------------------------------------------------
    def _build(
        self,
        request: RemotingCommand,
        header: SendRequestHeader,
        config: TopicConfig,
        queue_id: int,
        channel: PeerChannel,
    ) -> list[MessageToStore]:
        body = request.body
        if len(body) > self.max_message_size:
            what = "batch body" if header.batch else "msg body"
            raise _Rejection(
                ResponseCode.MESSAGE_ILLEGAL,
                f"the message is illegal, {what} length {len(body)}B exceeds the limit "
                f"{self.max_message_size}B (maxMessageSize)",
            )
        sys_flag = header.sys_flag
        if config.topic_filter_type is TopicFilterType.MULTI_TAG:
            sys_flag |= MULTI_TAGS_FLAG
        born_host = parse_host_address(channel.remote_address) or UNKNOWN_BORN_HOST
        entries: Sequence[tuple[int, bytes, str]]
        if not header.batch:
            entries = [(header.flag, body, header.properties)]
        else:
            try:
                entries = decode_batch_body(body)
            except BatchError as exc:
                raise _Rejection(
                    ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {exc}"
                ) from None
        return [
            MessageToStore(
                topic=header.topic,
                body=entry_body,
                # Passed through as sent: the store copies the string into the record.
                properties=properties,
                queue_id=queue_id,
                flag=flag,
                sys_flag=sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=born_host,
                reconsume_times=header.reconsume_times,
            )
            for flag, entry_body, properties in entries
        ]

    async def store_messages(self, messages: list[MessageToStore]) -> PutResult:
        """Stores messages as a send does: a DELAY level sends them through the schedule."""
        if self.delay_level_count:
            messages = [redirect_delayed(m, self.delay_level_count) for m in messages]
        try:
            return await self.store.put_messages(messages)
        except StoreNotRunningError:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is not running")

    # -- answers (`SendMessageProcessor.handlePutMessageResult`) ---------------------------
    def _answer(
        self,
        request: RemotingCommand,
        code: ResponseCode,
        remark: str | None,
        fields: Mapping[str, str] | None = None,
    ) -> RemotingCommand:
        ext_fields = dict(fields) if fields else {}
        ext_fields[PROPERTY_MSG_REGION] = self.region_id
        ext_fields[PROPERTY_TRACE_SWITCH] = "true" if self.trace_on else "false"
        return RemotingCommand.response_to(request, code, remark, ext_fields)

    def _answer_put(
        self, request: RemotingCommand, result: PutResult, queue_id: int, properties: str
    ) -> RemotingCommand:
        stored_code = _STORED_CODES.get(result.status)
        if stored_code is None:
            code, remark = self._failure(result)
            return self._answer(request, code, remark)
        fields = {
            "msgId": ",".join(
                create_offset_msg_id(self.store_host, offset) for offset in result.physical_offsets
            ),
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            # What "stored" meant for this message; RocketMQ's clients ignore these fields.
            "durability": result.durability.value,
            "replicas": str(result.replicas),
        }
        # Java reports the UNIQ_KEY of what it stored: the message's own, or for a batch the
        # batch header's (usually none, as producers set UNIQ_KEY per entry).
        if PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX in properties:
            uniq_key = decode_properties(properties).get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            if uniq_key:
                fields["transactionId"] = uniq_key
        return self._answer(request, stored_code, None, fields)

    def _failure(self, result: PutResult) -> tuple[ResponseCode, str]:
        status = result.status
        detail = f" ({result.remark})" if result.remark else ""
        if status in (PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED):
            return (
                ResponseCode.MESSAGE_ILLEGAL,
                "the message is illegal, maybe msg body or properties length not matched. "
                f"msg body length limit {self.max_message_size}B, msg properties length limit "
                f"32KB.{detail}",
            )
        if status is PutStatus.SERVICE_NOT_AVAILABLE:
            return (
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "service not available now. It may be caused by one of the following reasons: "
                "the broker's disk is full, messages are put to the slave, message store has "
                f"been shut down, etc.{detail}",
            )
        if status is PutStatus.OS_PAGE_CACHE_BUSY:
            return (
                ResponseCode.SYSTEM_BUSY,
                "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
            )
        if status is PutStatus.CREATE_MAPPED_FILE_FAILED:
            return (
                ResponseCode.SYSTEM_ERROR,
                f"create mapped file failed, server is busy or broken.{detail}",
            )
        return ResponseCode.SYSTEM_ERROR, f"{status.value}{detail}"


_STORED_CODES: Final = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
"""Statuses after which the messages are stored: the answer carries the send result."""
assert _STORED_CODES.keys() == STORED_STATUSES
