"""The asyncio producer (RocketMQ's `DefaultMQProducer`).

Sends go to the master of a queue of the topic's route. A send that fails on a broker (no
connection, timeout, or a code another broker may not give: busy, not writable, topic missing
there) is tried again on another broker, up to `retry_times` more times within one
`send_timeout_s` budget; the message keeps its unique id across attempts. When those are
spent on a broker group with no master (it failed and a DLedger group is electing another, or
the replica asked is no longer master), the send waits and tries again while its budget
lasts, so a failover inside the send timeout costs a delay, not an error. While more than 2 s
of the budget is left, one attempt takes at most half of it: a master that stopped answering
leaves time for its successor. Non-OK statuses that
still mean "stored" (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) are returned,
not retried, as RocketMQ does by default.

A topic without a route is sent through the route of `TBW102`, so a broker with
`autoCreateTopicEnable` creates it on first send.

Ordered sends (`send_orderly`) pick the queue from a sharding key (Java's `String.hashCode`
modulo the queue count, as `SelectMessageQueueByHash` does) and never move to another queue:
order matters more than availability there.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable, Sequence
from typing import Final

from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import (
    ClientConfigError,
    ConnectionFailedError,
    MessageError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
)
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import (
    Message,
    MessageQueue,
    SendResult,
    UniqueIdGenerator,
)
from pocketmq.client.producer.batcher import Batcher
from pocketmq.client.producer.fault import QueueChooser
from pocketmq.client.producer.routing import PublishRoutes
from pocketmq.client.producer.wire import (
    COMPRESS_LEVEL_DEFAULT,
    COMPRESS_OVER_BYTES_DEFAULT,
    PreparedSend,
    prepare_batch,
    prepare_message,
    read_recall_response,
    read_send_response,
    recall_request,
    split_batch_result,
)
from pocketmq.client.trace_dispatch import PRODUCE, ProducerTracer, TraceSession
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import MAX_MESSAGE_SIZE_DEFAULT
from pocketmq.common.java_hash import java_string_hash
from pocketmq.remoting.tls import TlsConfig
from pocketmq.runtime.clock import Clock, SystemClock

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_GROUP: Final = "DEFAULT_PRODUCER"
DEFAULT_TOPIC_QUEUE_NUMS: Final = 4
_RETRY_ON_ANOTHER_BROKER: Final = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
    }
)

_SPLIT_BUDGET_ABOVE_S: Final = 2.0
_FAILOVER_FIRST_PAUSE_S: Final = 0.05
_FAILOVER_MAX_PAUSE_S: Final = 0.2


def _may_fail_over(error: RocketMQError | None) -> bool:
    """A failure a new master of the same broker group cures: no master known, a connection
    that failed or went unanswered, or a replica that is no longer master."""
    return isinstance(error, ConnectionFailedError | RequestTimeoutError) or (
        error is not None and error.code == ResponseCode.SERVICE_NOT_AVAILABLE
    )


QueueSelector = Callable[[Sequence[MessageQueue], Message, object], MessageQueue]
"""Chooses the queue of an ordered send: (queues, message, argument) -> one of the queues."""


def select_by_hash(queues: Sequence[MessageQueue], message: Message, key: object) -> MessageQueue:
    """The queue of a sharding key: Java's `hashCode` (strings) or the int, modulo the count."""
    code = key if isinstance(key, int) else java_string_hash(str(key))
    return queues[abs(code) % len(queues)]


