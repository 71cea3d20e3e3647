"""POP over remoting: POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151)
and CHANGE_MESSAGE_INVISIBLETIME (200053), with RocketMQ's headers and answers
(`PopMessageProcessor`, `AckMessageProcessor`, `ChangeInvisibleTimeProcessor`).

Answers that differ from RocketMQ's, all to say what happened instead of SUCCESS: an ack or a
change of invisible time for a message that is not in flight (never popped, acked already by a
change, revived after its invisible time, or a forged handle) is NO_MESSAGE with a remark that
says which; a handle that does not parse is INVALID_PARAMETER (RocketMQ: SYSTEM_ERROR).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.headers import (
    answers_header_errors,
    error_response,
    optional_bool,
    required_int,
    required_long,
    required_text,
)
from pocketmq.broker.pop.checkpoints import MessageRef
from pocketmq.broker.pop.service import PopFailure, Popped, PopService
from pocketmq.broker.pull import MessageFilter
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_READ
from pocketmq.common.receipt_handle import (
    ORDER_REVIVE_QID,
    HandleError,
    ReceiptHandle,
    offset_info,
    order_count_key,
    real_topic,
    retry_flag,
)
from pocketmq.common.stored_message import decode_record, reencode
from pocketmq.common.subscription import SubscriptionError, parse_subscription
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.event_loop import resolve_after
from pocketmq.store.api import PutResult
from pocketmq.store.dispatch import DispatchRequest

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)

MAX_POP_NUMS: Final = 32
PROPERTY_POP_CK: Final = "POP_CK"
POP_FROM_RETRY_PERCENT: Final = 20
"""`popFromRetryProbability`: how often a pop reads the retry topic first."""
NOT_IN_FLIGHT: Final = (
    "the message is not in flight: its receipt handle is expired (the message was revived "
    "and will be delivered again), was replaced by a change of invisible time, or names no "
    "message this broker handed out"
)
ORDER_RECHECK_S: Final = 0.2
"""A long-polling pop whose queues are blocked by orderly batches looks again this often (a
batch unblocks when its invisible time runs out, which no arrival announces)."""


class PopArrivals:
    """Wakes long-polling pops when a message arrives in a topic they wait on."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}

    def on_dispatched(self, run: Sequence[DispatchRequest]) -> None:
        """A `Dispatcher.on_dispatched` listener: wakes the pops waiting on the run's topics."""
        if self._waiters:
            for topic in {request.topic for request in run if request.goes_to_consume_queue}:
                self.notify(topic)

    def notify(self, topic: str) -> None:
        for future in self._waiters.pop(topic, ()):
            if not future.done():
                future.set_result(None)

    async def wait(self, topics: list[str], timeout_s: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for topic in topics:
            self._waiters.setdefault(topic, set()).add(future)
        expiry = resolve_after(timeout_s, future, None)  # the wait ends either way
        try:
            await future
        finally:
            expiry.cancel()
            for topic in topics:
                waiters = self._waiters.get(topic)
                if waiters is not None:
                    waiters.discard(future)
                    if not waiters:
                        del self._waiters[topic]


@dataclass(frozen=True, slots=True)
class PopHeader:
    """`PopMessageRequestHeader`."""

    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible_ms: int
    poll_ms: int
    born_ms: int
    init_max: bool
    exp_type: str | None
    exp: str | None
    order: bool

    @classmethod
    def decode(cls, fields: dict[str, str]) -> PopHeader:
        queue_id = required_int(fields, "queueId")
        return cls(
            group=required_text(fields, "consumerGroup"),
            topic=required_text(fields, "topic"),
            queue_id=-1 if queue_id < 0 else queue_id,
            max_nums=required_int(fields, "maxMsgNums"),
            invisible_ms=required_long(fields, "invisibleTime"),
            poll_ms=required_long(fields, "pollTime"),
            born_ms=required_long(fields, "bornTime"),
            init_max=required_int(fields, "initMode") == 1,
            exp_type=fields.get("expType"),
            exp=fields.get("exp"),
            order=bool(optional_bool(fields, "order")),
        )


class PopHandlers:
    def __init__(
        self,
        service: PopService,
        arrivals: PopArrivals,
        find_group: Callable[[str], Awaitable[SubscriptionGroupConfig | None]],
        broker_permission: Callable[[], int],
        *,
        rng: random.Random | None = None,
    ) -> None:
        self.service = service
        self.arrivals = arrivals
        self._find_group = find_group
        self._broker_permission = broker_permission
        self._rng = rng or random.Random()

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.POP_MESSAGE: self.pop,
            RequestCode.ACK_MESSAGE: self.ack,
            RequestCode.BATCH_ACK_MESSAGE: self.batch_ack,
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: self.change_invisible_time,
        }

    # -- POP_MESSAGE ------------------------------------------------------------------------

    @answers_header_errors()
    async def pop(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        header = PopHeader.decode(request.ext_fields)
        service = self.service
        if not service.running:
            return error_response(
                request,
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "this broker does not serve pops now (not a master): pop from the master",
            )
        if not self._broker_permission() & PERM_READ:
            return error_response(
                request, ResponseCode.NO_PERMISSION, "the broker pop message is forbidden"
            )
        if header.max_nums > MAX_POP_NUMS:
            return error_response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"the broker pop msg num is too large: {header.max_nums} > {MAX_POP_NUMS}",
            )
        topic_config = service.topics.get(header.topic)
        if topic_config is None:
            return error_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!",
            )
        if not topic_config.perm & PERM_READ:
            return error_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] peeking message is forbidden",
            )
        if header.queue_id >= topic_config.read_queue_nums:
            return error_response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}]",
            )
        group_config = await self._find_group(header.group)
        if group_config is None:
            return error_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.group}] does not exist",
            )
        if not group_config.consume_enable:
            return error_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"subscription group no permission, {header.group}",
            )
        try:
            subscription = parse_subscription(header.topic, header.exp or "*", header.exp_type)
        except SubscriptionError as exc:
            return error_response(request, exc.response_code, str(exc))
        selection = MessageFilter.of(subscription)
        queues = (
            [header.queue_id]
            if header.queue_id >= 0
            else _rotated(list(range(topic_config.read_queue_nums)), self._rng)
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(header.poll_ms, 0) / 1000
        while True:
            try:
                popped = await self._pop_once(header, queues, selection)
            except PopFailure as exc:
                return self._store_failure(request, exc.result)
            if popped or loop.time() >= deadline:
                break
            wait_s = deadline - loop.time()
            if header.order:
                wait_s = min(wait_s, ORDER_RECHECK_S)
            await self.arrivals.wait(
                [header.topic, service.retry_topic_of(header.group, header.topic)], wait_s
            )
        if not popped:
            return RemotingCommand.response_to(
                request,
                ResponseCode.POLLING_TIMEOUT,
                "NO_MESSAGE_IN_QUEUE",
                {
                    "popTime": "0",
                    "invisibleTime": str(header.invisible_ms),
                    "reviveQid": "0",
                    "restNum": "0",
                },
            )
        return self._popped_response(request, header, popped)

    async def _pop_once(
        self, header: PopHeader, queues: list[int], selection: MessageFilter
    ) -> list[Popped]:
        service = self.service
        pop_time = service.clock.now_ms()
        revive_qid = service.next_revive_qid()
        popped: list[Popped] = []
        retry_topic = service.retry_topic_of(header.group, header.topic)
        retry_first = not header.order and self._rng.randrange(100) < POP_FROM_RETRY_PERCENT
        sources: list[tuple[str, int]] = [(header.topic, q) for q in queues]
        if not header.order and service.topics.get(retry_topic) is not None:
            retry = [(retry_topic, 0)]
            sources = retry + sources if retry_first else sources + retry
        for topic, queue_id in sources:
            room = header.max_nums - len(popped)
            if room <= 0:
                break
            popped += await service.pop_queue(
                header.group,
                topic,
                queue_id,
                room,
                header.invisible_ms,
                selection if topic == header.topic else MessageFilter(),
                pop_time=pop_time,
                revive_qid=revive_qid,
                order=header.order,
                init_max=header.init_max,
            )
        return popped

    def _popped_response(
        self, request: RemotingCommand, header: PopHeader, popped: list[Popped]
    ) -> RemotingCommand:
        service = self.service
        first = popped[0].checkpoint
        starts: dict[tuple[str, int], int] = {}
        offsets: dict[tuple[str, int], list[int]] = {}
        counts: list[tuple[str, int, str]] = []
        bodies: list[bytes] = []
        for message in popped:
            flag = retry_flag(message.read_topic)
            starts.setdefault((flag, message.queue_id), message.checkpoint.start_offset)
            offsets.setdefault((flag, message.queue_id), []).append(message.queue_offset)
            if header.order:
                counts.append(
                    (
                        flag,
                        -1,
                        f"{order_count_key(message.queue_id, message.queue_offset)} "
                        f"{message.deliveries - 1}",
                    )
                )
            if flag == "0":
                bodies.append(message.record)
            else:
                bodies.append(self._as_original(header, message))
        rest = 0
        for (flag, queue_id), values in offsets.items():
            topic = real_topic(flag, header.topic, header.group)
            rest += max(0, service.store.get_max_offset_in_queue(topic, queue_id) - values[-1] - 1)
        fields = {
            "popTime": str(first.pop_time),
            "invisibleTime": str(first.invisible_time),
            "reviveQid": str(first.revive_qid),
            "restNum": str(rest),
            "startOffsetInfo": offset_info([(f, q, str(s)) for (f, q), s in starts.items()]),
            "msgOffsetInfo": offset_info(
                [(f, q, ",".join(map(str, v))) for (f, q), v in offsets.items()]
            ),
        }
        if header.order:
            fields["orderCountInfo"] = ";".join(f"{flag} {text}" for flag, _, text in counts)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, "FOUND", fields, b"".join(bodies)
        )

    def _as_original(self, header: PopHeader, message: Popped) -> bytes:
        """A retry-topic record as the client expects it: under the subscribed topic, with its
        handle in POP_CK (RocketMQ re-encodes them the same way)."""
        stored = decode_record(message.record)
        checkpoint = message.checkpoint
        handle = ReceiptHandle(
            checkpoint.start_offset,
            checkpoint.pop_time,
            checkpoint.invisible_time,
            checkpoint.revive_qid,
            retry_flag(message.read_topic),
            self.service.settings.broker_name,
            message.queue_id,
            message.queue_offset,
        )
        properties = dict(stored.properties)
        properties.setdefault(PROPERTY_POP_CK, handle.encode())
        return reencode(stored, topic=header.topic, properties=properties)

    # -- ACK_MESSAGE, BATCH_ACK_MESSAGE --------------------------------------------------

    @answers_header_errors()
    async def ack(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        ref = self._message_ref(request)
        if isinstance(ref, RemotingCommand):
            return ref
        refused, failure = await self.service.ack([ref])
        if failure is not None:
            return self._store_failure(request, failure)
        if refused:
            return error_response(request, ResponseCode.NO_MESSAGE, NOT_IN_FLIGHT)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def batch_ack(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        try:
            acks = json.loads(request.body or b"{}").get("acks") or []
        except (ValueError, AttributeError):
            return error_response(
                request, ResponseCode.INVALID_PARAMETER, "the batch ack body is not JSON"
            )
        if not acks:
            return error_response(request, ResponseCode.NO_MESSAGE, "no ack in the batch")
        for entry in acks:
            try:
                group = str(entry.get("c", entry.get("consumerGroup")))
                topic = real_topic(
                    str(entry.get("r", entry.get("retry", "0"))),
                    str(entry.get("t", entry.get("topic"))),
                    group,
                )
                queue_id = int(entry.get("q", entry.get("queueId")))
                start = int(entry.get("so", entry.get("startOffset")))
                pop_time = int(entry.get("pt", entry.get("popTime")))
                bits = _bit_indexes(entry.get("b", entry.get("bitSet")))
            except (TypeError, ValueError, HandleError) as exc:
                log.warning("pop: skipped a batch ack entry %r: %s", entry, exc)
                continue
            key = (group, topic, queue_id, start, pop_time)
            refs = [MessageRef(key, start + i) for i in bits]
            _, failure = await self.service.ack(refs)
            if failure is not None:
                return self._store_failure(request, failure)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    # -- CHANGE_MESSAGE_INVISIBLETIME --------------------------------------------------------

    @answers_header_errors()
    async def change_invisible_time(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        invisible_ms = required_long(request.ext_fields, "invisibleTime")
        ref = self._message_ref(request)
        if isinstance(ref, RemotingCommand):
            return ref
        outcome = await self.service.change_invisible(ref, max(invisible_ms, 0))
        if outcome is None:
            return error_response(request, ResponseCode.NO_MESSAGE, NOT_IN_FLIGHT)
        if isinstance(outcome, PutResult):
            return self._store_failure(request, outcome)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            None,
            {
                "popTime": str(outcome.pop_time),
                "invisibleTime": str(outcome.invisible_time),
                "reviveQid": str(ORDER_REVIVE_QID if outcome.order else outcome.revive_qid),
            },
        )

    def _store_failure(self, request: RemotingCommand, result: PutResult) -> RemotingCommand:
        """A pop, ack or change whose record was not stored, answered as a send would be."""
        code, remark = self.service.put_path.failure_answer(result)
        return error_response(request, code, f"the pop record was not stored: {remark}")

    def _message_ref(self, request: RemotingCommand) -> MessageRef | RemotingCommand:
        """The message an ACK_MESSAGE or CHANGE_MESSAGE_INVISIBLETIME names, or the refusal.

        Raises:
            HeaderError: a header field is missing or not a number.
        """
        fields = request.ext_fields
        group = required_text(fields, "consumerGroup")
        topic = required_text(fields, "topic")
        queue_id = required_int(fields, "queueId")
        offset = required_long(fields, "offset")
        refusal = self._check_message(request, topic, queue_id, offset)
        if refusal is not None:
            return refusal
        try:
            handle = ReceiptHandle.parse(required_text(fields, "extraInfo"))
        except HandleError as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        return MessageRef((group, topic, queue_id, handle.start_offset, handle.pop_time), offset)

    def _check_message(
        self, request: RemotingCommand, topic: str, queue_id: int, offset: int
    ) -> RemotingCommand | None:
        service = self.service
        if not service.running:
            return error_response(
                request,
                ResponseCode.SERVICE_NOT_AVAILABLE,
                "this broker does not serve pops now (not a master): ack at the master",
            )
        config = service.topics.get(topic)
        if config is None:
            return error_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{topic}] not exist, apply first please!",
            )
        if not 0 <= queue_id < config.read_queue_nums:
            return error_response(
                request,
                ResponseCode.MESSAGE_ILLEGAL,
                f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                f"topicConfig.readQueueNums:[{config.read_queue_nums}]",
            )
        low = service.store.get_min_offset_in_queue(topic, queue_id)
        high = service.store.get_max_offset_in_queue(topic, queue_id)
        if not low <= offset <= high:
            return error_response(
                request,
                ResponseCode.NO_MESSAGE,
                f"offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{low},{high}",
            )
        return None


def _bit_indexes(value: object) -> list[int]:
    """The set bits of a Java `BitSet` as fastjson writes it (Base64 of `toByteArray()`, bit
    i in byte i // 8 at position i % 8), or a list of numbers."""
    if isinstance(value, list):
        return [int(v) for v in value]
    if not isinstance(value, str):
        raise ValueError("bitSet is neither Base64 text nor a list")
    data = base64.b64decode(value)
    return [i * 8 + bit for i, byte in enumerate(data) for bit in range(8) if byte >> bit & 1]


def _rotated(values: list[int], rng: random.Random) -> list[int]:
    if not values:
        return values
    start = rng.randrange(len(values))
    return values[start:] + values[:start]
