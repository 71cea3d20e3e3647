"""The transaction check-back: asking producers about half messages nobody ended.

One asyncio task on the broker's loop (master only). Every `transactionCheckInterval` it makes a
pass over each half queue, from where the system group CID_RMQ_SYS_TRANS stands in it:

1. read the op records from that group's op queue offset on (`OpLedger`);
2. walk the halves present when the pass began; a half with an op record is passed over; the
   others get `judge_half`'s verdict: WAIT ends the queue's pass (the rest is younger), CHECK
   stores a copy of the half at the end of the queue with TRANSACTION_CHECK_TIMES one higher
   and sends CHECK_TRANSACTION_STATE (39, oneway) about the copy to one producer channel of
   the half's PGROUP, DISCARD moves it to TRANS_CHECK_MAX_TIME_TOPIC;
3. commit both offsets: the half offset past the last half dealt with, the op offset past the
   leading op records whose halves were all passed over.

The producer answers with END_TRANSACTION naming the copy, so a half checked N times has N
copies, and only the newest can still be open. A producer that does not answer leaves the copy
open: it is checked again `transactionTimeOut` after the check (RocketMQ: at the next pass),
until `transactionCheckMax` checks are spent. With no producer of the group connected the check
is counted all the same, as in RocketMQ.

Delivery is at least once: a producer that answers a check after the next one was sent, or
ends a half after a pass copied it, may see its message committed twice, once for each copy.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol

from pocketmq.broker.clients import ClientRegistry
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.put_path import PutPath
from pocketmq.broker.transaction.half_messages import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    TRANSACTION_GROUP,
    CheckSettings,
    HalfMessageError,
    HalfVerdict,
    OpLedger,
    check_request,
    checked_properties,
    discarded,
    immune_properties,
    judge_half,
    producer_group,
    renewed_half,
)
from pocketmq.common.codes import RequestCode
from pocketmq.common.constants import (
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.stored_message import MessageDecodeError, StoredMessage, decode_record
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import GetStatus, PutResult
from pocketmq.store.message_store import MessageStore, StoreNotRunningError

log = logging.getLogger(__name__)

OP_READ_BATCH: Final = 256
CHECK_SEND_TIMEOUT_S: Final = 3.0
"""A producer channel that does not take a oneway request within this is given up on."""


class ProducerChannel(Protocol):
    """What the check-back needs of a producer's connection."""

    @property
    def remote_address(self) -> str:
        """The producer's `ip:port`."""
        ...

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Sends a request the producer does not answer."""
        ...


class RoundRobinProducers:
    """Picks one connected producer of a group per check (`ProducerManager.getAvailableChannel`),
    taking the group's members in turn so checks spread over them."""

    def __init__(self, registry: ClientRegistry) -> None:
        self._registry = registry
        self._turn = itertools.count()

    def pick(self, group: str) -> Any | None:
        """A live channel of `group`, or None when none of its producers is connected."""
        members = list(self._registry.producer_groups.get(group, {}).values())
        if not members:
            return None
        start = next(self._turn)
        for step in range(len(members)):
            channel = members[(start + step) % len(members)].channel
            if not getattr(channel, "is_closed", False):
                return channel
        return None


@dataclass(slots=True)
class CheckRound:
    """What one pass did, over all half queues.

    Attributes:
        checked: Halves copied forward and asked about (sent or not).
        asked: Check requests handed to a producer channel.
        discarded: Halves moved to TRANS_CHECK_MAX_TIME_TOPIC.
        resolved: Halves passed over because an op record ended them.
        forwarded: Halves copied forward unchecked, inside their own immunity time.
    """

    checked: int = 0
    asked: int = 0
    discarded: int = 0
    resolved: int = 0
    forwarded: int = 0


