"""Transactional sends (RocketMQ's `TransactionMQProducer`): a message becomes visible only if a
local transaction commits.

`send_in_transaction` sends the message as a half message (TRAN_MSG=true, PGROUP=the group),
runs the listener's `execute_local_transaction`, and ends the transaction with END_TRANSACTION
(37, oneway): COMMIT_MESSAGE stores the message in its topic, ROLLBACK_MESSAGE drops it, UNKNOW
leaves it to the broker's check-back. The broker then asks some producer of the group, not
necessarily this one, with CHECK_TRANSACTION_STATE (39); `check_local_transaction` answers and
the answer travels back as END_TRANSACTION with `fromTransactionCheck=true`. So any member of a
group must be able to tell a transaction's state from the message alone (its keys, its
transaction id).

Listener methods may be coroutine functions (awaited on the loop) or plain functions (run in a
worker thread, so a slow database call does not stall the client). An exception or a None
answer counts as UNKNOW.

The check handler is shared per client instance: several transaction producers of different
groups on one instance each get the checks naming their group (PGROUP).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import inspect
import logging
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Protocol, TypeVar

from pocketmq.client.errors import ClientConfigError, ConnectionFailedError, RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import Message, MessageExt, SendResult, SendStatus
from pocketmq.client.producer.producer import Producer
from pocketmq.client.producer.wire import AUTO_CREATE_TOPIC
from pocketmq.common.codes import RequestCode
from pocketmq.common.constants import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from pocketmq.common.message_id import MessageIdError, decode_offset_msg_id
from pocketmq.common.stored_message import MessageDecodeError, decode_record
from pocketmq.common.topic_names import TRANSACTION_HALF_TOPIC
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel

log = logging.getLogger(__name__)

T = TypeVar("T")


class LocalTransactionState(enum.Enum):
    """The outcome of a local transaction (`LocalTransactionState`)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"  # sic, as RocketMQ spells it
    """Not known yet: the broker asks again later (check-back)."""


_END_TYPE: Final = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}


class TransactionListener(Protocol):
    """Runs the local transaction of a send, and tells its outcome when the broker asks.

    Either method may be `async def` or a plain function (run in a worker thread).
    """

    def execute_local_transaction(
        self, message: Message, arg: Any
    ) -> LocalTransactionState | Awaitable[LocalTransactionState]:
        """Runs the local transaction for `message` (its half is stored, not yet visible).

        `message.properties["__transactionId__"]` holds the transaction id the broker gave.
        """
        ...

    def check_local_transaction(
        self, message: MessageExt
    ) -> LocalTransactionState | Awaitable[LocalTransactionState]:
        """The outcome of the local transaction of `message`, asked by the broker for a half
        that was not ended (UNKNOW, or its producer died)."""
        ...


