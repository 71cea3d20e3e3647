"""`apache.rocketmq.v2.MessagingService`: each RPC of the 5.x clients turned into broker requests,
answered as RocketMQ's proxy answers (every response carries a v2 status; the gRPC call itself
ends OK, except a Telemetry stream that cannot go on).

Receipt handles are the broker's POP handle with the message's CommitLog offset appended; the
proxy refuses an expired one (INVALID_RECEIPT_HANDLE) before asking the broker, and the broker
refuses one that names no message in flight (which the proxy answers the same way).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final

import grpc

from pocketmq.client.errors import RocketMQError
from pocketmq.client.pop import PopError
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.recall_handle import RecallHandleError, decode_recall_handle
from pocketmq.common.receipt_handle import HandleError, ReceiptHandle
from pocketmq.common.stored_message import MessageDecodeError, decode_record
from pocketmq.common.topic_names import TopicError, is_system_topic, validate_topic_name
from pocketmq.proxy.brokers import Brokers, commit_log_offset_of
from pocketmq.proxy.convert import (
    SendLimits,
    duration_ms,
    duration_of,
    fifo_queue,
    incoming,
    outgoing,
)
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc
from pocketmq.proxy.grpc_v2 import service_pb2_grpc
from pocketmq.proxy.sessions import Session, Sessions
from pocketmq.proxy.status import ProxyError, ok

log = logging.getLogger(__name__)

MESSAGE_TYPE_ATTRIBUTE: Final = "message.type"
TOPIC_TYPES: Final = {
    "NORMAL": [v2.NORMAL],
    "FIFO": [v2.FIFO],
    "DELAY": [v2.DELAY],
    "TRANSACTION": [v2.TRANSACTION],
    "MIXED": [v2.NORMAL, v2.FIFO, v2.DELAY, v2.TRANSACTION],
}
CUSTOMIZED_BACKOFF_S: Final = (
    1,
    5,
    10,
    30,
    60,
    120,
    180,
    240,
    300,
    360,
    420,
    480,
    540,
    600,
    1200,
    1800,
    3600,
    7200,
)
MAX_POP_NUMS: Final = 32
TRANSACTION_COMMIT: Final = 8
TRANSACTION_ROLLBACK: Final = 12


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


def _client_id(context: grpc.aio.ServicerContext[Any, Any]) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == "x-mq-client-id":
            return str(value)
    return ""


def _check_topic(name: str) -> None:
    try:
        validate_topic_name(name)
    except TopicError as exc:
        raise ProxyError(v2.ILLEGAL_TOPIC, f"topic name {name!r} is illegal: {exc}") from None
    if is_system_topic(name):
        raise ProxyError(v2.ILLEGAL_TOPIC, f"topic {name} is a system topic")


def _check_group(name: str) -> None:
    if not name or len(name) > 255 or not all(c.isalnum() or c in "%|-_" for c in name):
        raise ProxyError(v2.ILLEGAL_CONSUMER_GROUP, f"consumer group {name!r} is illegal")


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(
        self, brokers: Brokers, settings: ProxySettings, *, advertised: tuple[str, int]
    ) -> None:
        self.brokers = brokers
        self.settings = settings
        self.advertised = advertised
        """The address clients are told to use (QueryRoute's endpoints): the proxy's own."""
        self.sessions = Sessions()
        self._round_robin = itertools.count()
        brokers.on_check = self._on_check

    # -- routes -------------------------------------------------------------------------

    def _endpoints(self, asked: v2.Endpoints | None) -> v2.Endpoints:
        host, port = self.advertised
        if asked is not None and asked.addresses:
            host = asked.addresses[0].host
        return v2.Endpoints(scheme=v2.IPv4, addresses=[v2.Address(host=host, port=port)])

    async def _accepted_types(self, topic: str) -> list[Any]:
        attributes = await self.brokers.topic_attributes(topic)
        if attributes is None:
            return [v2.MESSAGE_TYPE_UNSPECIFIED]
        kind = attributes.get(MESSAGE_TYPE_ATTRIBUTE, attributes.get("+" + MESSAGE_TYPE_ATTRIBUTE))
        return TOPIC_TYPES.get((kind or "NORMAL").upper(), [v2.MESSAGE_TYPE_UNSPECIFIED])

    async def QueryRoute(
        self, request: rpc.QueryRouteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.QueryRouteResponse:
        try:
            _check_topic(request.topic.name)
            route = await self.brokers.route(request.topic.name)
            types = await self._accepted_types(request.topic.name)
        except ProxyError as exc:
            return rpc.QueryRouteResponse(status=exc.status())
        endpoints = self._endpoints(request.endpoints)
        masters = self.brokers.masters(route)
        queues = []
        for data in route.queue_datas:
            if data.broker_name not in masters:
                continue
            broker = v2.Broker(name=data.broker_name, id=0, endpoints=endpoints)
            for queue_id, permission in _queue_permissions(
                data.perm, data.read_queue_nums, data.write_queue_nums
            ):
                queues.append(
                    v2.MessageQueue(
                        topic=request.topic,
                        id=queue_id,
                        permission=permission,
                        broker=broker,
                        accept_message_types=types,
                    )
                )
        return rpc.QueryRouteResponse(status=ok(), message_queues=queues)

    async def QueryAssignment(
        self, request: rpc.QueryAssignmentRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.QueryAssignmentResponse:
        try:
            _check_topic(request.topic.name)
            _check_group(request.group.name)
            route = await self.brokers.route(request.topic.name)
            group = await self.brokers.group_settings(request.group.name, request.topic.name)
        except ProxyError as exc:
            return rpc.QueryAssignmentResponse(status=exc.status())
        endpoints = self._endpoints(request.endpoints)
        masters = self.brokers.masters(route)
        assignments = []
        for data in route.queue_datas:
            if data.broker_name not in masters or not data.perm & PERM_READ:
                continue
            broker = v2.Broker(name=data.broker_name, id=0, endpoints=endpoints)
            ids = range(data.read_queue_nums) if group.orderly else [-1]
            for queue_id in ids:
                queue = v2.MessageQueue(
                    topic=request.topic,
                    id=queue_id,
                    permission=_permission(data.perm),
                    broker=broker,
                )
                assignments.append(v2.Assignment(message_queue=queue))
        if not assignments:
            return rpc.QueryAssignmentResponse(
                status=v2.Status(code=v2.FORBIDDEN, message="no readable queue")
            )
        return rpc.QueryAssignmentResponse(status=ok(), assignments=assignments)

    # -- clients ------------------------------------------------------------------------

    async def Heartbeat(
        self, request: rpc.HeartbeatRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.HeartbeatResponse:
        session = self.sessions.get(_client_id(context))
        if session is None or session.settings is None:
            return rpc.HeartbeatResponse(
                status=v2.Status(
                    code=v2.UNRECOGNIZED_CLIENT_TYPE,
                    message="cannot find client settings for this client",
                )
            )
        return rpc.HeartbeatResponse(status=ok())

    async def NotifyClientTermination(
        self,
        request: rpc.NotifyClientTerminationRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> rpc.NotifyClientTerminationResponse:
        session = self.sessions.close(_client_id(context))
        if session is None:
            return rpc.NotifyClientTerminationResponse(
                status=v2.Status(
                    code=v2.UNRECOGNIZED_CLIENT_TYPE,
                    message="cannot find client settings for this client",
                )
            )
        self._sync_producer_groups()
        return rpc.NotifyClientTerminationResponse(status=ok())

    async def Telemetry(
        self,
        request_iterator: AsyncIterator[rpc.TelemetryCommand],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[rpc.TelemetryCommand]:
        client_id = _client_id(context)
        if not client_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "x-mq-client-id is required")
        session = self.sessions.open(client_id)
        session.streams += 1
        reader = asyncio.create_task(self._read_telemetry(session, request_iterator, context))
        try:
            while True:
                getter = asyncio.ensure_future(session.outbox.get())
                done, _ = await asyncio.wait({getter, reader}, return_when=asyncio.FIRST_COMPLETED)
                if getter in done:
                    yield getter.result()
                    continue
                getter.cancel()
                break
        finally:
            session.streams -= 1
            reader.cancel()

    async def _read_telemetry(
        self,
        session: Session,
        commands: AsyncIterator[rpc.TelemetryCommand],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> None:
        async for command in commands:
            kind = command.WhichOneof("command")
            if kind == "settings":
                try:
                    reply = await self._settings(session, command.settings)
                except ProxyError as exc:
                    await session.outbox.put(rpc.TelemetryCommand(status=exc.status()))
                    continue
                await session.outbox.put(rpc.TelemetryCommand(status=ok(), settings=reply))
            elif kind in ("thread_stack_trace", "verify_message_result"):
                log.debug("telemetry %s from %s", kind, session.client_id)

    async def _settings(self, session: Session, settings: v2.Settings) -> v2.Settings:
        reply = v2.Settings()
        reply.CopyFrom(settings)
        config = self.settings
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                _check_topic(topic.name)
            reply.publishing.max_body_size = config.limits.max_body_size
            reply.publishing.validate_message_type = config.enable_topic_message_type_check
            reply.backoff_policy.CopyFrom(
                v2.RetryPolicy(
                    max_attempts=config.producer_max_attempts,
                    exponential_backoff=v2.ExponentialBackoff(
                        initial=duration_of(config.producer_backoff_initial_ms),
                        max=duration_of(config.producer_backoff_max_ms),
                        multiplier=config.producer_backoff_multiplier,
                    ),
                )
            )
            session.settings = reply
            self._sync_producer_groups()
        elif settings.HasField("subscription"):
            group = settings.subscription.group.name
            _check_group(group)
            first = next((s.topic.name for s in settings.subscription.subscriptions), "")
            group_settings = await self.brokers.group_settings(group, first)
            reply.subscription.fifo = group_settings.orderly
            reply.subscription.receive_batch_size = config.consumer_batch_size
            reply.subscription.long_polling_timeout.CopyFrom(
                duration_of(config.consumer_max_polling_ms)
            )
            reply.backoff_policy.CopyFrom(
                v2.RetryPolicy(
                    max_attempts=group_settings.retry_max_times + 1,
                    customized_backoff=v2.CustomizedBackoff(
                        next=[duration_of(s * 1000) for s in CUSTOMIZED_BACKOFF_S]
                    ),
                )
            )
            session.settings = reply
        else:
            raise ProxyError(
                v2.BAD_REQUEST, "there is no publishing or subscription data in settings"
            )
        return reply

    def _sync_producer_groups(self) -> None:
        """The proxy is the producer (group = topic) of every topic a client publishes to, so
        that the brokers' transaction checks come to it."""
        wanted = self.sessions.topics_in_use()
        instance = self.brokers.instance
        for topic in wanted - instance.producer_groups:
            instance.add_producer(topic)
        for topic in instance.producer_groups - wanted:
            instance.remove_producer(topic)
        asyncio.get_running_loop().create_task(self._heartbeat())

    async def _heartbeat(self) -> None:
        try:
            await self.brokers.instance.send_heartbeats()
        except RocketMQError as exc:
            log.warning("heartbeat to the brokers failed: %s", exc)

    # -- sending ------------------------------------------------------------------------

    async def SendMessage(
        self, request: rpc.SendMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.SendMessageResponse:
        try:
            if not request.messages:
                raise ProxyError(v2.MESSAGE_CORRUPTED, "no message to send")
            topic = request.messages[0].topic.name
            _check_topic(topic)
            now = int(time.time() * 1000)
            built = []
            for sent_message in request.messages:
                if sent_message.topic.name != topic:
                    raise ProxyError(v2.MESSAGE_CORRUPTED, "all messages must have one topic")
                built.append(outgoing(sent_message, now, self.settings.limits))
            route = await self.brokers.route(topic)
            if self.settings.enable_topic_message_type_check:
                accepted = await self._accepted_types(topic)
                for message in built:
                    if message.message_type not in accepted:
                        raise ProxyError(
                            v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                            f"topic {topic} takes {_type_names(accepted)} messages, this one "
                            f"is {_type_names([message.message_type])}",
                        )
        except ProxyError as exc:
            return rpc.SendMessageResponse(status=exc.status())
        masters = self.brokers.masters(route)
        queues = sorted(
            (data.broker_name, queue_id)
            for data in route.queue_datas
            if data.broker_name in masters and data.perm & PERM_WRITE
            for queue_id in range(data.write_queue_nums)
        )
        if not queues:
            return rpc.SendMessageResponse(
                status=v2.Status(code=v2.FORBIDDEN, message="no writable queue")
            )
        entries = []
        for message in built:
            if message.message_group is not None and len(built) == 1:
                broker_name, queue_id = queues[fifo_queue(message.message_group, len(queues))]
            else:
                broker_name, queue_id = queues[next(self._round_robin) % len(queues)]
            address = masters[broker_name]
            try:
                sent = await self.brokers.send(
                    address,
                    broker_name,
                    queue_id,
                    topic=topic,
                    body=message.body,
                    properties=message.properties,
                    sys_flag=message.sys_flag,
                    born_timestamp=message.born_timestamp,
                )
            except ProxyError as exc:
                entries.append(rpc.SendResultEntry(status=exc.status()))
                continue
            if message.message_type == v2.TRANSACTION:
                self.sessions.remember_transaction(
                    topic,
                    sent.transaction_id,
                    broker_address=address,
                    queue_offset=sent.queue_offset,
                    commit_log_offset=commit_log_offset_of(sent.offset_msg_id),
                    message_id=sent.message_id,
                )
            entries.append(
                rpc.SendResultEntry(
                    status=ok(),
                    message_id=sent.message_id,
                    transaction_id=sent.transaction_id
                    if message.message_type == v2.TRANSACTION
                    else "",
                    offset=sent.queue_offset,
                    recall_handle=sent.recall_handle,
                )
            )
        return rpc.SendMessageResponse(status=_overall(entries), entries=entries)

    async def RecallMessage(
        self, request: rpc.RecallMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.RecallMessageResponse:
        try:
            _check_topic(request.topic.name)
            try:
                handle = decode_recall_handle(request.recall_handle)
            except RecallHandleError as exc:
                raise ProxyError(v2.BAD_REQUEST, str(exc)) from None
            route = await self.brokers.route(request.topic.name)
            address = self.brokers.masters(route).get(handle.broker_name)
            if address is None:
                raise ProxyError(
                    v2.BAD_REQUEST, f"broker {handle.broker_name} of the handle is unknown"
                )
            answer = await self.brokers.request(
                address,
                RequestCode.RECALL_MESSAGE,
                {
                    "producerGroup": request.topic.name,
                    "topic": request.topic.name,
                    "recallHandle": request.recall_handle,
                },
                "recall failed",
            )
        except ProxyError as exc:
            return rpc.RecallMessageResponse(status=exc.status())
        return rpc.RecallMessageResponse(status=ok(), message_id=answer.get("msgId", ""))

    # -- offsets (pull-style clients) ---------------------------------------------------------

    async def _queue_broker(self, queue: v2.MessageQueue) -> str:
        _check_topic(queue.topic.name)
        route = await self.brokers.route(queue.topic.name)
        masters = self.brokers.masters(route)
        address = masters.get(queue.broker.name) or next(iter(masters.values()), None)
        if address is None:
            raise ProxyError(v2.FORBIDDEN, f"no broker serves {queue.topic.name}")
        return address

    async def GetOffset(
        self, request: rpc.GetOffsetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.GetOffsetResponse:
        try:
            _check_group(request.group.name)
            queue = request.message_queue
            answer = await self.brokers.request(
                await self._queue_broker(queue),
                RequestCode.QUERY_CONSUMER_OFFSET,
                {
                    "consumerGroup": request.group.name,
                    "topic": queue.topic.name,
                    "queueId": str(queue.id),
                },
                "no offset",
            )
        except ProxyError as exc:
            return rpc.GetOffsetResponse(status=exc.status())
        return rpc.GetOffsetResponse(status=ok(), offset=int(answer.get("offset", "0")))

    async def UpdateOffset(
        self, request: rpc.UpdateOffsetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.UpdateOffsetResponse:
        try:
            _check_group(request.group.name)
            queue = request.message_queue
            await self.brokers.request(
                await self._queue_broker(queue),
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {
                    "consumerGroup": request.group.name,
                    "topic": queue.topic.name,
                    "queueId": str(queue.id),
                    "commitOffset": str(request.offset),
                },
                "offset not committed",
            )
        except ProxyError as exc:
            return rpc.UpdateOffsetResponse(status=exc.status())
        return rpc.UpdateOffsetResponse(status=ok())

    async def QueryOffset(
        self, request: rpc.QueryOffsetRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.QueryOffsetResponse:
        queue = request.message_queue
        fields = {"topic": queue.topic.name, "queueId": str(queue.id)}
        policy = request.query_offset_policy
        if policy == v2.BEGINNING:
            code = RequestCode.GET_MIN_OFFSET
        elif policy == v2.TIMESTAMP:
            code = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP
            fields["timestamp"] = str(request.timestamp.ToMilliseconds())
        else:
            code = RequestCode.GET_MAX_OFFSET
        try:
            answer = await self.brokers.request(
                await self._queue_broker(queue), code, fields, "offset not found"
            )
        except ProxyError as exc:
            return rpc.QueryOffsetResponse(status=exc.status())
        return rpc.QueryOffsetResponse(status=ok(), offset=int(answer.get("offset", "0")))

    async def EndTransaction(
        self, request: rpc.EndTransactionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.EndTransactionResponse:
        try:
            _check_topic(request.topic.name)
            if not request.transaction_id.strip():
                raise ProxyError(v2.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
            data = self.sessions.transaction(request.topic.name, request.transaction_id)
            if data is None:
                raise ProxyError(
                    v2.INTERNAL_SERVER_ERROR,
                    f"no transaction {request.transaction_id} of topic {request.topic.name} is "
                    "known here (it expired, or was ended already)",
                )
            kind = {
                v2.COMMIT: TRANSACTION_COMMIT,
                v2.ROLLBACK: TRANSACTION_ROLLBACK,
            }.get(request.resolution, 0)
            await self.brokers.end_transaction(
                data.broker_address,
                {
                    "topic": request.topic.name,
                    "producerGroup": request.topic.name,
                    "tranStateTableOffset": str(data.queue_offset),
                    "commitLogOffset": str(data.commit_log_offset),
                    "commitOrRollback": str(kind),
                    "fromTransactionCheck": str(request.source == v2.SOURCE_SERVER_CHECK).lower(),
                    "msgId": request.message_id or data.message_id,
                    "transactionId": request.transaction_id,
                },
            )
        except ProxyError as exc:
            return rpc.EndTransactionResponse(status=exc.status())
        return rpc.EndTransactionResponse(status=ok())

    async def _on_check(self, fields: dict[str, str], body: bytes, broker_address: str) -> None:
        """A broker asks about a half: a producer of its topic is asked over Telemetry."""
        try:
            stored = decode_record(body, check_crc=False)
        except MessageDecodeError as exc:
            log.warning("a transaction check with a bad message from %s: %s", broker_address, exc)
            return
        topic = stored.properties.get("REAL_TOPIC", stored.topic)
        producers = self.sessions.producers_of(topic)
        if not producers:
            log.debug("transaction check for %s: no producer of it is connected", topic)
            return
        transaction_id = fields.get("transactionId") or stored.properties.get("UNIQ_KEY", "")
        message_id = fields.get("msgId") or stored.properties.get("UNIQ_KEY", "")
        self.sessions.remember_transaction(
            topic,
            transaction_id,
            broker_address=broker_address,
            queue_offset=int(fields.get("tranStateTableOffset", "0")),
            commit_log_offset=int(fields.get("commitLogOffset", "0")),
            message_id=message_id,
        )
        stored.topic = topic
        message = incoming(stored, topic, None, int(time.time() * 1000))
        session = producers[next(self._round_robin) % len(producers)]
        await session.outbox.put(
            rpc.TelemetryCommand(
                status=ok(),
                recover_orphaned_transaction_command=rpc.RecoverOrphanedTransactionCommand(
                    message=message, transaction_id=transaction_id
                ),
            )
        )

    # -- consuming ----------------------------------------------------------------------

    async def ReceiveMessage(
        self, request: rpc.ReceiveMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        now_ms = int(time.time() * 1000)
        try:
            messages = await self._receive(request, context)
        except ProxyError as exc:
            yield rpc.ReceiveMessageResponse(status=exc.status())
            yield rpc.ReceiveMessageResponse(delivery_timestamp=_now_timestamp())
            return
        if not messages:
            yield rpc.ReceiveMessageResponse(
                status=v2.Status(code=v2.MESSAGE_NOT_FOUND, message="no new message")
            )
        else:
            yield rpc.ReceiveMessageResponse(status=ok())
            for message in messages:
                yield rpc.ReceiveMessageResponse(message=message)
        del now_ms
        yield rpc.ReceiveMessageResponse(delivery_timestamp=_now_timestamp())

    async def _receive(
        self, request: rpc.ReceiveMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> list[v2.Message]:
        config = self.settings
        session = self.sessions.get(_client_id(context))
        settings = session.settings if session is not None else None
        fifo = bool(settings is not None and settings.subscription.fifo)
        max_attempts = settings.backoff_policy.max_attempts if settings is not None else 17
        if request.HasField("long_polling_timeout"):
            poll_ms = duration_ms(request.long_polling_timeout)
        else:
            poll_ms = config.consumer_max_polling_ms
        poll_ms = max(config.consumer_min_polling_ms, min(poll_ms, config.consumer_max_polling_ms))
        remaining = context.time_remaining()
        if remaining is not None and poll_ms > remaining * 1000:
            if remaining * 1000 < config.consumer_min_polling_ms:
                raise ProxyError(
                    v2.ILLEGAL_POLLING_TIME,
                    "the deadline leaves too little time for long polling",
                )
            poll_ms = int(remaining * 1000) - 200
        if request.auto_renew or not request.HasField("invisible_duration"):
            invisible_ms = config.default_invisible_ms
        else:
            invisible_ms = duration_ms(request.invisible_duration)
            if not config.min_invisible_ms <= invisible_ms <= config.max_invisible_ms:
                raise ProxyError(
                    v2.ILLEGAL_INVISIBLE_TIME,
                    f"the invisible time must be within [{config.min_invisible_ms}, "
                    f"{config.max_invisible_ms}] ms",
                )
        topic = request.message_queue.topic.name
        group = request.group.name
        _check_topic(topic)
        _check_group(group)
        expression = request.filter_expression.expression or "*"
        route = await self.brokers.route(topic)
        masters = self.brokers.masters(route)
        readable = [
            data.broker_name
            for data in route.queue_datas
            if data.broker_name in masters and data.perm & PERM_READ
        ]
        if not readable:
            raise ProxyError(v2.FORBIDDEN, "no readable queue")
        wanted = request.message_queue.broker.name
        broker_name = (
            wanted if wanted in readable else readable[next(self._round_robin) % len(readable)]
        )
        address = masters[broker_name]
        result = await self.brokers.pop(
            address,
            broker_name,
            group,
            topic,
            max_nums=max(1, min(request.batch_size or config.consumer_batch_size, MAX_POP_NUMS)),
            invisible_ms=invisible_ms,
            poll_ms=poll_ms,
            expression=expression,
            order=fifo,
            init_max=True,
        )
        now_ms = int(time.time() * 1000)
        messages = []
        for popped in result.messages:
            stored = popped.message
            handle = f"{popped.handle} {stored.physical_offset}"
            if stored.reconsume_times >= max_attempts and not fifo:
                await self._to_dead_letters(address, group, topic, handle, stored)
                continue
            messages.append(incoming(stored, topic, handle, now_ms))
        return messages

    async def _to_dead_letters(
        self, address: str, group: str, topic: str, handle: str, stored: Any
    ) -> None:
        message_id = stored.properties.get("UNIQ_KEY", "")
        try:
            await self.brokers.send_back_to_dlq(
                address, group, stored.physical_offset, topic, message_id
            )
            await self.brokers.pop_client(group, "").ack(address, topic, handle)
        except (ProxyError, PopError, RocketMQError) as exc:
            log.warning(
                "moving %s of %s to the DLQ of %s failed: %s", message_id, topic, group, exc
            )

    def _handle(self, text: str) -> ReceiptHandle:
        try:
            handle = ReceiptHandle.parse(text)
        except HandleError as exc:
            raise ProxyError(
                v2.INVALID_RECEIPT_HANDLE, f"receipt handle is malformed: {exc}"
            ) from None
        if handle.next_visible_time <= int(time.time() * 1000):
            raise ProxyError(v2.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        return handle

    async def _broker_of(self, topic: str, handle: ReceiptHandle) -> str:
        route = await self.brokers.route(topic)
        address = self.brokers.masters(route).get(handle.broker_name)
        if address is None:
            raise ProxyError(
                v2.INVALID_RECEIPT_HANDLE, f"broker {handle.broker_name} of the handle is unknown"
            )
        return address

    async def AckMessage(
        self, request: rpc.AckMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.AckMessageResponse:
        try:
            _check_topic(request.topic.name)
            _check_group(request.group.name)
        except ProxyError as exc:
            return rpc.AckMessageResponse(status=exc.status())
        # Each entry is its own ACK_MESSAGE to its broker; they go out together.
        entries = await asyncio.gather(
            *(self._ack_one(request, entry) for entry in request.entries)
        )
        return rpc.AckMessageResponse(status=_overall(entries), entries=entries)

    async def _ack_one(
        self, request: rpc.AckMessageRequest, entry: rpc.AckMessageEntry
    ) -> rpc.AckMessageResultEntry:
        try:
            handle = self._handle(entry.receipt_handle)
            address = await self._broker_of(request.topic.name, handle)
            await self.brokers.pop_client(request.group.name, handle.broker_name).ack(
                address, request.topic.name, entry.receipt_handle
            )
            status = ok()
        except ProxyError as exc:
            status = exc.status()
        except PopError as exc:
            status = _pop_status(exc)
        except RocketMQError as exc:
            status = v2.Status(code=v2.INTERNAL_SERVER_ERROR, message=str(exc))
        return rpc.AckMessageResultEntry(
            message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=status
        )

    async def ChangeInvisibleDuration(
        self,
        request: rpc.ChangeInvisibleDurationRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> rpc.ChangeInvisibleDurationResponse:
        try:
            _check_topic(request.topic.name)
            _check_group(request.group.name)
            invisible_ms = duration_ms(request.invisible_duration)
            if not 0 <= invisible_ms <= self.settings.max_invisible_ms:
                raise ProxyError(
                    v2.ILLEGAL_INVISIBLE_TIME,
                    f"the invisible time must be within [0, {self.settings.max_invisible_ms}] ms",
                )
            handle = self._handle(request.receipt_handle)
            address = await self._broker_of(request.topic.name, handle)
            new_handle = await self.brokers.pop_client(
                request.group.name, handle.broker_name
            ).change_invisible_time(
                address, request.topic.name, request.receipt_handle, invisible_ms
            )
        except ProxyError as exc:
            return rpc.ChangeInvisibleDurationResponse(status=exc.status())
        except PopError as exc:
            return rpc.ChangeInvisibleDurationResponse(status=_pop_status(exc))
        except RocketMQError as exc:
            return rpc.ChangeInvisibleDurationResponse(
                status=v2.Status(code=v2.INTERNAL_SERVER_ERROR, message=str(exc))
            )
        return rpc.ChangeInvisibleDurationResponse(
            status=ok(), receipt_handle=f"{new_handle} {handle.commit_log_offset}"
        )

    async def ForwardMessageToDeadLetterQueue(
        self,
        request: rpc.ForwardMessageToDeadLetterQueueRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        try:
            _check_topic(request.topic.name)
            _check_group(request.group.name)
            try:
                handle = ReceiptHandle.parse(request.receipt_handle)
            except HandleError as exc:
                raise ProxyError(v2.INVALID_RECEIPT_HANDLE, str(exc)) from None
            if handle.commit_log_offset < 0:
                raise ProxyError(v2.INVALID_RECEIPT_HANDLE, "the handle names no CommitLog offset")
            address = await self._broker_of(request.topic.name, handle)
            await self.brokers.send_back_to_dlq(
                address,
                request.group.name,
                handle.commit_log_offset,
                request.topic.name,
                request.message_id,
            )
            await self.brokers.pop_client(request.group.name, handle.broker_name).ack(
                address, request.topic.name, request.receipt_handle
            )
        except ProxyError as exc:
            return rpc.ForwardMessageToDeadLetterQueueResponse(status=exc.status())
        except PopError as exc:
            return rpc.ForwardMessageToDeadLetterQueueResponse(status=_pop_status(exc))
        return rpc.ForwardMessageToDeadLetterQueueResponse(status=ok())


def _pop_status(error: PopError) -> v2.Status:
    if error.code == ResponseCode.NO_MESSAGE:
        return v2.Status(code=v2.INVALID_RECEIPT_HANDLE, message=error.remark)
    return ProxyError.from_remoting(error.code, error.remark).status()


def _overall(entries: list[Any]) -> v2.Status:
    codes = {entry.status.code for entry in entries}
    if len(codes) == 1:
        only = entries[0].status
        return only if only.code != v2.OK else ok()
    return v2.Status(code=v2.MULTIPLE_RESULTS, message="multiple results")


def _permission(perm: int) -> Any:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return v2.READ_WRITE
    if readable:
        return v2.READ
    return v2.WRITE if writable else v2.NONE


def _queue_permissions(perm: int, read: int, write: int) -> list[tuple[int, Any]]:
    """Queue ids and permissions as RocketMQ's proxy numbers them: read-only, write-only,
    read-write, then none."""
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    kinds: list[Any] = []
    if readable and writable:
        both = min(read, write)
        kinds = [v2.READ] * (read - both) + [v2.WRITE] * (write - both) + [v2.READ_WRITE] * both
    elif writable:
        kinds = [v2.WRITE] * write
    elif readable:
        kinds = [v2.READ] * read
    else:
        kinds = [v2.NONE] * max(1, read, write)
    return list(enumerate(kinds))


def _type_names(types: list[Any]) -> str:
    return "/".join(v2.MessageType.Name(t) for t in types)


def _now_timestamp() -> Any:
    from google.protobuf.timestamp_pb2 import Timestamp

    stamp = Timestamp()
    stamp.GetCurrentTime()
    return stamp
