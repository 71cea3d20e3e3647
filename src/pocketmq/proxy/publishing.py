"""The publishing RPCs: SendMessage, EndTransaction (and the broker's transaction checks, handed
to a producer's Telemetry stream), RecallMessage."""

from __future__ import annotations

import itertools
import logging
import time
from typing import Any, Final

import grpc

from pocketmq.common.codes import RequestCode
from pocketmq.common.constants import PERM_WRITE
from pocketmq.common.recall_handle import RecallHandleError, decode_recall_handle
from pocketmq.common.stored_message import MessageDecodeError, decode_record
from pocketmq.proxy.brokers import Brokers, commit_log_offset_of
from pocketmq.proxy.convert import fifo_queue, incoming, outgoing
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.grpc_v2 import service_pb2 as rpc
from pocketmq.proxy.requests import (
    ProxySettings,
    accepted_types,
    check_topic,
    overall,
    type_names,
)
from pocketmq.proxy.sessions import Sessions
from pocketmq.proxy.status import ProxyError, ok

log = logging.getLogger(__name__)

TRANSACTION_COMMIT: Final = 8
TRANSACTION_ROLLBACK: Final = 12


class Publishing:
    def __init__(self, brokers: Brokers, settings: ProxySettings, sessions: Sessions) -> None:
        self.brokers = brokers
        self.settings = settings
        self.sessions = sessions
        self._round_robin = itertools.count()
        brokers.on_check = self._on_check

    async def SendMessage(
        self, request: rpc.SendMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.SendMessageResponse:
        try:
            if not request.messages:
                raise ProxyError(v2.MESSAGE_CORRUPTED, "no message to send")
            topic = request.messages[0].topic.name
            check_topic(topic)
            now = int(time.time() * 1000)
            built = []
            for sent_message in request.messages:
                if sent_message.topic.name != topic:
                    raise ProxyError(v2.MESSAGE_CORRUPTED, "all messages must have one topic")
                built.append(outgoing(sent_message, now, self.settings.limits))
            route = await self.brokers.route(topic)
            if self.settings.enable_topic_message_type_check:
                accepted = await accepted_types(self.brokers, topic)
                for message in built:
                    if message.message_type not in accepted:
                        raise ProxyError(
                            v2.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                            f"topic {topic} takes {type_names(accepted)} messages, this one "
                            f"is {type_names([message.message_type])}",
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
        return rpc.SendMessageResponse(status=overall(entries), entries=entries)

    async def RecallMessage(
        self, request: rpc.RecallMessageRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.RecallMessageResponse:
        try:
            check_topic(request.topic.name)
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

    async def EndTransaction(
        self, request: rpc.EndTransactionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> rpc.EndTransactionResponse:
        try:
            check_topic(request.topic.name)
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
