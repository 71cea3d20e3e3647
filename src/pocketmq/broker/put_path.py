"""The one way a message goes into the broker's store.

Every door that stores a message enters here: a producer's send, a consumer's send-back, a
recall marker, END_TRANSACTION's commit and op records, the transaction check's renewed and
discarded halves, and the delay and timer deliveries. Each message then takes the same ordered
steps, RocketMQ's `SendMessageProcessor` rewrites followed by its `HookUtils` put hooks:

1. dead letter: a send to `%RETRY%<group>` past its reconsume limit goes to `%DLQ%<group>`
   (the door decides that it is dead: only a producer's send asks);
2. half: a producer's transactional send is stored as a half message;
3. timer: a message with TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS in the future
   waits in the timer topic (not a batch, not a half: a half gets its timer at commit);
4. delay: a message with a DELAY level waits in SCHEDULE_TOPIC_XXXX (not a half either);
5. store: the writer appends the messages; a stopped store is SERVICE_NOT_AVAILABLE.

Steps 3 and 4 look only at the message, so a message stored again (a delivery, a commit, a
send-back) is redirected exactly when it still asks for a wait: a committed transactional
message with a DELAY level is delayed after its commit, as in RocketMQ 5. The writer is the
seam a replicated CommitLog plugs into: swap it, and every door follows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from pocketmq.broker.retry_policy import as_dead_letter
from pocketmq.broker.schedule import redirect_delayed
from pocketmq.broker.timer_messages import TimerRefusal, TimerSettings, redirect_timer
from pocketmq.broker.transaction.half_messages import to_half
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import PROPERTY_DELAY_TIME_LEVEL
from pocketmq.common.properties import find_property
from pocketmq.runtime.clock import Clock
from pocketmq.store.api import (
    NEVER_STORABLE,
    STORED_STATUSES,
    BatchToStore,
    Delivery,
    MessageToStore,
    PutResult,
    PutStatus,
    classify_put,
)
from pocketmq.store.message_store import StoreNotRunningError


class StoreWriter(Protocol):
    """What the put path needs of the store (`MessageStore.put_messages`)."""

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        """Stores messages of one topic and queue as one unit."""
        ...


@runtime_checkable
class BatchWriter(Protocol):
    """A writer that also stores a batch send straight from its body
    (`MessageStore.put_batch`); the put path hands other writers the batch's messages."""

    async def put_batch(self, batch: BatchToStore) -> PutResult:
        """Stores the batch's messages as `put_messages` would."""
        ...


class PutRefusal(Exception):
    """A message the broker does not store; the door answers with `code` and `remark`."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class PutSettings:
    """The broker settings the steps follow."""

    delay_level_count: int = 0
    """Levels of `messageDelayLevel`; with 0, DELAY is stored as sent."""
    timer: TimerSettings | None = None
    """Timer message settings; without them TIMER_* properties are stored as sent."""
    reject_transaction_message: bool = False
    """`rejectTransactionMessage`: refuse half messages."""
    broker_ip: str = ""
    """Named in the refusal of a transactional send."""
    max_message_size: int = 4 * 1024 * 1024
    """`maxMessageSize`: sends check bodies against it, and refusals name it."""


@dataclass(frozen=True, slots=True)
class Put:
    """What came of a put: the store's result and the messages as they were stored."""

    result: PutResult
    messages: list[MessageToStore]
    """Empty for a batch stored straight from its body (`PutPath.put_batch`)."""

    @property
    def stored(self) -> bool:
        """The messages are in the CommitLog (acknowledged, perhaps with a flush or slave
        timeout)."""
        return self.result.status in STORED_STATUSES

    @property
    def never_storable(self) -> bool:
        """Not stored, and trying the same messages again would not help."""
        return self.result.status in NEVER_STORABLE


class PutPath:
    """The ordered steps of the module docstring, in front of one writer."""

    def __init__(self, writer: StoreWriter, clock: Clock, settings: PutSettings) -> None:
        self.writer = writer
        self._batch_writer = writer if isinstance(writer, BatchWriter) else None
        self._clock = clock
        self.settings = settings

    async def put_batch(self, batch: BatchToStore) -> Put:
        """Takes a producer's batch send (not to a retry topic: the door refuses that) through
        the steps into the store. A batch takes no timer and is never a half, so only a delay
        applies: a batch with an entry that asks for one goes message by message through
        `put`; every other batch is written straight from its body."""
        writer = self._batch_writer
        if writer is None or (self.settings.delay_level_count and _asks_delay(batch)):
            return await self.put(batch.messages(), batch=True)
        try:
            result = await writer.put_batch(batch)
        except StoreNotRunningError:
            result = PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is not running")
        return Put(result, [])

    async def put(
        self,
        messages: Sequence[MessageToStore],
        *,
        batch: bool = False,
        dead_letter_group: str | None = None,
        transaction_send: bool = False,
    ) -> Put:
        """Takes messages of one topic and queue through the steps into the store.

        Args:
            messages: As the door built them.
            batch: The messages are one batch send: timers do not apply.
            dead_letter_group: The door found them dead: they go to this group's DLQ.
            transaction_send: A producer's transactional send: stored as a half message.

        Raises:
            PutRefusal: a transactional send on a broker that refuses them, or a timer message
                the wheel does not take (off, unparsable time, beyond `timerMaxDelaySec`, a
                recall that comes too late). Nothing was stored.
        """
        settings = self.settings
        staged = list(messages)
        if dead_letter_group is not None:
            staged = [as_dead_letter(message, dead_letter_group) for message in staged]
        if transaction_send:
            if settings.reject_transaction_message:
                raise PutRefusal(
                    ResponseCode.NO_PERMISSION,
                    f"the broker[{settings.broker_ip}] sending transaction message is forbidden",
                )
            staged = [to_half(message) for message in staged]
        if settings.timer is not None and not batch:
            now_ms = self._clock.now_ms()
            try:
                staged = [redirect_timer(m, settings.timer, now_ms) for m in staged]
            except TimerRefusal as exc:
                raise PutRefusal(exc.code, exc.remark) from None
        if settings.delay_level_count:
            staged = [redirect_delayed(m, settings.delay_level_count) for m in staged]
        try:
            result = await self.writer.put_messages(staged)
        except StoreNotRunningError:
            result = PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="the store is not running")
        return Put(result, staged)

    async def deliver(self, message: MessageToStore) -> tuple[Delivery, str]:
        """Stores one message the broker moves itself; never raises for a refusal.

        Returns:
            What came of it, and for a message not stored, why (for the caller's log line).
        """
        try:
            put = await self.put([message])
        except PutRefusal as exc:
            return Delivery.SKIPPED, exc.remark
        return classify_put(put.result)

    def failure_answer(self, result: PutResult) -> tuple[ResponseCode, str]:
        """The response code and remark for a put that stored nothing, as a send answers it
        (`SendMessageProcessor.handlePutMessageResult`); END_TRANSACTION answers the same."""
        status = result.status
        detail = f" ({result.remark})" if result.remark else ""
        if status in NEVER_STORABLE:
            return (
                ResponseCode.MESSAGE_ILLEGAL,
                "the message is illegal, maybe msg body or properties length not matched. "
                f"msg body length limit {self.settings.max_message_size}B, msg properties "
                f"length limit 32KB.{detail}",
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


def _asks_delay(batch: BatchToStore) -> bool:
    """Whether an entry of the batch carries DELAY (a text without the name is not decoded)."""
    name = PROPERTY_DELAY_TIME_LEVEL
    return any(name in text and find_property(text, name) for _, _, _, text in batch.spans)
