"""`apache.rocketmq.v2.MessagingService`: each RPC of the 5.x clients turned into broker requests,
answered as RocketMQ's proxy answers (every response carries a v2 status; the gRPC call itself
ends OK, except a Telemetry stream that cannot go on). Routes and the clients' sessions are
here; publishing (`publishing.py`) and consuming (`consuming.py`) have modules of their own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any, Final

import grpc

from pocketmq.client.errors import RocketMQError
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.proxy.brokers import Brokers
from pocketmq.proxy.consuming import Consuming
from pocketmq.proxy.convert import duration_of
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc
from pocketmq.proxy.grpc_v2 import service_pb2_grpc
from pocketmq.proxy.publishing import Publishing
from pocketmq.proxy.requests import (
    ProxySettings,
    accepted_types,
    check_group,
    check_topic,
    client_id,
)
from pocketmq.proxy.sessions import Session, Sessions
from pocketmq.proxy.status import ProxyError, ok

log = logging.getLogger(__name__)

CUSTOMIZED_BACKOFF_S: Final = (
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200
)  # fmt: skip
"""A group's default retry delays (RocketMQ's `CustomizedRetryPolicy`), told to push consumers."""

Context = grpc.aio.ServicerContext[Any, Any]


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(
        self, brokers: Brokers, settings: ProxySettings, *, advertised: tuple[str, int]
    ) -> None:
        self.brokers = brokers
        self.settings = settings
        self.advertised = advertised
        """The address clients are told to use (QueryRoute's endpoints): the proxy's own."""
        self.sessions = Sessions()
        self.publishing = Publishing(brokers, settings, self.sessions)
        self.consuming = Consuming(brokers, settings, self.sessions)

    # -- routes -------------------------------------------------------------------------

    def _endpoints(self, asked: v2.Endpoints | None) -> v2.Endpoints:
        host, port = self.advertised
        if asked is not None and asked.addresses:
            host = asked.addresses[0].host
        return v2.Endpoints(scheme=v2.IPv4, addresses=[v2.Address(host=host, port=port)])

    async def QueryRoute(
        self, request: rpc.QueryRouteRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.QueryRouteResponse:
        try:
            check_topic(request.topic.name)
            route = await self.brokers.route(request.topic.name)
            types = await accepted_types(self.brokers, request.topic.name)
        except ProxyError as exc:
            return rpc.QueryRouteResponse(status=exc.status())
        endpoints = self._endpoints(request.endpoints)
        masters = self.brokers.masters(route)
        queues = []
        for data in route.queue_datas:
            if data.broker_name not in masters:
                continue
            broker = v2.Broker(name=data.broker_name, id=0, endpoints=endpoints)
            for queue_id, permission in queue_permissions(
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
            check_topic(request.topic.name)
            check_group(request.group.name)
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
                    permission=permission_of(data.perm),
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
        session = self.sessions.get(client_id(context))
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
        session = self.sessions.close(client_id(context))
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
        the_client = client_id(context)
        if not the_client:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "x-mq-client-id is required")
        session = self.sessions.open(the_client)
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
                check_topic(topic.name)
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
            check_group(group)
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

    # -- publishing and consuming ----------------------------------------------------------

    async def SendMessage(
        self, request: rpc.SendMessageRequest, context: Context
    ) -> rpc.SendMessageResponse:
        return await self.publishing.SendMessage(request, context)

    async def EndTransaction(
        self, request: rpc.EndTransactionRequest, context: Context
    ) -> rpc.EndTransactionResponse:
        return await self.publishing.EndTransaction(request, context)

    async def RecallMessage(
        self, request: rpc.RecallMessageRequest, context: Context
    ) -> rpc.RecallMessageResponse:
        return await self.publishing.RecallMessage(request, context)

    async def ReceiveMessage(
        self, request: rpc.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[rpc.ReceiveMessageResponse]:
        async for response in self.consuming.ReceiveMessage(request, context):
            yield response

    async def AckMessage(
        self, request: rpc.AckMessageRequest, context: Context
    ) -> rpc.AckMessageResponse:
        return await self.consuming.AckMessage(request, context)

    async def ChangeInvisibleDuration(
        self, request: rpc.ChangeInvisibleDurationRequest, context: Context
    ) -> rpc.ChangeInvisibleDurationResponse:
        return await self.consuming.ChangeInvisibleDuration(request, context)

    async def ForwardMessageToDeadLetterQueue(
        self, request: rpc.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> rpc.ForwardMessageToDeadLetterQueueResponse:
        return await self.consuming.ForwardMessageToDeadLetterQueue(request, context)

    async def GetOffset(
        self, request: rpc.GetOffsetRequest, context: Context
    ) -> rpc.GetOffsetResponse:
        return await self.consuming.GetOffset(request, context)

    async def UpdateOffset(
        self, request: rpc.UpdateOffsetRequest, context: Context
    ) -> rpc.UpdateOffsetResponse:
        return await self.consuming.UpdateOffset(request, context)

    async def QueryOffset(
        self, request: rpc.QueryOffsetRequest, context: Context
    ) -> rpc.QueryOffsetResponse:
        return await self.consuming.QueryOffset(request, context)


def permission_of(perm: int) -> Any:
    readable, writable = bool(perm & PERM_READ), bool(perm & PERM_WRITE)
    if readable and writable:
        return v2.READ_WRITE
    if readable:
        return v2.READ
    return v2.WRITE if writable else v2.NONE


def queue_permissions(perm: int, read: int, write: int) -> list[tuple[int, Any]]:
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