class Producer:
    """Sends messages to topics; use `async with Producer(...) as producer:`.

    Example:
        async with Producer("orders-app", namesrv="127.0.0.1:9876") as producer:
            result = await producer.send(Message("orders", b"{...}", tags="created"))
    """

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        *,
        namesrv: str | Sequence[str] | None = None,
        instance: ClientInstance | None = None,
        instance_name: str | None = None,
        send_timeout_s: float = 3.0,
        retry_times: int = 2,
        compress_over_bytes: int = COMPRESS_OVER_BYTES_DEFAULT,
        compress_level: int = COMPRESS_LEVEL_DEFAULT,
        max_message_bytes: int = MAX_MESSAGE_SIZE_DEFAULT,
        default_topic_queue_nums: int = DEFAULT_TOPIC_QUEUE_NUMS,
        auto_batch: bool = False,
        batch_linger_ms: float = 5.0,
        batch_max_bytes: int = 256 * 1024,
        batch_max_count: int = 512,
        clock: Clock | None = None,
        tls: bool | ssl.SSLContext | TlsConfig | None = None,
        credentials: SessionCredentials | None = None,
        enable_msg_trace: bool = False,
        trace_topic: str | None = None,
    ) -> None:
        """Creates a producer; `start` (or `async with`) connects it.

        Args:
            group: The producer group (transactions check back with any member of it).
            namesrv: NameServer addresses (`host:port`, several separated by `;`).
            instance: A client instance to share with other producers and consumers (then
                `namesrv` is not needed and closing this producer leaves it running).
            instance_name: Names this client in its client id (`ip@name`); distinct names
                let several clients of one group run in one process.
            send_timeout_s: The budget of one send, retries included.
            retry_times: How many more brokers a failed send tries (sync and async sends).
            compress_over_bytes: Bodies larger than this are sent zlib-compressed.
            compress_level: The zlib level for that.
            max_message_bytes: Larger bodies are refused here, before any network use.
            default_topic_queue_nums: Queues of a topic created by its first send.
            auto_batch: Gather concurrent `send`/`send_async` calls into batch requests.
            batch_linger_ms: How long a message waits for company when batching. With 0 none
                waits, and the sends made in one turn of the event loop still go together
                (under a steady load, what was sent while the last batch was on its way).
            batch_max_bytes: A topic's batch is sent once its bodies reach this size.
            batch_max_count: ... or once it holds this many messages.
            clock: Where time comes from: wall time for message fields, monotonic time for
                send budgets (tests pass a fake).
            tls: TLS to the cluster (see `ClientInstance`); ignored with `instance`.
            credentials: The ACL account requests are signed with; ignored with `instance`.
            enable_msg_trace: Write a trace record (Pub) of every answered send to the trace
                topic, as Java's `enableMsgTrace` (see `pocketmq.client.trace_dispatch`).
            trace_topic: The trace topic (Java's `customizedTraceTopic`; default
                `RMQ_SYS_TRACE_TOPIC`).

        Raises:
            ClientConfigError: neither `namesrv` nor `instance`, or a bad setting.
        """
        if instance is None and not namesrv:
            raise ClientConfigError(
                "no NameServer: pass namesrv='127.0.0.1:9876' (several separated by ';')"
            )
        if not group or not group.strip():
            raise ClientConfigError("the producer group is blank")
        if retry_times < 0 or send_timeout_s <= 0:
            raise ClientConfigError("retry_times must be >= 0 and send_timeout_s > 0")
        self.group = group
        self._owns_instance = instance is None
        self.instance = instance or ClientInstance(
            namesrv or [],
            instance_name=instance_name,
            clock=clock,
            tls=tls,
            credentials=credentials,
        )
        self.send_timeout_s = send_timeout_s
        self.retry_times = retry_times
        self.compress_over_bytes = compress_over_bytes
        self.compress_level = compress_level
        self.max_message_bytes = max_message_bytes
        self.default_topic_queue_nums = default_topic_queue_nums
        self._clock = clock or SystemClock()
        self._ids = UniqueIdGenerator(self.instance.ip, self.instance.rng.getrandbits(32))
        self._routes = PublishRoutes(self.instance, default_topic_queue_nums)
        self._chooser = QueueChooser(self.instance.rng.randrange(1 << 16))
        self._batcher = (
            Batcher(
                self._send_gathered,
                linger_ms=batch_linger_ms,
                max_bytes=batch_max_bytes,
                max_count=batch_max_count,
            )
            if auto_batch
            else None
        )
        self._pending: set[asyncio.Future[SendResult]] = set()
        self._started = False
        self._enable_msg_trace = enable_msg_trace
        self._trace_topic = trace_topic
        self._trace: TraceSession | None = None
        self._tracer: ProducerTracer | None = None  # None: trace off, no per-send work

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Registers the group and starts the shared background rounds; idempotent."""
        if self._started:
            return
        await self.instance.start()
        self._ids = UniqueIdGenerator(self.instance.ip, self.instance.rng.getrandbits(32))
        self.instance.add_producer(self.group)
        if self._enable_msg_trace:
            self._trace = await TraceSession.start(
                self.instance, self.group, PRODUCE, self._trace_topic
            )
            self._tracer = ProducerTracer(self._trace.dispatcher, self.group)
        self._started = True

    async def close(self) -> None:
        """Waits for sends in flight (batched ones included), then leaves the cluster."""
        if not self._started:
            return
        if self._batcher is not None:
            await self._batcher.close()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        trace, self._trace, self._tracer = self._trace, None, None
        if trace is not None:
            await trace.close()
        self.instance.remove_producer(self.group)
        if self._owns_instance:
            await self.instance.close()
        self._started = False

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- sending ---------------------------------------------------------------------------

    async def send(self, message: Message, *, queue: MessageQueue | None = None) -> SendResult:
        """Sends one message and waits for the broker's answer.

        Args:
            message: The message.
            queue: Send to this queue (no retry elsewhere); by default the producer chooses.

        Returns:
            The result; check `status` when flush or replication rules matter.

        Raises:
            MessageError: the message is refused (size, topic name, properties).
            TopicNotFoundError: neither the topic nor auto-creation is available.
            RocketMQError: every attempt failed; the last failure is raised.
        """
        self._check_started()
        if self._batcher is not None and queue is None and not message.delivers_later:
            return await self._batcher.add(message)
        prepared = self._prepare(message)
        if queue is not None:
            return await self._send_to_queue(prepared, queue, self.send_timeout_s)
        return await self._send_with_retries(prepared)

    def send_async(
        self,
        message: Message,
        callback: Callable[[SendResult | None, BaseException | None], object] | None = None,
    ) -> asyncio.Future[SendResult]:
        """Starts a send and returns at once; many may be in flight (pipelining).

        The caller bounds its own window (for example with a semaphore): nothing here blocks.

        Args:
            message: The message.
            callback: Called with `(result, None)` or `(None, error)` when the send ends.

        Returns:
            A future of the result; `close` waits for it.
        """
        self._check_started()
        if self._batcher is not None and not message.delivers_later:
            # Not tracked in `_pending`: the batcher's `close` resolves every future it gave.
            future = self._batcher.add(message)
        else:
            future = asyncio.ensure_future(self.send(message))
            self._pending.add(future)
            future.add_done_callback(self._pending.discard)
        if callback is not None:
            future.add_done_callback(lambda f: _call_back(f, callback))
        return future

    async def send_oneway(self, message: Message) -> None:
        """Sends without waiting for an answer: fastest, and nothing tells if it was stored.

        Raises:
            MessageError: the message is refused before sending.
            ConnectionFailedError: the chosen broker cannot be reached.
        """
        self._check_started()
        prepared = self._prepare(message)
        info = await self._routes.publish_info(prepared.topic)
        queue = self._chooser.choose(info.queues, self._clock.now_ms())
        address = await self._routes.master_address(queue.broker_name)
        header = prepared.header(
            self.group, queue, self._clock.now_ms(), self.default_topic_queue_nums
        )
        await self.instance.invoke_oneway(
            address, RequestCode.SEND_MESSAGE_V2, header, prepared.body
        )

    async def send_orderly(
        self,
        message: Message,
        sharding_key: object,
        *,
        selector: QueueSelector = select_by_hash,
    ) -> SendResult:
        """Sends to the queue `selector` picks for `sharding_key`: same key, same queue.

        Messages of one key are stored in the order of their sends if each send waits for
        the previous one. There is no retry on another queue.

        Raises:
            RocketMQError: as `send`; also when the selector returns a foreign queue.
        """
        self._check_started()
        prepared = self._prepare(message)
        info = await self._routes.publish_info(prepared.topic)
        if not info.queues:
            raise TopicNotFoundError(f"topic {prepared.topic} has no writable queue")
        queue = selector(info.queues, message, sharding_key)
        if queue not in info.queues:
            raise ClientConfigError(f"the selector chose {queue}, not a queue of the topic")
        return await self._send_to_queue(prepared, queue, self.send_timeout_s)

    async def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> SendResult:
        """Sends messages of one topic as one request: stored together in one queue.

        Returns:
            One result; `msg_id` lists every message's id separated by commas and
            `queue_offset` is the first message's.

        Raises:
            MessageError: not a valid batch (several topics, a delayed message, too large).
            RocketMQError: as `send`.
        """
        self._check_started()
        prepared = prepare_batch(
            messages, self._ids, self._clock.now_ms(), max_message_bytes=self.max_message_bytes
        )
        if queue is not None:
            return await self._send_to_queue(prepared, queue, self.send_timeout_s)
        return await self._send_with_retries(prepared)

    async def send_prepared(
        self, prepared: PreparedSend, *, queue: MessageQueue | None = None
    ) -> SendResult:
        """Sends a request prepared by the caller (`wire.prepared_batch`): for callers that
        encode many messages at once, as the Spark sink does from Arrow columns.

        Raises:
            RocketMQError: as `send`.
        """
        self._check_started()
        if queue is not None:
            return await self._send_to_queue(prepared, queue, self.send_timeout_s)
        return await self._send_with_retries(prepared)

    async def recall(self, topic: str, recall_handle: str) -> str:
        """Cancels a timer message before its delivery time (RocketMQ 5's `recallMessage`).

        The broker stores a delete marker in the message's wheel slot; once the slot is due
        the message is not delivered. A recall that reaches the broker after the slot began
        delivering changes nothing.

        Args:
            topic: The message's topic.
            recall_handle: `SendResult.recall_handle` of its send.

        Returns:
            The recalled message's id (UNIQ_KEY), as the broker confirms it.

        Raises:
            MessageError: the handle does not decode, or the topic is a retry or dead-letter
                topic.
            RocketMQError: the broker refused; the message says why (recall switched off with
                `recallMessageEnable`, the message due already, another topic or broker).
        """
        self._check_started()
        handle, header = recall_request(self.group, topic, recall_handle)
        await self._routes.publish_info(topic)
        address = await self._routes.master_address(handle.broker_name)
        response = await self.instance.invoke(
            address, RequestCode.RECALL_MESSAGE, header, timeout_s=self.send_timeout_s
        )
        return read_recall_response(response, topic, handle)

    async def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of `topic` (`fetchPublishMessageQueues`)."""
        return list((await self._routes.publish_info(topic)).queues)

    # -- internals -------------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise ClientConfigError("the producer is not started: call start() or use async with")

    def _prepare(self, message: Message) -> PreparedSend:
        return prepare_message(
            message,
            self._ids,
            self._clock.now_ms(),
            compress_over_bytes=self.compress_over_bytes,
            compress_level=self.compress_level,
            max_message_bytes=self.max_message_bytes,
        )

    async def _send_gathered(self, messages: list[Message]) -> list[SendResult]:
        prepared = prepare_batch(
            messages, self._ids, self._clock.now_ms(), max_message_bytes=self.max_message_bytes
        )
        return split_batch_result(await self._send_with_retries(prepared), prepared)

    async def _send_with_retries(self, prepared: PreparedSend) -> SendResult:
        deadline = self._clock.monotonic() + self.send_timeout_s
        info = await self._routes.publish_info(prepared.topic)
        pause_s = _FAILOVER_FIRST_PAUSE_S
        while not info.queues and info.awaiting_master:
            # Its only broker groups are between masters: wait for one within the budget.
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                raise ConnectionFailedError(
                    f"no master of topic {prepared.topic}'s brokers within "
                    f"{self.send_timeout_s:g} s: they are down or electing one"
                )
            await asyncio.sleep(min(pause_s, remaining))
            pause_s = min(pause_s * 2, _FAILOVER_MAX_PAUSE_S)
            info = await self._routes.refreshed(prepared.topic, info, keep_empty=True)
        if not info.queues:
            raise TopicNotFoundError(
                f"topic {prepared.topic} has no writable queue: check its permissions with "
                f"`pocketmq admin topicRoute -t {prepared.topic}`"
            )
        last_error: RocketMQError | None = None
        failed_broker: str | None = None
        attempt = 0
        pause_s = _FAILOVER_FIRST_PAUSE_S
        while True:
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                break
            if attempt > self.retry_times:
                # Retries spent, time left: a broker group whose master just failed elects
                # another within seconds (DLedger); wait for it within the send timeout.
                if not _may_fail_over(last_error):
                    break
                await asyncio.sleep(min(pause_s, remaining))
                pause_s = min(pause_s * 2, _FAILOVER_MAX_PAUSE_S)
                remaining = deadline - self._clock.monotonic()
                if remaining <= 0:
                    break
            if attempt:
                info = await self._routes.refreshed(prepared.topic, info)
            attempt += 1
            queue = self._chooser.choose(info.queues, self._clock.now_ms(), failed_broker)
            # Half the budget at most while much is left: a master that stopped answering
            # (paused, cut off) leaves time to find its successor and send there.
            timeout_s = remaining if remaining <= _SPLIT_BUDGET_ABOVE_S else remaining / 2
            try:
                return await self._send_to_queue(prepared, queue, timeout_s)
            except MessageError:
                raise
            except RocketMQError as exc:
                if not (exc.retriable or exc.code in _RETRY_ON_ANOTHER_BROKER):
                    raise
                log.debug("send to %s failed (attempt %d): %s", queue, attempt, exc)
                last_error = exc
                failed_broker = queue.broker_name
        if last_error is None:
            raise RequestTimeoutError(
                f"send to {prepared.topic} ran out of its {self.send_timeout_s:g} s budget"
            )
        raise last_error

    async def _send_to_queue(
        self, prepared: PreparedSend, queue: MessageQueue, timeout_s: float
    ) -> SendResult:
        address = await self._routes.master_address(queue.broker_name, queue.topic)
        header = prepared.header(
            self.group, queue, self._clock.now_ms(), self.default_topic_queue_nums
        )
        code = RequestCode.SEND_BATCH_MESSAGE if prepared.batch else RequestCode.SEND_MESSAGE_V2
        tracer = self._tracer
        if tracer is not None and not tracer.traces(prepared.topic):
            tracer = None
        started_ms = self._clock.now_ms() if tracer is not None else 0
        started = self._clock.monotonic()
        try:
            response = await self.instance.invoke(
                address, code, header, prepared.body, timeout_s=timeout_s
            )
        except RocketMQError:
            self._chooser.report(
                queue.broker_name, self._elapsed_ms(started), self._clock.now_ms(), failed=True
            )
            raise
        self._chooser.report(
            queue.broker_name, self._elapsed_ms(started), self._clock.now_ms(), failed=False
        )
        result = read_send_response(
            response, prepared, queue, f"send to {queue.broker_name} ({address})"
        )
        if tracer is not None:
            tracer.sent(
                prepared, address, started_ms, self._clock.now_ms(), response.ext_fields, result
            )
        return result

    def _elapsed_ms(self, started: float) -> float:
        return (self._clock.monotonic() - started) * 1000


def _call_back(
    future: asyncio.Future[SendResult],
    callback: Callable[[SendResult | None, BaseException | None], object],
) -> None:
    if future.cancelled():
        callback(None, asyncio.CancelledError())
    elif future.exception() is not None:
        callback(None, future.exception())
    else:
        callback(future.result(), None)


__all__ = ["Producer", "QueueSelector", "select_by_hash"]
