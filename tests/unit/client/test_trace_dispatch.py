"""The trace dispatcher: batching trace records into bodies of at most 128,000 bytes, sending
them from one background task, dropping (with one warning) instead of blocking, flushing on
close; and the Pub / SubBefore / SubAfter contexts the client hooks build."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest

from pocketmq.client.consumer.listener import ConsumeResult, ListenerCalls
from pocketmq.client.message import MessageExt, MessageQueue, SendResult, SendStatus
from pocketmq.client.producer.wire import PreparedSend
from pocketmq.client.trace_dispatch import (
    BODY_MAX_BYTES,
    ConsumeTracer,
    ProducerTracer,
    TraceBatcher,
    TraceDispatcher,
)
from pocketmq.common.properties import encode_properties
from pocketmq.observability.trace import (
    TRACE_TOPIC_DEFAULT,
    ConsumeReturnType,
    TraceBean,
    TraceContext,
    TraceType,
    decode,
    encode_context,
)
from pocketmq.runtime.clock import ManualClock

DISPATCH_LOGGER = "pocketmq.client.trace_dispatch"
WAIT_S = 5.0  # a bound for waits on the event loop; the awaited events come at once


def pub(index: int, *, keys: str | None = None, padding: int = 0) -> TraceContext:
    return TraceContext(
        trace_type=TraceType.PUB,
        timestamp_ms=1_700_000_000_000 + index,
        region_id="DefaultRegion",
        group_name="g",
        cost_time_ms=3,
        beans=(
            TraceBean(
                topic="T" + "x" * padding,
                msg_id=f"ID{index:04d}",
                keys=keys,
                store_host="127.0.0.1:10911",
                body_length=5,
            ),
        ),
    )


def record_size(context: TraceContext) -> int:
    return len(encode_context(context).encode("utf-8"))


class SentLog:
    """A fake `send`: records each trace message; optionally fails the first ones."""

    def __init__(self, fail_first: int = 0) -> None:
        self.sent: list[tuple[str, bytes, str]] = []
        self.fail_left = fail_first
        self.arrived = asyncio.Event()

    async def __call__(self, topic: str, body: bytes, keys: str) -> None:
        if self.fail_left:
            self.fail_left -= 1
            raise ConnectionError("broker gone")
        self.sent.append((topic, body, keys))
        self.arrived.set()

    def contexts(self) -> list[TraceContext]:
        return [c for _, body, _ in self.sent for c in decode(body.decode("utf-8"))]


# -- TraceBatcher ----------------------------------------------------------------------------


def test_batches_keep_order_and_stay_under_the_body_limit() -> None:
    contexts = [pub(i, keys="k1 k2", padding=100) for i in range(50)]
    limit = record_size(contexts[0]) * 7 + 10  # room for 7 records, not 8
    batcher = TraceBatcher(body_max_bytes=limit)
    for context in contexts:
        assert batcher.add(context)

    batches = batcher.take()

    assert [b.context_count for b in batches] == [7] * 7 + [1]
    assert all(len(b.body) <= limit for b in batches)
    decoded = [c for b in batches for c in decode(b.body.decode("utf-8"))]
    assert [c.beans[0].msg_id for c in decoded] == [f"ID{i:04d}" for i in range(50)]
    assert len(batcher) == 0


def test_a_batch_is_keyed_by_its_message_ids_and_keys() -> None:
    batcher = TraceBatcher()
    batcher.add(pub(1, keys="order-1"))
    batcher.add(pub(2))

    [batch] = batcher.take()

    assert set(batch.keys.split(" ")) == {"ID0001", "ID0002", "order-1"}


def test_the_default_body_limit_is_javas_128000_bytes() -> None:
    assert BODY_MAX_BYTES == 128_000
    big = pub(0, padding=1000)
    batcher = TraceBatcher()
    count = BODY_MAX_BYTES // record_size(big) + 5
    for i in range(count):
        batcher.add(pub(i, padding=1000))
    batches = batcher.take()
    assert len(batches) == 2
    assert all(len(b.body) <= BODY_MAX_BYTES for b in batches)
    assert sum(b.context_count for b in batches) == count


def test_a_record_larger_than_the_limit_goes_alone() -> None:
    batcher = TraceBatcher(body_max_bytes=100)
    batcher.add(pub(1))
    batcher.add(pub(2, padding=500))
    batcher.add(pub(3))

    assert [b.context_count for b in batcher.take()] == [1, 1, 1]


def test_whole_only_leaves_a_partial_body_waiting() -> None:
    size = record_size(pub(0))
    batcher = TraceBatcher(body_max_bytes=size * 2)
    for i in range(3):
        batcher.add(pub(i))
    assert batcher.full

    assert [b.context_count for b in batcher.take(whole_only=True)] == [2]
    assert len(batcher) == 1
    assert not batcher.full


def test_a_full_queue_refuses_more() -> None:
    batcher = TraceBatcher(pending_max=2)
    assert batcher.add(pub(1))
    assert batcher.add(pub(2))
    assert not batcher.add(pub(3))
    assert len(batcher) == 2


# -- TraceDispatcher --------------------------------------------------------------------------


def test_close_sends_what_waits_to_the_trace_topic() -> None:
    async def scenario() -> SentLog:
        sent = SentLog()
        dispatcher = TraceDispatcher(sent, ManualClock(), flush_interval_s=3600)
        dispatcher.start()
        for i in range(3):
            dispatcher.append(pub(i))
        await asyncio.wait_for(dispatcher.close(), WAIT_S)
        dispatcher.append(pub(9))  # after close: ignored, not an error
        return sent

    sent = asyncio.run(scenario())

    assert [topic for topic, _, _ in sent.sent] == [TRACE_TOPIC_DEFAULT]
    assert [c.beans[0].msg_id for c in sent.contexts()] == ["ID0000", "ID0001", "ID0002"]


def test_a_custom_trace_topic_is_used() -> None:
    async def scenario() -> SentLog:
        sent = SentLog()
        dispatcher = TraceDispatcher(sent, ManualClock(), trace_topic="MyTrace")
        dispatcher.start()
        dispatcher.append(pub(1))
        await asyncio.wait_for(dispatcher.close(), WAIT_S)
        return sent

    assert [topic for topic, _, _ in asyncio.run(scenario()).sent] == ["MyTrace"]


def test_a_full_body_is_sent_without_waiting_for_the_interval() -> None:
    async def scenario() -> SentLog:
        sent = SentLog()
        size = record_size(pub(0))
        dispatcher = TraceDispatcher(
            sent, ManualClock(), flush_interval_s=3600, body_max_bytes=size * 2
        )
        dispatcher.start()
        dispatcher.append(pub(1))
        dispatcher.append(pub(2))  # now a whole body waits: the task wakes up
        await asyncio.wait_for(sent.arrived.wait(), WAIT_S)
        result = list(sent.sent)
        await dispatcher.close()
        sent.sent = result
        return sent

    sent = asyncio.run(scenario())
    assert [c.beans[0].msg_id for c in sent.contexts()] == ["ID0001", "ID0002"]


def test_append_from_a_listener_thread_wakes_the_sender() -> None:
    async def scenario() -> SentLog:
        sent = SentLog()
        size = record_size(pub(0))
        dispatcher = TraceDispatcher(
            sent, ManualClock(), flush_interval_s=3600, body_max_bytes=size
        )
        dispatcher.start()
        thread = threading.Thread(target=dispatcher.append, args=(pub(7),))
        thread.start()
        await asyncio.to_thread(thread.join, WAIT_S)
        await asyncio.wait_for(sent.arrived.wait(), WAIT_S)
        await dispatcher.close()
        return sent

    assert [c.beans[0].msg_id for c in asyncio.run(scenario()).contexts()] == ["ID0007"]


def test_a_full_queue_drops_with_one_warning_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=DISPATCH_LOGGER)
    clock = ManualClock()
    dispatcher = TraceDispatcher(SentLog(), clock, pending_max=2)  # never started: nothing sent
    for i in range(5):
        dispatcher.append(pub(i))  # never blocks, never raises
    assert dispatcher.dropped == 3
    assert len(caplog.records) == 1
    clock.advance(11)
    dispatcher.append(pub(6))
    assert dispatcher.dropped == 4
    assert len(caplog.records) == 2
    assert "4 trace records dropped" in caplog.records[-1].getMessage()


def test_a_failed_trace_send_is_dropped_and_later_ones_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=DISPATCH_LOGGER)

    async def scenario() -> tuple[SentLog, TraceDispatcher]:
        sent = SentLog(fail_first=1)
        dispatcher = TraceDispatcher(sent, ManualClock(), flush_interval_s=3600)
        dispatcher.start()
        dispatcher.append(pub(1))
        await dispatcher.flush()
        dispatcher.append(pub(2))
        await asyncio.wait_for(dispatcher.close(), WAIT_S)
        return sent, dispatcher

    sent, dispatcher = asyncio.run(scenario())
    assert [c.beans[0].msg_id for c in sent.contexts()] == ["ID0002"]
    assert (dispatcher.failed_messages, dispatcher.sent_messages) == (1, 1)
    assert any("not sent and is dropped" in r.getMessage() for r in caplog.records)


def test_an_unencodable_context_is_dropped_not_raised() -> None:
    dispatcher = TraceDispatcher(SentLog(), ManualClock())
    dispatcher.append(pub(1, keys="bad\u0001key"))
    assert dispatcher.dropped == 1


# -- the hooks' contexts ----------------------------------------------------------------------


def prepared(properties: dict[str, str | None]) -> PreparedSend:
    return PreparedSend("Orders", b"hello", encode_properties(properties), 0, 0, ("ID1",))


def send_result(status: SendStatus = SendStatus.SEND_OK) -> SendResult:
    return SendResult(status, "ID1", "OFFSETID", MessageQueue("Orders", "broker-a", 1), 7)


def test_a_pub_record_needs_msg_region_and_trace_on() -> None:
    dispatcher = TraceDispatcher(SentLog(), ManualClock())
    tracer = ProducerTracer(dispatcher, "producers")
    send = prepared({"TAGS": "created", "KEYS": "k1 k2", "UNIQ_KEY": "ID1"})
    tracer.sent(send, "10.0.0.1:10911", 1000, 1012, {}, send_result())
    tracer.sent(
        send,
        "10.0.0.1:10911",
        1000,
        1012,
        {"MSG_REGION": "DefaultRegion", "TRACE_ON": "false"},
        send_result(),
    )
    assert len(dispatcher._batcher) == 0

    tracer.sent(
        send,
        "10.0.0.1:10911",
        1000,
        1012,
        {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true"},
        send_result(SendStatus.FLUSH_DISK_TIMEOUT),
    )

    [batch] = dispatcher._batcher.take()
    [context] = decode(batch.body.decode("utf-8"))
    assert context.trace_type is TraceType.PUB
    assert (context.group_name, context.region_id) == ("producers", "DefaultRegion")
    assert (context.timestamp_ms, context.cost_time_ms, context.success) == (1000, 12, False)
    bean = context.beans[0]
    assert (bean.topic, bean.msg_id, bean.offset_msg_id) == ("Orders", "ID1", "OFFSETID")
    assert (bean.tags, bean.keys, bean.store_host, bean.body_length) == (
        "created",
        "k1 k2",
        "10.0.0.1:10911",
        5,
    )


def test_trace_messages_themselves_are_not_traced() -> None:
    tracer = ProducerTracer(TraceDispatcher(SentLog(), ManualClock()), "producers")
    assert not tracer.traces(TRACE_TOPIC_DEFAULT)
    assert tracer.traces("Orders")


def consumed(msg_id: str, properties: dict[str, str]) -> MessageExt:
    return MessageExt(
        topic="Orders",
        body=b"x",
        properties={"UNIQ_KEY": msg_id, **properties},
        queue=MessageQueue("Orders", "broker-a", 0),
        queue_offset=0,
        commit_log_offset=0,
        born_timestamp_ms=0,
        store_timestamp_ms=0,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 10911),
        reconsume_times=2,
        flag=0,
        sys_flag=0,
    )


def test_a_listener_call_writes_sub_before_and_sub_after() -> None:
    clock = ManualClock()
    dispatcher = TraceDispatcher(SentLog(), clock)
    tracer = ConsumeTracer(dispatcher, "consumers", clock)
    messages = [
        consumed("A", {"KEYS": "ka", "MSG_REGION": "R1"}),
        consumed("B", {"TRACE_ON": "false"}),
        consumed("C", {}),
    ]

    start = tracer.before(messages)
    assert start is not None
    clock.advance(0.03)
    tracer.after(start, len(messages), ConsumeReturnType.FAILED)

    [batch] = dispatcher._batcher.take()
    contexts = decode(batch.body.decode("utf-8"))
    before = [c for c in contexts if c.trace_type is TraceType.SUB_BEFORE]
    after = [c for c in contexts if c.trace_type is TraceType.SUB_AFTER]
    assert [c.beans[0].msg_id for c in before] == ["A", "C"]  # B said TRACE_ON=false
    assert [c.beans[0].msg_id for c in after] == ["A", "C"]
    assert {c.request_id for c in contexts} == {start.context.request_id}
    assert before[0].beans[0].retry_times == 2
    assert before[0].beans[0].keys == "ka"
    assert after[0].group_name == "consumers"
    assert after[0].cost_time_ms == 10  # 30 ms over three messages
    assert not after[0].success
    assert after[0].context_code == ConsumeReturnType.FAILED


def test_nothing_is_recorded_when_every_message_has_trace_off() -> None:
    clock = ManualClock()
    dispatcher = TraceDispatcher(SentLog(), clock)
    tracer = ConsumeTracer(dispatcher, "consumers", clock)
    assert tracer.before([consumed("B", {"TRACE_ON": "false"})]) is None
    assert len(dispatcher._batcher) == 0


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        (None, ConsumeReturnType.SUCCESS),
        (ConsumeResult.RECONSUME_LATER, ConsumeReturnType.FAILED),
        (RuntimeError("boom"), ConsumeReturnType.EXCEPTION),
    ],
    ids=["success", "later", "raised"],
)
def test_listener_calls_report_the_consume_return_type(
    answer: object, code: ConsumeReturnType
) -> None:
    clock = ManualClock()
    dispatcher = TraceDispatcher(SentLog(), clock)

    async def listener(messages: list[MessageExt]) -> object:
        if isinstance(answer, Exception):
            raise answer
        return answer

    calls = ListenerCalls("consumers")
    calls.register(listener)  # type: ignore[arg-type]
    calls.tracer = ConsumeTracer(dispatcher, "consumers", clock)
    asyncio.run(calls.call([consumed("A", {})]))

    [batch] = dispatcher._batcher.take()
    [_, after] = decode(batch.body.decode("utf-8"))
    assert after.trace_type is TraceType.SUB_AFTER
    assert after.context_code == code
    assert after.success is (code is ConsumeReturnType.SUCCESS)


def test_listener_calls_without_a_tracer_record_nothing() -> None:
    calls = ListenerCalls("consumers")
    calls.register(lambda messages: None)
    calls.start(1)
    try:
        assert asyncio.run(calls.call([consumed("A", {})])) is ConsumeResult.SUCCESS
    finally:
        calls.shutdown()
    assert calls.tracer is None
