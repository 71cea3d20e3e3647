"""Sending a client's message-trace records (RocketMQ's `AsyncTraceDispatcher`).

A producer or push consumer with message trace on appends one `TraceContext` per send, and
two per listener call (SubBefore, SubAfter). `TraceDispatcher` keeps them in memory and, from
one background task, sends them as ordinary messages to the trace topic: every
`flush_interval_s` (100 ms), or sooner once a full body is waiting. The records of one trace
message are cut at `body_max_bytes` (128,000, Java's `maxMsgSize`); its KEYS are the message
ids and keys of the records it carries (`trace_message_keys`), which is how
`queryMsgTraceById` finds them. The trace messages go through an ordinary `Producer` on the
same client instance, in the group `_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`,
with trace off: trace messages are never traced.

Invariants: `append` never blocks and never raises (it is called on the user's send and
consume paths, also from listener threads); at most `pending_max` contexts wait, more are
dropped with a warning at most every `DROP_WARNING_INTERVAL_S`; a trace message that cannot
be sent is dropped (a warning at most as often), never retried forever; `close` sends what
is waiting.

`TraceBatcher` is the pure part (records in, bodies and keys out) and `ProducerTracer` /
`ConsumeTracer` build the contexts the hooks append.

Deliberately missing: choosing trace queues on the brokers that stored the traced messages,
and the CLOUD access channel's per-region trace topics.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pocketmq.client.message import Message, MessageExt, SendResult, SendStatus
from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MSG_REGION,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
)
from pocketmq.common.properties import decode_properties
from pocketmq.observability.trace import (
    TRACE_TOPIC_DEFAULT,
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceEncodeError,
    TraceType,
    encode_context,
    trace_message_keys,
    trace_producer_group,
)
from pocketmq.runtime.clock import Clock

if TYPE_CHECKING:
    from pocketmq.client.instance import ClientInstance
    from pocketmq.client.producer.producer import Producer
    from pocketmq.client.producer.wire import PreparedSend

log = logging.getLogger(__name__)

BODY_MAX_BYTES: Final = 128_000
"""The largest trace message body (Java `AsyncTraceDispatcher.maxMsgSize`)."""
PENDING_MAX: Final = 2048
"""Contexts waiting to be sent before new ones are dropped (Java's trace queue size)."""
FLUSH_INTERVAL_S: Final = 0.1
SEND_TIMEOUT_S: Final = 5.0
"""The budget of one trace message send (Java sends trace data with 5000 ms)."""
DROP_WARNING_INTERVAL_S: Final = 10.0
PRODUCE: Final = "PRODUCE"
CONSUME: Final = "CONSUME"

SendTrace = Callable[[str, bytes, str], Awaitable[object]]
"""Sends one trace message: (trace topic, body, KEYS)."""


@dataclass(frozen=True, slots=True)
class TraceBatch:
    """One trace message to send: its body and its KEYS property."""

    body: bytes
    keys: str
    context_count: int


class TraceBatcher:
    """Packs encoded trace contexts into trace message bodies of at most `body_max_bytes`.

    Pure and not thread-safe: `TraceDispatcher` holds a lock around it. A single context
    larger than the limit still goes, alone in its message (the producer's size check is
    the last word).
    """

    def __init__(self, *, body_max_bytes: int = BODY_MAX_BYTES, pending_max: int = PENDING_MAX):
        if body_max_bytes < 1 or pending_max < 1:
            raise ValueError("body_max_bytes and pending_max must be >= 1")
        self.body_max_bytes = body_max_bytes
        self.pending_max = pending_max
        self._pending: deque[tuple[TraceContext, bytes]] = deque()
        self._pending_bytes = 0

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def full(self) -> bool:
        """Whether a whole body is waiting (the dispatcher then sends without waiting)."""
        return self._pending_bytes >= self.body_max_bytes

    def add(self, context: TraceContext) -> bool:
        """Queues one context; False when it is dropped (queue full, or not encodable).

        Raises:
            TraceEncodeError: a field holds a record separator (the context is not queued).
        """
        if len(self._pending) >= self.pending_max:
            return False
        record = encode_context(context).encode("utf-8")
        self._pending.append((context, record))
        self._pending_bytes += len(record)
        return True

    def take(self, *, whole_only: bool = False) -> list[TraceBatch]:
        """Removes the waiting contexts as trace messages, in append order.

        Args:
            whole_only: Take only full bodies and leave a partial last one waiting.
        """
        batches: list[TraceBatch] = []
        while self._pending:
            if whole_only and self._pending_bytes < self.body_max_bytes:
                break
            contexts: list[TraceContext] = []
            parts: list[bytes] = []
            size = 0
            while self._pending:
                context, record = self._pending[0]
                if parts and size + len(record) > self.body_max_bytes:
                    break
                self._pending.popleft()
                self._pending_bytes -= len(record)
                contexts.append(context)
                parts.append(record)
                size += len(record)
            batches.append(TraceBatch(b"".join(parts), trace_message_keys(contexts), len(parts)))
        return batches


class TraceDispatcher:
    """Collects one client's trace contexts and sends them from a background task.

    Call `start` on the event loop, `append` from anywhere (threads included), `close` last.
    """

    def __init__(
        self,
        send: SendTrace,
        clock: Clock,
        *,
        trace_topic: str | None = None,
        flush_interval_s: float = FLUSH_INTERVAL_S,
        body_max_bytes: int = BODY_MAX_BYTES,
        pending_max: int = PENDING_MAX,
    ) -> None:
        """Creates a dispatcher.

        Args:
            send: Sends one trace message; a failure is logged and the message dropped.
            clock: For the rate limit of the drop warning.
            trace_topic: Where trace messages go (default `RMQ_SYS_TRACE_TOPIC`).
            flush_interval_s: The longest a context waits when no body fills up.
            body_max_bytes: The largest trace message body.
            pending_max: Contexts waiting before new ones are dropped.
        """
        self.trace_topic = trace_topic or TRACE_TOPIC_DEFAULT
        self._send = send
        self._clock = clock
        self._flush_interval_s = flush_interval_s
        self._batcher = TraceBatcher(body_max_bytes=body_max_bytes, pending_max=pending_max)
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._dropped = 0
        self._dropped_warned_at: float | None = None
        self._failure_warned_at: float | None = None
        self.sent_messages = 0
        self.failed_messages = 0

    @property
    def dropped(self) -> int:
        """Contexts dropped so far (queue full or not encodable)."""
        return self._dropped

    def start(self) -> None:
        """Starts the background task; call on the event loop."""
        if self._task is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._task = self._loop.create_task(self._run(), name=f"trace-{self.trace_topic}")

    def append(self, context: TraceContext) -> None:
        """Queues one context for sending; never blocks, never raises."""
        if self._closing:
            return
        with self._lock:
            try:
                added = self._batcher.add(context)
            except TraceEncodeError as exc:
                log.debug("trace context not encodable, dropped: %s", exc)
                added = False
            full = self._batcher.full
        if not added:
            self._note_drop()
        elif full:
            self._wake_up()

    async def close(self) -> None:
        """Sends what is waiting, then stops the background task."""
        self._closing = True
        task = self._task
        if task is None:
            return
        self._wake.set()
        try:
            await task
        finally:
            self._task = None

    async def flush(self) -> None:
        """Sends every waiting context now (tests and `close`)."""
        with self._lock:
            batches = self._batcher.take()
        await self._send_all(batches)

    # -- internals -------------------------------------------------------------------------

    def _wake_up(self) -> None:
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._loop_thread:
            self._wake.set()
        else:
            # The loop may have closed meanwhile (RuntimeError): close() flushed already.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._wake.set)

    def _note_drop(self) -> None:
        with self._lock:
            self._dropped += 1
            now = self._clock.monotonic()
            last = self._dropped_warned_at
            if last is not None and now - last < DROP_WARNING_INTERVAL_S:
                return
            self._dropped_warned_at = now
            dropped = self._dropped
        log.warning(
            "message trace to %s is behind: %d trace records dropped so far (at most %d wait)",
            self.trace_topic,
            dropped,
            self._batcher.pending_max,
        )

    async def _run(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self._flush_interval_s)
            self._wake.clear()
            await self.flush()
        await self.flush()

    async def _send_all(self, batches: Sequence[TraceBatch]) -> None:
        for batch in batches:
            try:
                await self._send(self.trace_topic, batch.body, batch.keys)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - trace must never break the client
                self.failed_messages += 1
                now = self._clock.monotonic()
                last = self._failure_warned_at
                if last is not None and now - last < DROP_WARNING_INTERVAL_S:
                    log.debug("trace message to %s not sent: %s", self.trace_topic, exc)
                    continue
                self._failure_warned_at = now
                log.warning(
                    "a trace message (%d records) to %s was not sent and is dropped (%d so "
                    "far): %s",
                    batch.context_count,
                    self.trace_topic,
                    self.failed_messages,
                    exc,
                )
            else:
                self.sent_messages += 1


class TraceSession:
    """What a traced client owns: a started dispatcher and the inner producer it sends
    through, closed together (the dispatcher first, so its last records go out)."""

    def __init__(self, dispatcher: TraceDispatcher, producer: Producer) -> None:
        self.dispatcher = dispatcher
        self.producer = producer

    @classmethod
    async def start(
        cls, instance: ClientInstance, group: str, dispatcher_type: str, trace_topic: str | None
    ) -> TraceSession:
        dispatcher, producer = trace_dispatcher_for(instance, group, dispatcher_type, trace_topic)
        await producer.start()
        dispatcher.start()
        return cls(dispatcher, producer)

    async def close(self) -> None:
        await self.dispatcher.close()
        await self.producer.close()


def trace_dispatcher_for(
    instance: ClientInstance, group: str, dispatcher_type: str, trace_topic: str | None
) -> tuple[TraceDispatcher, Producer]:
    """A dispatcher sending through a new trace producer on `instance` (not started yet).

    The trace producer's group is the first free `_INNER_TRACE_PRODUCER-<group>-<type>-<n>`
    of the instance, so several traced clients can share it.
    """
    from pocketmq.client.producer.producer import Producer

    counter = 0
    while trace_producer_group(group, dispatcher_type, counter) in instance.producer_groups:
        counter += 1
    producer = Producer(
        trace_producer_group(group, dispatcher_type, counter),
        instance=instance,
        send_timeout_s=SEND_TIMEOUT_S,
        max_message_bytes=max(BODY_MAX_BYTES, 4 << 20),
    )

    async def send(topic: str, body: bytes, keys: str) -> None:
        await producer.send(Message(topic, body, keys=keys or None))

    return TraceDispatcher(send, instance.clock, trace_topic=trace_topic), producer


# -- what the hooks record ----------------------------------------------------------------


def _message_type(properties: dict[str, str]) -> MessageType:
    if properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return MessageType.TRANS_HALF
    if any(
        properties.get(key)
        for key in (
            PROPERTY_DELAY_TIME_LEVEL,
            PROPERTY_TIMER_DELIVER_MS,
            PROPERTY_TIMER_DELAY_MS,
            PROPERTY_TIMER_DELAY_SEC,
        )
    ):
        return MessageType.DELAY
    return MessageType.NORMAL


class ProducerTracer:
    """Builds the Pub context of a completed send (Java `SendMessageTraceHookImpl`)."""

    def __init__(self, dispatcher: TraceDispatcher, group: str) -> None:
        self.dispatcher = dispatcher
        self.group = group

    def traces(self, topic: str) -> bool:
        """Whether sends to `topic` are traced: trace messages themselves are not."""
        return not topic.startswith(self.dispatcher.trace_topic)

    def sent(
        self,
        prepared: PreparedSend,
        store_host: str,
        started_ms: int,
        now_ms: int,
        ext_fields: dict[str, str],
        result: SendResult,
    ) -> None:
        """Records one answered send, as the Java hook does: only when the broker's answer
        carries MSG_REGION and its TRACE_ON is not "false"."""
        region = ext_fields.get(PROPERTY_MSG_REGION)
        if region is None or ext_fields.get(PROPERTY_TRACE_SWITCH) == "false":
            return
        properties = decode_properties(prepared.properties) if prepared.properties else {}
        bean = TraceBean(
            topic=prepared.topic,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            tags=properties.get(PROPERTY_TAGS),
            keys=properties.get(PROPERTY_KEYS),
            store_host=store_host,
            body_length=len(prepared.body),
            msg_type=_message_type(properties),
        )
        self.dispatcher.append(
            TraceContext(
                trace_type=TraceType.PUB,
                timestamp_ms=started_ms,
                region_id=region,
                group_name=self.group,
                cost_time_ms=max(0, now_ms - started_ms),
                success=result.status is SendStatus.SEND_OK,
                beans=(bean,),
            )
        )


@dataclass(frozen=True, slots=True)
class ConsumeStart:
    """What `ConsumeTracer.before` remembers for its `after`."""

    context: TraceContext


class ConsumeTracer:
    """Builds SubBefore and SubAfter contexts around listener calls
    (Java `ConsumeMessageTraceHookImpl`). Thread-safe: listener threads call it."""

    def __init__(self, dispatcher: TraceDispatcher, group: str, clock: Clock) -> None:
        self.dispatcher = dispatcher
        self.group = group
        self._clock = clock

    def before(self, messages: Sequence[MessageExt]) -> ConsumeStart | None:
        """Records the start of a listener call; None when no message of it is traced."""
        beans = []
        region = ""
        for message in messages:
            properties = message.properties
            if properties.get(PROPERTY_TRACE_SWITCH) == "false":
                continue
            region = properties.get(PROPERTY_MSG_REGION) or ""
            beans.append(
                TraceBean(
                    topic=message.topic,
                    msg_id=message.msg_id,
                    tags=message.tags,
                    keys=properties.get(PROPERTY_KEYS),
                    retry_times=message.reconsume_times,
                )
            )
        if not beans:
            return None
        context = TraceContext(
            trace_type=TraceType.SUB_BEFORE,
            timestamp_ms=self._clock.now_ms(),
            region_id=region,
            group_name=self.group,
            request_id=uuid.uuid4().hex.upper(),
            beans=tuple(beans),
        )
        self.dispatcher.append(context)
        return ConsumeStart(context)

    def after(
        self, start: ConsumeStart, message_count: int, return_type: ConsumeReturnType
    ) -> None:
        """Records the end of the listener call `start` began."""
        before = start.context
        now_ms = self._clock.now_ms()
        self.dispatcher.append(
            TraceContext(
                trace_type=TraceType.SUB_AFTER,
                timestamp_ms=now_ms,
                region_id=before.region_id,
                group_name=self.group,
                request_id=before.request_id,
                success=return_type is ConsumeReturnType.SUCCESS,
                cost_time_ms=max(0, now_ms - before.timestamp_ms) // max(1, message_count),
                context_code=int(return_type),
                beans=before.beans,
            )
        )


__all__ = [
    "BODY_MAX_BYTES",
    "ConsumeTracer",
    "ProducerTracer",
    "TraceBatch",
    "TraceBatcher",
    "TraceDispatcher",
    "TraceSession",
    "trace_dispatcher_for",
]
