"""RECALL_MESSAGE (370): cancelling a pending timer message by its recall handle
(RocketMQ's `RecallMessageProcessor`).

    request ext: producerGroup (optional), topic, recallHandle     answer ext: msgId

The broker does not look for the message: it stores a delete marker through the timer wheel, a
message for the handle's topic with TIMER_DEL_UNIQKEY = `<topic>+<UNIQ_KEY>` and the handle's
timestamp as TIMER_DELIVER_MS, so the marker lands in the message's slot. When the slot is due
the timer store skips every message the slot's markers name. SUCCESS therefore means "the
marker is stored": a recall of a message that is unknown, or whose slot began delivering in the
meantime, succeeds and changes nothing, as in RocketMQ.

Checks and answers, in RocketMQ's order: `recallMessageEnable` off -> NO_PERMISSION; a slave ->
SLAVE_NOT_AVAILABLE; a broker without write permission (unless
`allowRecallWhenBrokerNotWriteable`) -> SERVICE_NOT_AVAILABLE; an unknown topic ->
TOPIC_NOT_EXIST; a handle that does not decode, names another topic or broker, or whose time
has passed or lies beyond `timerMaxDelaySec` -> ILLEGAL_OPERATION; a marker the store does not
take -> SYSTEM_ERROR. Every answer carries MSG_REGION. A missing header field is SYSTEM_ERROR,
as Java answers a header it cannot decode.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Final

from pocketmq.broker.headers import HeaderError, required_text
from pocketmq.broker.put_path import PutPath, PutRefusal
from pocketmq.broker.send import UNKNOWN_BORN_HOST, parse_host_address
from pocketmq.broker.timer_messages import TimerSettings
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    PERM_WRITE,
    PROPERTY_BORN_TIMESTAMP,
    PROPERTY_MSG_REGION,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.properties import PropertyError, encode_properties
from pocketmq.common.recall_handle import RecallHandleError, decode_recall_handle
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import MessageToStore
from pocketmq.store.timer import delete_key

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel

log = logging.getLogger(__name__)

RecallRequestHandler = Callable[[RemotingCommand, "Channel | None"], Awaitable[RemotingCommand]]

RECALL_MESSAGE_TAG: Final = "_RECALL_TAG_"
"""The tag of delete markers (RocketMQ's `RECALL_MESSAGE_TAG`)."""


class RecallHandler:
    """Answers RECALL_MESSAGE for one broker."""

    def __init__(
        self,
        put_path: PutPath,
        topics: TopicTable,
        settings: TimerSettings,
        clock: Clock,
        *,
        enabled: bool,
        is_slave: bool,
        broker_permission: Callable[[], int],
        allow_when_not_writeable: bool = True,
        region_id: str = "DefaultRegion",
    ) -> None:
        """Args:
        put_path: Where the delete marker goes; its timer step sends it to the slot.
        topics: The broker's topic table; the recalled topic must be in it.
        settings: Timer settings (limit, precision) and the broker's name.
        clock: Wall time, to check the handle's time.
        enabled: `recallMessageEnable`.
        is_slave: The broker is a slave (`brokerRole=SLAVE`): it takes no recall.
        broker_permission: The broker's permission now (`brokerPermission` can change).
        allow_when_not_writeable: `allowRecallWhenBrokerNotWriteable`.
        region_id: `regionId`, echoed as MSG_REGION.
        """
        self._put_path = put_path
        self._topics = topics
        self._settings = settings
        self._clock = clock
        self._enabled = enabled
        self._is_slave = is_slave
        self._broker_permission = broker_permission
        self._allow_when_not_writeable = allow_when_not_writeable
        self._region_id = region_id

    def routes(self) -> dict[int, RecallRequestHandler]:
        """The request code this handler answers, for the server's dispatch table."""
        return {RequestCode.RECALL_MESSAGE: self.recall}

    def _answer(
        self, request: RemotingCommand, code: ResponseCode, remark: str | None, **fields: str
    ) -> RemotingCommand:
        return RemotingCommand.response_to(
            request, code, remark, {PROPERTY_MSG_REGION: self._region_id, **fields}
        )

    async def recall(self, request: RemotingCommand, channel: Channel | None) -> RemotingCommand:
        """Answers one RECALL_MESSAGE; see the module docstring for the codes."""
        fields = request.ext_fields
        try:
            topic = required_text(fields, "topic")
            handle_text = required_text(fields, "recallHandle")
        except HeaderError as exc:
            return self._answer(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if not self._enabled:
            return self._answer(
                request,
                ResponseCode.NO_PERMISSION,
                "recall failed, recalling messages is off on this broker (recallMessageEnable)",
            )
        if self._is_slave:
            return self._answer(
                request, ResponseCode.SLAVE_NOT_AVAILABLE, "recall failed, this broker is a slave"
            )
        if not self._broker_permission() & PERM_WRITE and not self._allow_when_not_writeable:
            return self._answer(
                request,
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "recall failed, the broker is not writeable",
            )
        if self._topics.get(topic) is None:
            return self._answer(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"recall failed, the topic[{topic}] not exist",
            )
        try:
            handle = decode_recall_handle(handle_text)
        except RecallHandleError as exc:
            return self._answer(request, ResponseCode.ILLEGAL_OPERATION, str(exc))
        if handle.topic != topic:
            return self._answer(
                request,
                ResponseCode.ILLEGAL_OPERATION,
                f"recall failed, the handle is for topic {handle.topic}, not {topic}",
            )
        if handle.broker_name != self._settings.broker_name:
            return self._answer(
                request,
                ResponseCode.ILLEGAL_OPERATION,
                f"recall failed, the handle is for broker {handle.broker_name}",
            )
        now_ms = self._clock.now_ms()
        try:
            time_left_ms = int(handle.timestamp) - now_ms
        except ValueError:
            time_left_ms = -1
        if time_left_ms <= 0 or time_left_ms >= self._settings.max_delay_ms:
            return self._answer(
                request,
                ResponseCode.ILLEGAL_OPERATION,
                "recall failed, the message is due already or its time is not valid",
            )
        born_host = UNKNOWN_BORN_HOST
        if channel is not None:
            born_host = parse_host_address(channel.remote_address) or UNKNOWN_BORN_HOST
        try:
            properties = encode_properties(
                {
                    PROPERTY_TAGS: RECALL_MESSAGE_TAG,
                    PROPERTY_TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
                    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: handle.message_id,
                    PROPERTY_TIMER_DELIVER_MS: handle.timestamp,
                    PROPERTY_BORN_TIMESTAMP: str(now_ms),
                    PROPERTY_PRODUCER_GROUP: fields.get("producerGroup") or None,
                }
            )
        except PropertyError as exc:
            return self._answer(
                request, ResponseCode.ILLEGAL_OPERATION, f"recall handle is invalid: {exc}"
            )
        marker = MessageToStore(
            topic=handle.topic,
            body=b"0",
            properties=properties,
            queue_id=0,
            born_timestamp=now_ms,
            born_host=born_host,
        )
        try:
            put = await self._put_path.put([marker])
        except PutRefusal as exc:
            return self._answer(request, ResponseCode.SYSTEM_ERROR, f"recall failed, {exc.remark}")
        if not put.stored:
            return self._answer(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"recall failed, the delete marker was not stored ({put.result.status.value})",
            )
        log.info("recall of %s in %s stored for %s", handle.message_id, topic, handle.timestamp)
        return self._answer(request, ResponseCode.SUCCESS, None, msgId=handle.message_id)