class TransactionCheckService:
    """The periodic check-back; `start` on the loop, `stop` at shutdown. `check_once` runs one
    pass at once (tests, admin)."""

    def __init__(
        self,
        store: MessageStore,
        put_path: PutPath,
        offsets: ConsumerOffsetTable,
        pick_producer: Callable[[str], ProducerChannel | None],
        clock: Clock,
        *,
        broker_name: str,
        settings: CheckSettings,
    ) -> None:
        """Wires the check-back.

        Args:
            store: Half and op queues are read here.
            put_path: Where copies and discarded halves are stored.
            offsets: The broker's consumer offsets; CID_RMQ_SYS_TRANS's live here.
            pick_producer: A connected channel of a producer group, or None.
            clock: Wall time (ages, store times) and monotonic time (the pass limit).
            broker_name: Sent in each check request (`bname`).
            settings: Interval, timeout, check limit.
        """
        self._store = store
        self._put_path = put_path
        self._offsets = offsets
        self._pick_producer = pick_producer
        self._clock = clock
        self._broker_name = broker_name
        self.settings = settings
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Starts the periodic passes on the running loop."""
        assert self._task is None, "started twice"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="transaction-check")

    async def stop(self) -> None:
        """Stops the passes; a store write under way finishes or is cancelled with the task."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.settings.interval_ms / 1000)
            try:
                outcome = await self.check_once()
            except StoreNotRunningError:
                log.info("the store stopped; the transaction check-back ends")
                return
            except Exception:  # a task boundary: log, and try again next interval
                log.exception("a transaction check pass failed; trying again next interval")
                continue
            if outcome.checked or outcome.discarded:
                log.info(
                    "transaction check: %d checked (%d asked), %d discarded, %d resolved",
                    outcome.checked,
                    outcome.asked,
                    outcome.discarded,
                    outcome.resolved,
                )

    async def check_once(self) -> CheckRound:
        """One pass over every half queue.

        Raises:
            StoreNotRunningError: the store was shut down.
        """
        outcome = CheckRound()
        for queue_id in self._store.queue_ids(HALF_TOPIC):
            await self._check_queue(queue_id, outcome)
        return outcome

    # -- one queue -------------------------------------------------------------------------
    def _start_offset(self, topic: str, queue_id: int) -> int:
        """The group's offset in a queue, brought into the queue's bounds."""
        low = self._store.get_min_offset_in_queue(topic, queue_id)
        high = self._store.get_max_offset_in_queue(topic, queue_id)
        committed = self._offsets.query(TRANSACTION_GROUP, topic, queue_id)
        return low if committed is None else min(max(committed, low), high)

    async def _check_queue(self, queue_id: int, outcome: CheckRound) -> None:
        started_ms = self._clock.now_ms()
        deadline = self._clock.monotonic() + self.settings.pass_time_limit_ms / 1000
        half_offset = self._start_offset(HALF_TOPIC, queue_id)
        op_start = self._start_offset(OP_TOPIC, queue_id)
        ledger = OpLedger(half_offset, op_start)
        op_read = self._read_ops(queue_id, op_start, ledger)
        # Copies stored by this pass land past `end`: they wait for the next pass.
        end = self._store.get_max_offset_in_queue(HALF_TOPIC, queue_id)
        offset = half_offset
        while offset < end and self._clock.monotonic() < deadline:
            if ledger.take(offset):
                outcome.resolved += 1
                offset += 1
                continue
            half, next_offset = self._read_half(queue_id, offset)
            if half is None:
                if next_offset > offset:
                    offset = next_offset
                    continue
                break
            if self._store.get_max_offset_in_queue(OP_TOPIC, queue_id) > op_read:
                # Producers ended halves during the pass: learn of it before asking them.
                op_read = self._read_ops(queue_id, op_read, ledger)
                if ledger.take(offset):
                    outcome.resolved += 1
                    offset += 1
                    continue
            verdict = judge_half(
                half,
                now_ms=self._clock.now_ms(),
                pass_started_ms=started_ms,
                settings=self.settings,
                resolved=ledger,
            )
            if verdict is HalfVerdict.WAIT:
                break
            if verdict is HalfVerdict.RESOLVED:
                outcome.resolved += 1
            elif verdict is HalfVerdict.DISCARD:
                await self._discard(half)
                outcome.discarded += 1
            elif verdict is HalfVerdict.MOVE_ON_IMMUNE:
                if not await self._forward(half, immune_properties(half)):
                    break
                outcome.forwarded += 1
            else:
                copy = await self._forward(half, checked_properties(half))
                if copy is None:
                    break
                outcome.checked += 1
                if await self._ask_producer(copy):
                    outcome.asked += 1
            offset += 1
        if offset != half_offset:
            self._offsets.commit(TRANSACTION_GROUP, HALF_TOPIC, queue_id, offset)
        next_op = ledger.next_op_offset()
        if next_op != op_start:
            self._offsets.commit(TRANSACTION_GROUP, OP_TOPIC, queue_id, next_op)

    def _read_ops(self, queue_id: int, offset: int, ledger: OpLedger) -> int:
        """Adds the op records from `offset` to the queue's end to `ledger`; returns where
        reading stopped."""
        while True:
            result = self._store.get_message(OP_TOPIC, queue_id, offset, OP_READ_BATCH)
            if result.status is not GetStatus.FOUND:
                return offset
            for record, queue_offset in zip(result.buffers, result.queue_offsets, strict=True):
                try:
                    op = decode_record(record, check_crc=False)
                except MessageDecodeError as exc:
                    log.warning(
                        "op record %d of queue %d is unreadable: %s", queue_offset, queue_id, exc
                    )
                    ledger.add(queue_offset, None, b"")
                    continue
                ledger.add(queue_offset, op.properties.get(PROPERTY_TAGS), op.body)
            if result.next_begin_offset <= offset:
                return offset
            offset = result.next_begin_offset

    def _read_half(self, queue_id: int, offset: int) -> tuple[StoredMessage | None, int]:
        """The half at `offset`, or None and the offset to go on from."""
        result = self._store.get_message(HALF_TOPIC, queue_id, offset, 1)
        if result.status is not GetStatus.FOUND:
            return None, result.next_begin_offset
        try:
            return decode_record(result.buffers[0], check_crc=False), offset + 1
        except MessageDecodeError as exc:
            log.warning("half %d of queue %d is unreadable: %s; skipped", offset, queue_id, exc)
            return None, offset + 1

    async def _forward(
        self, half: StoredMessage, properties: dict[str, str]
    ) -> StoredMessage | None:
        """Stores a copy of `half` with `properties` at the end of its queue; returns the copy
        as stored, or None when the store refused (the pass stops there and retries later)."""
        put = await self._put_path.put([renewed_half(half, properties)])
        result = put.result
        if not put.stored:
            log.error(
                "copying half %d forward failed (%s %s); trying again next pass",
                half.queue_offset,
                result.status.value,
                result.remark,
            )
            return None
        return _as_stored(half, properties, result)

    async def _discard(self, half: StoredMessage) -> None:
        log.warning(
            "half message %s for %s (group %s) was checked too often or is too old; moving it to "
            "%s",
            half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            half.properties.get(PROPERTY_REAL_TOPIC),
            producer_group(half),
            CHECK_MAX_TIME_TOPIC,
        )
        put = await self._put_path.put([discarded(half)])
        result = put.result
        if not put.stored:
            # As RocketMQ: the half is given up on all the same, it is not checked forever.
            log.error(
                "storing discarded half %d failed: %s %s",
                half.queue_offset,
                result.status.value,
                result.remark,
            )

    async def _ask_producer(self, half: StoredMessage) -> bool:
        """Sends CHECK_TRANSACTION_STATE about `half` to a producer of its group."""
        group = producer_group(half)
        channel = self._pick_producer(group) if group else None
        if channel is None:
            log.warning(
                "cannot check half %d: no producer of group %s is connected",
                half.queue_offset,
                group,
            )
            return False
        try:
            fields, body = check_request(half, self._broker_name)
        except HalfMessageError as exc:
            log.warning("cannot check half %d: %s", half.queue_offset, exc)
            return False
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE, fields, body, oneway=True
        )
        try:
            async with asyncio.timeout(CHECK_SEND_TIMEOUT_S):
                await channel.invoke_oneway(request)
        except (RemotingError, ConnectionError, TimeoutError) as exc:
            log.warning(
                "check of half %d to %s (group %s) failed: %s",
                half.queue_offset,
                channel.remote_address,
                group,
                exc,
            )
            return False
        return True


def _as_stored(half: StoredMessage, properties: dict[str, str], result: PutResult) -> StoredMessage:
    """The copy of `half` as `result` says it was stored (offsets of the copy)."""
    return replace(
        half,
        properties=properties,
        queue_offset=result.queue_offset,
        physical_offset=result.physical_offsets[0],
    )
