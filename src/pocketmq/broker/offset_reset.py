"""Resetting a consumer group's offsets by time, and asking its clients where they are.

    code                                    request ext                        answer body
    INVOKE_BROKER_TO_RESET_OFFSET (222)     topic, group, timestamp, isForce,  ResetOffsetBody
                                            queueId (opt.), offset (opt.)
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS    topic, group, clientAddr (opt.)    GetConsumer-
    (223)                                                                      StatusBody

A reset follows RocketMQ 5's server-side reset (`useServerSideResetOffset`, on by default, in
`AdminBrokerProcessor.resetOffsetInner`): every read queue of the topic (or the one `queueId`
names) gets the offset of the first message stored at or after `timestamp` (the queue's max
offset for a negative timestamp or a time after its last message; `offset` instead when a
queue id and an offset are given), committed in the broker's table whether or not a consumer
of the group is online, so `mqadmin resetOffsetByTime` and `skipAccumulatedMessage` answer the
way they do against RocketMQ 5.5. `isForce` is accepted and, as there, not applied.

RocketMQ 5 leaves online push consumers reading from their in-memory offsets until they next
take the queue. Here the broker also tells each online member of the group, as RocketMQ 4's
`Broker2Client.resetOffset` did: RESET_CONSUMER_CLIENT_OFFSET (220, oneway, header topic,
group, timestamp, isForce=false, queueId=-1; body ResetOffsetBody, or ResetOffsetBodyForC's list
when the admin spoke as CPP), so running consumers rewind at once. Java consumers handle it
in `MQClientInstance.resetOffset`, pocketmq's in `ClientInstance`.

GET_CONSUMER_STATUS asks every online member (or the one `clientAddr` names) for its offsets
of the topic with GET_CONSUMER_STATUS_FROM_CLIENT (221) and answers them by client id, as
`Broker2Client.getConsumeStatus`: no member online answers SYSTEM_ERROR, and a member that
does not answer is left out.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pocketmq.broker.clients import CLIENT_ANSWER_TIMEOUT_S, ClientRegistry
from pocketmq.broker.groups import SubscriptionGroupTable
from pocketmq.broker.headers import (
    answers_header_errors,
    error_response,
    optional_bool,
    optional_int,
    optional_long,
    required_long,
    required_text,
)
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.common.fastjson import FastjsonError, parse_fastjson_any_keys
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ResetOffsetHeader:
    """`ResetOffsetRequestHeader`."""

    topic: str
    group: str
    timestamp_ms: int
    force: bool
    queue_id: int
    offset: int | None

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> ResetOffsetHeader:
        """Raises `HeaderError` for a missing or bad field."""
        queue_id = optional_int(ext_fields, "queueId")
        return cls(
            required_text(ext_fields, "topic"),
            required_text(ext_fields, "group"),
            required_long(ext_fields, "timestamp"),
            bool(optional_bool(ext_fields, "isForce")),
            -1 if queue_id is None else queue_id,
            optional_long(ext_fields, "offset"),
        )


def queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A `MessageQueue` as fastjson writes it in key position: an object, fields by name."""
    return json.dumps(
        {"brokerName": broker_name, "queueId": queue_id, "topic": topic},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def encode_offset_map(topic: str, broker_name: str, offsets: Mapping[int, int]) -> str:
    """A fastjson `Map<MessageQueue, Long>`, queues in id order."""
    entries = [f"{queue_key(topic, broker_name, q)}:{o}" for q, o in sorted(offsets.items())]
    return "{" + ",".join(entries) + "}"


def encode_reset_body(topic: str, broker_name: str, offsets: Mapping[int, int]) -> bytes:
    """`ResetOffsetBody`: `{"offsetTable": {<MessageQueue>: offset}}`."""
    return ('{"offsetTable":' + encode_offset_map(topic, broker_name, offsets) + "}").encode()


def encode_reset_body_for_c(topic: str, broker_name: str, offsets: Mapping[int, int]) -> bytes:
    """`ResetOffsetBodyForC`: the same table as a list of `MessageQueueForC`."""
    rows = [
        {"brokerName": broker_name, "offset": offset, "queueId": queue_id, "topic": topic}
        for queue_id, offset in sorted(offsets.items())
    ]
    return json.dumps({"offsetTable": rows}, separators=(",", ":"), ensure_ascii=False).encode()


class OffsetResetHandlers:
    """Answers offset resets and consumer status requests of one broker."""

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetTable,
        topics: TopicTable,
        groups: SubscriptionGroupTable,
        clients: ClientRegistry,
        *,
        broker_name: str,
        is_slave: Callable[[], bool],
        persist: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._offsets = offsets
        self._topics = topics
        self._groups = groups
        self._clients = clients
        self._broker_name = broker_name
        self._is_slave = is_slave
        self._persist = persist
        self._notices: set[asyncio.Task[None]] = set()

    def handlers(self) -> dict[int, RequestHandler]:
        """The request codes these handlers answer, for the broker's dispatch table."""
        return {
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.consumer_status,
        }

    # -- INVOKE_BROKER_TO_RESET_OFFSET ------------------------------------------------------

    @answers_header_errors()
    async def reset_offset(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        header = ResetOffsetHeader.decode(request.ext_fields)
        topic, group = header.topic, header.group
        log.info(
            "offset reset by %s: topic=%s group=%s timestamp=%d isForce=%s",
            channel.remote_address if channel is not None else "-",
            topic,
            group,
            header.timestamp_ms,
            header.force,
        )
        if self._is_slave():
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker"
            )
        config = self._topics.get(topic)
        if config is None:
            return error_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist"
            )
        if group not in self._groups.groups:
            return error_response(
                request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist"
            )
        offsets: dict[int, int] = {}
        if header.queue_id >= 0:
            offset = header.offset
            if offset is not None and offset != -1:
                low = self._store.get_min_offset_in_queue(topic, header.queue_id)
                high = self._store.get_max_offset_in_queue(topic, header.queue_id)
                if (low >= 0 and offset < low) or offset > high + 1:
                    return error_response(
                        request,
                        ResponseCode.SYSTEM_ERROR,
                        f"Target offset {offset} not in consume queue range [{low}-{high}]",
                    )
            else:
                offset = self._offset_at(topic, header.queue_id, header.timestamp_ms)
            offsets[header.queue_id] = offset
        else:
            for queue_id in range(config.read_queue_nums):
                offsets[queue_id] = self._offset_at(topic, queue_id, header.timestamp_ms)
        if not offsets:
            return error_response(request, ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        for queue_id, offset in offsets.items():
            if offset >= 0:  # RocketMQ's assignResetOffset ignores a negative offset
                self._offsets.commit(group, topic, queue_id, offset)
        if self._persist is not None:
            try:
                await self._persist()
            except OSError as exc:
                log.error("consumer offsets could not be saved after a reset: %s", exc)
        self._tell_members(header, offsets, for_c=request.language == LanguageCode.CPP)
        log.info("offsets of %s in %s reset to %s", group, topic, dict(sorted(offsets.items())))
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            body=encode_reset_body(topic, self._broker_name, offsets),
        )

    def _offset_at(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        if timestamp_ms < 0:
            return self._store.get_max_offset_in_queue(topic, queue_id)
        return self._store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)

    def _tell_members(
        self, header: ResetOffsetHeader, offsets: Mapping[int, int], *, for_c: bool
    ) -> None:
        members = self._clients.consumer_channels(header.group)
        if not members:
            return
        encode = encode_reset_body_for_c if for_c else encode_reset_body
        body = encode(header.topic, self._broker_name, offsets)
        fields = {
            "topic": header.topic,
            "group": header.group,
            "timestamp": str(header.timestamp_ms),
            "isForce": "false",
            "queueId": "-1",
        }
        loop = asyncio.get_running_loop()
        for member in members:
            request = RemotingCommand.request(
                RequestCode.RESET_CONSUMER_CLIENT_OFFSET, fields, body, oneway=True
            )
            task = loop.create_task(_send_oneway(member, request, header.group))
            self._notices.add(task)
            task.add_done_callback(self._notices.discard)

    # -- INVOKE_BROKER_TO_GET_CONSUMER_STATUS -----------------------------------------------

    @answers_header_errors()
    async def consumer_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        fields = request.ext_fields
        topic = required_text(fields, "topic")
        group = required_text(fields, "group")
        wanted = fields.get("clientAddr") or ""
        info = self._clients.consumer_groups.get(group)
        if info is None or not info.clients:
            return error_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"No Any Consumer online in the consumer group: [{group}]",
            )
        asked = [
            (client_id, member.channel)
            for client_id, member in sorted(info.clients.items())
            if not wanted or client_id == wanted
        ]
        answers = await asyncio.gather(
            *(_client_offsets(member, topic, group) for _, member in asked)
        )
        tables = {
            client_id: table
            for (client_id, _), table in zip(asked, answers, strict=True)
            if table is not None
        }
        entries = [f"{json.dumps(c, ensure_ascii=False)}:{t}" for c, t in tables.items()]
        body = '{"consumerTable":{' + ",".join(entries) + '},"messageQueueTable":{}}'
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())