@dataclasses.dataclass(slots=True)
class TransactionSendResult(SendResult):
    """A send result plus the outcome of the local transaction (`TransactionSendResult`)."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    """Sends messages in transactions; use `async with TransactionProducer(...) as producer:`.

    Example:
        class Orders:
            async def execute_local_transaction(self, message, order):
                await db.insert(order)
                return LocalTransactionState.COMMIT_MESSAGE

            async def check_local_transaction(self, message):
                found = await db.find(message.keys[0])
                return LocalTransactionState.COMMIT_MESSAGE if found else ...

        async with TransactionProducer("orders-tx", Orders(), namesrv="127.0.0.1:9876") as p:
            result = await p.send_in_transaction(Message("orders", b"{...}", keys="o-1"), order)
    """

    def __init__(
        self,
        group: str,
        listener: TransactionListener,
        *,
        check_topics: Sequence[str] = (),
        **options: Any,
    ) -> None:
        """Creates a transactional producer; `start` (or `async with`) connects it.

        Args:
            group: The producer group; the broker checks back with any member of it.
            listener: Runs local transactions and answers check-backs.
            check_topics: Topics whose brokers this producer announces itself to at start, so
                it can answer check-backs before it sends anything (a replacement for a
                member that died). Brokers of TBW102 are announced to as well.
            **options: As `Producer` (namesrv, instance, send_timeout_s, ...). Transactional
                sends are never gathered into batches.

        Raises:
            ClientConfigError: see `Producer`; also a listener without the two methods.
        """
        super().__init__(group, **options)
        for name in ("execute_local_transaction", "check_local_transaction"):
            if not callable(getattr(listener, name, None)):
                raise ClientConfigError(f"the transaction listener has no {name} method")
        self.listener = listener
        self.check_topics = tuple(check_topics)
        self._checks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Starts the producer, takes the group's check-backs, and announces the group to
        the brokers of `check_topics` (and TBW102) at once."""
        if self._started:
            return
        await super().start()
        _CheckRouter.on(self.instance).add(self)
        await self._announce()

    async def close(self) -> None:
        """Stops taking check-backs, waits for answers under way, then closes as `Producer`."""
        if not self._started:
            return
        _CheckRouter.on(self.instance).remove(self)
        if self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)
        await super().close()

    async def __aenter__(self) -> TransactionProducer:
        await self.start()
        return self

    async def _announce(self) -> None:
        for topic in self.check_topics:
            self.instance.watch_topic(topic)
            try:
                await self.instance.fetch_route(topic)
            except RocketMQError as exc:
                log.warning(
                    "route of %s: %s; check-backs may wait for the next heartbeat", topic, exc
                )
        try:
            # As Java's producer: the default topic's brokers learn of the group at once.
            await self.instance.fetch_route(AUTO_CREATE_TOPIC)
        except RocketMQError as exc:
            log.debug("no route of %s: %s", AUTO_CREATE_TOPIC, exc)
        await self.instance.send_heartbeats()

    # -- sending ---------------------------------------------------------------------------

    async def send_in_transaction(self, message: Message, arg: Any = None) -> TransactionSendResult:
        """Sends `message` as a half, runs the local transaction, and ends it.

        A DELAY level is ignored, as RocketMQ ignores it for transactional messages. When the
        half was stored without meeting the flush or replication rule (FLUSH_DISK_TIMEOUT, ...)
        the local transaction is not run and the half is rolled back.

        Args:
            message: The message; its topic is where it appears on commit.
            arg: Passed to `execute_local_transaction` untouched.

        Returns:
            The half's send result and the local transaction's state. Ending the transaction
            is oneway: a lost END_TRANSACTION is settled by the check-back.

        Raises:
            MessageError, TopicNotFoundError, RocketMQError: the half could not be sent (as
                `Producer.send`); the local transaction did not run.
        """
        self._check_started()
        properties = dict(message.properties)
        properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        properties[PROPERTY_PRODUCER_GROUP] = self.group
        half = dataclasses.replace(message, properties=properties, delay_level=0)
        result = await self._send_with_retries(self._prepare(half))
        state = LocalTransactionState.UNKNOW
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            if result.transaction_id:
                half.properties[PROPERTY_TRANSACTION_ID] = result.transaction_id
            state, error = await _ask_listener(
                self.listener.execute_local_transaction, "executeLocalTransaction", half, arg
            )
            if state is not LocalTransactionState.COMMIT_MESSAGE:
                log.info(
                    "local transaction of %s (%s) says %s", result.msg_id, half.topic, state.value
                )
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end_transaction(half, result, state, error)
        except RocketMQError as exc:
            log.warning(
                "local transaction of %s says %s, but ending it on the broker failed: %s; the "
                "check-back will settle it",
                result.msg_id,
                state.value,
                exc,
            )
        return TransactionSendResult(
            status=result.status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            queue=result.queue,
            queue_offset=result.queue_offset,
            region_id=result.region_id,
            transaction_id=result.transaction_id,
            local_transaction_state=state,
        )

    async def _end_transaction(
        self,
        message: Message,
        result: SendResult,
        state: LocalTransactionState,
        error: BaseException | None,
    ) -> None:
        try:
            _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id)
        except MessageIdError as exc:
            raise ConnectionFailedError(
                f"the broker's answer has no usable offset message id: {exc}"
            ) from None
        broker_name = result.queue.broker_name
        address = await self._routes.master_address(broker_name)
        fields = {
            "topic": message.topic,
            "producerGroup": self.group,
            "tranStateTableOffset": str(result.queue_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(_END_TYPE[state]),
            "fromTransactionCheck": "false",
            "msgId": result.msg_id,
            "bname": broker_name,
        }
        if result.transaction_id:
            fields["transactionId"] = result.transaction_id
        remark = f"executeLocalTransactionBranch exception: {error!r}" if error else None
        request = RemotingCommand.request(RequestCode.END_TRANSACTION, fields, remark=remark)
        try:
            await self.instance.remoting.invoke_oneway(address, request)
        except (RemotingError, OSError) as exc:
            raise ConnectionFailedError(f"END_TRANSACTION to {address}: {exc}") from None

    # -- check-backs -----------------------------------------------------------------------

    def take_check(self, fields: dict[str, str], message: MessageExt, channel: Channel) -> None:
        """Answers one check-back in the background (`close` waits for it)."""
        task = asyncio.get_running_loop().create_task(self._answer_check(fields, message, channel))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(
        self, fields: dict[str, str], message: MessageExt, channel: Channel
    ) -> None:
        state, error = await _ask_listener(
            self.listener.check_local_transaction, "checkLocalTransaction", message
        )
        header = {
            "topic": fields.get("topic") or TRANSACTION_HALF_TOPIC,
            "producerGroup": self.group,
            "tranStateTableOffset": fields["tranStateTableOffset"],
            "commitLogOffset": fields["commitLogOffset"],
            "commitOrRollback": str(_END_TYPE[state]),
            "fromTransactionCheck": "true",
            "msgId": message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            or message.offset_msg_id,
        }
        for key in ("transactionId", "bname"):
            if fields.get(key):
                header[key] = fields[key]
        remark = f"checkLocalTransactionState Exception: {error!r}" if error else None
        log.info("check-back of %s answered %s", header["msgId"], state.value)
        try:
            await channel.invoke_oneway(
                RemotingCommand.request(RequestCode.END_TRANSACTION, header, remark=remark)
            )
        except (RemotingError, ConnectionError) as exc:
            log.warning("answering the check-back of %s failed: %s", header["msgId"], exc)


async def _ask_listener(
    method: Callable[..., Any], what: str, *args: Any
) -> tuple[LocalTransactionState, BaseException | None]:
    """Calls a listener method (awaited, or in a worker thread); failures are UNKNOW."""
    try:
        if inspect.iscoroutinefunction(method):
            answer = await method(*args)
        else:
            answer = await asyncio.to_thread(method, *args)
            if inspect.isawaitable(answer):
                answer = await answer
    except Exception as exc:  # user code: its failure is an answer (UNKNOW), not ours
        log.exception("%s raised; the transaction state is UNKNOW", what)
        return LocalTransactionState.UNKNOW, exc
    if answer is None:
        return LocalTransactionState.UNKNOW, None
    if not isinstance(answer, LocalTransactionState):
        log.warning("%s returned %r, not a LocalTransactionState; taken as UNKNOW", what, answer)
        return LocalTransactionState.UNKNOW, None
    return answer, None


class _CheckRouter:
    """The CHECK_TRANSACTION_STATE handler of one client instance: hands each check to the
    transaction producer of the group the half names (PGROUP)."""

    def __init__(self) -> None:
        self._producers: dict[str, TransactionProducer] = {}

    @classmethod
    def on(cls, instance: ClientInstance) -> _CheckRouter:
        """The instance's router, installed on first use."""
        handlers = instance.remoting.handlers
        router = handlers.get(RequestCode.CHECK_TRANSACTION_STATE)
        if not isinstance(router, _CheckRouter):
            router = cls()
            handlers[RequestCode.CHECK_TRANSACTION_STATE] = router
        return router

    def add(self, producer: TransactionProducer) -> None:
        if producer.group in self._producers:
            raise ClientConfigError(
                f"a transaction producer of group {producer.group} already runs on this client:"
                " give the second one its own instance_name"
            )
        self._producers[producer.group] = producer

    def remove(self, producer: TransactionProducer) -> None:
        if self._producers.get(producer.group) is producer:
            del self._producers[producer.group]

    async def __call__(self, request: RemotingCommand, channel: Channel) -> None:
        fields = dict(request.ext_fields)
        if "tranStateTableOffset" not in fields or "commitLogOffset" not in fields:
            log.warning("check-back from %s without offsets; ignored", channel.remote_address)
            return None
        try:
            stored = decode_record(request.body, check_crc=False)
            message = MessageExt.from_stored(stored, fields.get("bname") or "")
        except (MessageDecodeError, zlib.error) as exc:
            log.warning("check-back from %s with a bad message: %s", channel.remote_address, exc)
            return None
        group = stored.properties.get(PROPERTY_PRODUCER_GROUP)
        producer = self._producers.get(group or "")
        if producer is None:
            log.debug("check-back for group %s, which no producer here serves", group)
            return None
        producer.take_check(fields, message, channel)
        return None


__all__ = [
    "LocalTransactionState",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
]
