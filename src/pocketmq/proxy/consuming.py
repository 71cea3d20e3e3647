"""The consuming RPCs: ReceiveMessage (a POP at the broker), AckMessage,
ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue, and the offset calls of pull-style
clients.

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
from typing import Any, Final

import grpc

from pocketmq.client.errors import RocketMQError
from pocketmq.client.pop import PopError
from pocketmq.common.codes import RequestCode
from pocketmq.common.constants import PERM_READ
from pocketmq.common.receipt_handle import HandleError, ReceiptHandle
from pocketmq.proxy.brokers import Brokers
from pocketmq.proxy.convert import duration_ms, incoming
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc
from pocketmq.proxy.requests import (
    ProxySettings,
    check_group,
    check_topic,
    client_id,
    now_timestamp,
    overall,
    status_of,
)
from pocketmq.proxy.sessions import Sessions
from pocketmq.proxy.status import ProxyError, ok

log = logging.getLogger(__name__)

MAX_POP_NUMS: Final = 32


class Consuming:
    def __init__(self, brokers: Brokers, settings: ProxySettings, sessions: Sessions) -> None:
        self.brokers = brokers
        self.settings = settings
        self.sessions = sessions
        self._round_robin = itertools.count()

    async def ReceiveMessage(
        self, request: rpc.ReceiveMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        now_ms = int(time.time() * 1000)
        try:
            messages = await self._receive(request, context)
        except ProxyError as exc:
            yield rpc.ReceiveMessageResponse(status=exc.status())
            yield rpc.ReceiveMessageResponse(delivery_timestamp=now_timestamp())
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
        yield rpc.ReceiveMessageResponse(delivery_timestamp=now_timestamp())

    async def _receive(
        self, request: rpc.ReceiveMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> list[v2.Message]:
        config = self.settings
        session = self.sessions.get(client_id(context))
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
        check_topic(topic)
        check_group(group)
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
            check_topic(request.topic.name)
            check_group(request.group.name)
        except ProxyError as exc:
            return rpc.AckMessageResponse(status=exc.status())
        # Each entry is its own ACK_MESSAGE to its broker; they go out together.
        entries = await asyncio.gather(
            *(self._ack_one(request, entry) for entry in request.entries)
        )
        return rpc.AckMessageResponse(status=overall(entries), entries=entries)

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
        except (ProxyError, PopError, RocketMQError) as exc:
            status = status_of(exc)
        return rpc.AckMessageResultEntry(
            message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=status
        )

    async def ChangeInvisibleDuration(
        self,
        request: rpc.ChangeInvisibleDurationRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> rpc.ChangeInvisibleDurationResponse:
        try:
            check_topic(request.topic.name)
            check_group(request.group.name)
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
        except (ProxyError, PopError, RocketMQError) as exc:
            return rpc.ChangeInvisibleDurationResponse(status=status_of(exc))
        return rpc.ChangeInvisibleDurationResponse(
            status=ok(), receipt_handle=f"{new_handle} {handle.commit_log_offset}"
        )

    async def ForwardMessageToDeadLetterQueue(
        self,
        request: rpc.ForwardMessageToDeadLetterQueueRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        try:
            check_topic(request.topic.name)
            check_group(request.group.name)
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
        except (ProxyError, PopError, RocketMQError) as exc:
            return rpc.ForwardMessageToDeadLetterQueueResponse(status=status_of(exc))
        return rpc.ForwardMessageToDeadLetterQueueResponse(status=ok())

    # -- offsets (pull-style clients) ---------------------------------------------------------

    async def _queue_broker(self, queue: v2.MessageQueue) -> str:
        check_topic(queue.topic.name)
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
            check_group(request.group.name)
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
            check_group(request.group.name)
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