async def _send_oneway(channel: Any, request: RemotingCommand, group: str) -> None:
    try:
        await channel.invoke_oneway(request)
    except (RemotingError, ConnectionError) as exc:
        log.warning(
            "could not tell %s of group %s about the reset: %s", channel.remote_address, group, exc
        )


async def _client_offsets(channel: Any, topic: str, group: str) -> str | None:
    """A member's `messageQueueTable` for `topic`, re-encoded as fastjson, or None."""
    request = RemotingCommand.request(
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": topic, "group": group}
    )
    try:
        response = await channel.invoke(request, CLIENT_ANSWER_TIMEOUT_S)
    except (RemotingError, ConnectionError, TimeoutError) as exc:
        log.warning("consumer status of %s: %s", channel.remote_address, exc)
        return None
    if response.code != ResponseCode.SUCCESS or not response.body:
        return None
    try:
        document = parse_fastjson_any_keys(response.body)
    except FastjsonError as exc:
        log.warning("consumer status of %s is not JSON: %s", channel.remote_address, exc)
        return None
    table = document.get("messageQueueTable") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        return "{}"
    entries = []
    for key, offset in table.items():
        fields = dict(key) if isinstance(key, tuple) else {}
        queue_id = fields.get("queueId")
        if not isinstance(queue_id, int) or not isinstance(offset, int):
            continue
        queue = queue_key(str(fields.get("topic")), str(fields.get("brokerName")), queue_id)
        entries.append(f"{queue}:{offset}")
    return "{" + ",".join(entries) + "}"
