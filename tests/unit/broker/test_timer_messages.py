"""Timer messages at the broker: which sends wait in the wheel, the delivery-time limit, the
recall handle of a send, and RECALL_MESSAGE (RocketMQ's `HookUtils`, `attachRecallHandle`,
`RecallMessageProcessor`)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.send import SendHandler, SendSettings
from pocketmq.broker.timer_handlers import RECALL_MESSAGE_TAG, RecallHandler
from pocketmq.broker.timer_messages import (
    TimerRefusal,
    TimerSettings,
    recall_handle,
    redirect_timer,
    round_timer_out_ms,
)
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.batch import encode_batch_body
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_READ, TRANSACTION_PREPARED_TYPE
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.recall_handle import RecallHandle, decode_recall_handle
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore, PutResult, PutStatus
from pocketmq.store.timer import TIMER_TOPIC

NOW = 1_700_000_000_000
SETTINGS = TimerSettings(enabled=True, precision_ms=1000, max_delay_sec=3600, broker_name="b-a")
TOPIC = "Orders"


async def no_topics_created(names: list[str]) -> None:
    """Sends here create no topic."""


def message(properties: dict[str, str | None], *, sys_flag: int = 0) -> MessageToStore:
    return MessageToStore(
        topic=TOPIC,
        body=b"x",
        properties=encode_properties({"UNIQ_KEY": "U1", **properties}),
        queue_id=3,
        sys_flag=sys_flag,
    )


def properties_of(stored: MessageToStore) -> dict[str, str]:
    return decode_properties(stored.properties)


# -- which messages wait -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("deliver_ms", "out_ms"),
    [(NOW + 2500, NOW + 2000), (NOW + 3000, NOW + 2000), (NOW + 3001, NOW + 3000)],
)
def test_a_future_delivery_time_waits_in_the_timer_topic_rounded_down(
    deliver_ms: int, out_ms: int
) -> None:
    redirected = redirect_timer(message({"TIMER_DELIVER_MS": str(deliver_ms)}), SETTINGS, NOW)
    assert (redirected.topic, redirected.queue_id) == (TIMER_TOPIC, 0)
    properties = properties_of(redirected)
    assert properties["TIMER_OUT_MS"] == str(out_ms)
    assert (properties["REAL_TOPIC"], properties["REAL_QID"]) == (TOPIC, "3")
    assert properties["TIMER_DELIVER_MS"] == str(deliver_ms)
    # Delivered at the end of the slot: never before the time asked for.
    assert out_ms < deliver_ms <= out_ms + SETTINGS.precision_ms


def test_relative_delays_count_from_now_and_seconds_win_over_the_rest() -> None:
    by_ms = redirect_timer(message({"TIMER_DELAY_MS": "1500"}), SETTINGS, NOW)
    assert properties_of(by_ms)["TIMER_OUT_MS"] == str(NOW + 1000)
    both = message({"TIMER_DELAY_SEC": "5", "TIMER_DELIVER_MS": str(NOW + 60_000)})
    assert properties_of(redirect_timer(both, SETTINGS, NOW))["TIMER_OUT_MS"] == str(NOW + 4000)


def test_a_time_that_has_passed_sends_the_message_as_it_is() -> None:
    sent = message({"TIMER_DELIVER_MS": str(NOW)})
    assert redirect_timer(sent, SETTINGS, NOW) is sent


def test_messages_without_timer_properties_pass_unchanged() -> None:
    plain = message({"TAGS": "a"})
    assert redirect_timer(plain, SETTINGS, NOW) is plain


def test_a_time_beyond_the_limit_is_refused_naming_the_limit() -> None:
    far = message({"TIMER_DELAY_SEC": "3601"})
    with pytest.raises(TimerRefusal) as refused:
        redirect_timer(far, SETTINGS, NOW)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "3600000 ms" in refused.value.remark
    assert "timerMaxDelaySec=3600" in refused.value.remark
    at_limit = redirect_timer(message({"TIMER_DELAY_SEC": "3600"}), SETTINGS, NOW)
    assert at_limit.topic == TIMER_TOPIC


@pytest.mark.parametrize("text", ["soon", "1.5", " 5", "5_0", "99999999999999999999"])
def test_a_time_that_is_not_a_java_long_is_refused(text: str) -> None:
    with pytest.raises(TimerRefusal) as refused:
        redirect_timer(message({"TIMER_DELAY_SEC": text}), SETTINGS, NOW)
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert "TIMER_DELAY_SEC" in refused.value.remark


def test_with_the_wheel_off_timer_messages_are_refused() -> None:
    off = TimerSettings(enabled=False, precision_ms=1000, max_delay_sec=60, broker_name="b-a")
    with pytest.raises(TimerRefusal) as refused:
        redirect_timer(message({"TIMER_DELAY_MS": "10"}), off, NOW)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert "timerWheelEnable" in refused.value.remark


def test_a_delay_level_wins_and_the_timer_properties_are_dropped() -> None:
    both = redirect_timer(message({"DELAY": "2", "TIMER_DELAY_MS": "10"}), SETTINGS, NOW)
    assert both.topic == TOPIC
    assert "TIMER_DELAY_MS" not in properties_of(both)
    assert properties_of(both)["DELAY"] == "2"


def test_records_already_timed_and_transactional_halves_are_left_alone() -> None:
    timed = message({"TIMER_DELAY_MS": "10", "TIMER_OUT_MS": str(NOW)})
    assert redirect_timer(timed, SETTINGS, NOW) is timed
    prepared = message({"TIMER_DELAY_MS": "10"}, sys_flag=TRANSACTION_PREPARED_TYPE)
    assert redirect_timer(prepared, SETTINGS, NOW) is prepared


def test_a_recall_marker_for_a_time_that_has_passed_is_refused() -> None:
    marker = message({"TIMER_DELIVER_MS": str(NOW - 1), "TIMER_DEL_UNIQKEY": "Orders+U1"})
    with pytest.raises(TimerRefusal, match="due already"):
        redirect_timer(marker, SETTINGS, NOW)


def test_rounding_puts_a_time_in_the_slot_that_ends_at_or_after_it() -> None:
    rng = random.Random(5)
    for _ in range(1000):
        precision = rng.choice([1, 100, 1000, 7])
        deliver = rng.randrange(1, 10**13)
        out = round_timer_out_ms(deliver, precision)
        assert out % precision == 0
        assert out < deliver <= out + precision


# -- the recall handle of a send -----------------------------------------------------------
def test_a_timer_send_gets_a_handle_naming_topic_broker_time_and_id() -> None:
    redirected = redirect_timer(message({"TIMER_DELAY_MS": "4500"}), SETTINGS, NOW)
    handle = recall_handle(redirected, "b-a")
    assert handle is not None
    assert decode_recall_handle(handle) == RecallHandle(TOPIC, "b-a", str(NOW + 4001), "U1")


def test_no_handle_for_plain_messages_or_retry_topics() -> None:
    assert recall_handle(message({}), "b-a") is None
    retry = MessageToStore(
        topic=TIMER_TOPIC,
        body=b"x",
        properties=encode_properties(
            {"TIMER_OUT_MS": str(NOW), "REAL_TOPIC": "%RETRY%g", "UNIQ_KEY": "U1"}
        ),
    )
    assert recall_handle(retry, "b-a") is None


# -- the send handler with timers ----------------------------------------------------------
@dataclass
class FakeStore:
    result: PutResult = field(default_factory=lambda: PutResult(PutStatus.PUT_OK, [0], 0))
    received: list[MessageToStore] = field(default_factory=list)

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        self.received.extend(messages)
        return self.result


@dataclass
class FakeChannel:
    remote_address: str = "10.0.0.7:52000"


def topic_table() -> TopicTable:
    topics = TopicTable(cluster_name="DefaultCluster", broker_name="b-a")
    topics.load(None, NOW)
    topics.update(TopicConfig(TOPIC, read_queue_nums=4, write_queue_nums=4), NOW)
    return topics


def send_request(
    properties: dict[str, str], *, code: int = RequestCode.SEND_MESSAGE_V2
) -> RemotingCommand:
    body = b"x"
    batch = code == RequestCode.SEND_BATCH_MESSAGE
    encoded = encode_properties(properties)
    if batch:
        body = encode_batch_body([(0, b"x", encoded)])
    fields = dict(
        zip(
            "abcdefghijklmn",
            [
                "PG",
                TOPIC,
                "TBW102",
                "4",
                "1",
                "0",
                str(NOW),
                "0",
                "" if batch else encoded,
                "0",
                "false",
                "",
                "true" if batch else "false",
                "b-a",
            ],
            strict=True,
        )
    )
    return RemotingCommand.request(code, fields, body)


def handle_send(store: FakeStore, request: RemotingCommand) -> RemotingCommand:
    clock = ManualClock(NOW)
    handler = SendHandler(
        PutPath(store, clock, PutSettings(timer=SETTINGS, max_message_size=1 << 20)),
        topic_table(),
        SendSettings(("10.0.0.1", 10911), default_topic_queue_nums=4),
        clock,
        no_topics_created,
    )
    return asyncio.run(handler.handle(request, FakeChannel()))


def test_a_timer_send_is_stored_in_the_timer_topic_and_answered_with_a_handle() -> None:
    store = FakeStore()
    answer = handle_send(store, send_request({"UNIQ_KEY": "U1", "TIMER_DELAY_MS": "2000"}))
    assert answer.code == ResponseCode.SUCCESS
    [stored] = store.received
    assert stored.topic == TIMER_TOPIC
    handle = decode_recall_handle(answer.ext_fields["recallHandle"])
    assert (handle.topic, handle.broker_name, handle.message_id) == (TOPIC, "b-a", "U1")
    assert answer.ext_fields["queueId"] == "1"  # the queue it will be delivered to


def test_a_send_beyond_the_limit_is_answered_message_illegal_and_not_stored() -> None:
    store = FakeStore()
    answer = handle_send(store, send_request({"UNIQ_KEY": "U1", "TIMER_DELAY_SEC": "99999"}))
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert answer.remark is not None
    assert "timerMaxDelaySec=3600" in answer.remark
    assert store.received == []


def test_timer_properties_in_a_batch_are_stored_as_sent() -> None:
    store = FakeStore()
    request = send_request(
        {"UNIQ_KEY": "U1", "TIMER_DELAY_MS": "2000"}, code=RequestCode.SEND_BATCH_MESSAGE
    )
    answer = handle_send(store, request)
    assert answer.code == ResponseCode.SUCCESS
    assert [m.topic for m in store.received] == [TOPIC]
    assert "recallHandle" not in answer.ext_fields


# -- RECALL_MESSAGE ------------------------------------------------------------------------
def recall(
    store: FakeStore,
    handle: str,
    *,
    topic: str = TOPIC,
    enabled: bool = True,
    now_ms: int = NOW,
    permission: int = 6,
    allow_when_not_writeable: bool = True,
) -> RemotingCommand:
    clock = ManualClock(now_ms)
    handler = RecallHandler(
        PutPath(store, clock, PutSettings(timer=SETTINGS)),
        topic_table(),
        SETTINGS,
        clock,
        enabled=enabled,
        is_slave=False,
        broker_permission=lambda: permission,
        allow_when_not_writeable=allow_when_not_writeable,
    )
    request = RemotingCommand.request(
        RequestCode.RECALL_MESSAGE,
        {"producerGroup": "PG", "topic": topic, "recallHandle": handle},
    )
    return asyncio.run(handler.recall(request, FakeChannel()))


HANDLE = RecallHandle(TOPIC, "b-a", str(NOW + 5001), "U1").encode()


def test_a_recall_stores_a_delete_marker_in_the_messages_slot() -> None:
    store = FakeStore()
    answer = recall(store, HANDLE)
    assert answer.code == ResponseCode.SUCCESS
    assert answer.ext_fields["msgId"] == "U1"
    assert answer.ext_fields["MSG_REGION"] == "DefaultRegion"
    [marker] = store.received
    assert marker.topic == TIMER_TOPIC
    properties = properties_of(marker)
    assert properties["TIMER_DEL_UNIQKEY"] == f"{TOPIC}+U1"
    assert properties["TIMER_OUT_MS"] == str(NOW + 5000)  # the message's own slot
    assert properties["TAGS"] == RECALL_MESSAGE_TAG
    assert properties["REAL_TOPIC"] == TOPIC
    assert marker.born_host == ("10.0.0.7", 52000)


@pytest.mark.parametrize(
    ("options", "code", "words"),
    [
        ({"enabled": False}, ResponseCode.NO_PERMISSION, "recallMessageEnable"),
        (
            {"permission": PERM_READ, "allow_when_not_writeable": False},
            ResponseCode.SERVICE_NOT_AVAILABLE,
            "not writeable",
        ),
        ({"topic": "Missing"}, ResponseCode.TOPIC_NOT_EXIST, "Missing"),
        ({"handle": "not base64!"}, ResponseCode.ILLEGAL_OPERATION, "invalid"),
        (
            {"handle": RecallHandle("Other", "b-a", str(NOW + 5001), "U1").encode()},
            ResponseCode.ILLEGAL_OPERATION,
            "topic Other",
        ),
        (
            {"handle": RecallHandle(TOPIC, "b-z", str(NOW + 5001), "U1").encode()},
            ResponseCode.ILLEGAL_OPERATION,
            "broker b-z",
        ),
        ({"now_ms": NOW + 5001}, ResponseCode.ILLEGAL_OPERATION, "due already"),
        (
            {"handle": RecallHandle(TOPIC, "b-a", str(NOW + 3_600_000), "U1").encode()},
            ResponseCode.ILLEGAL_OPERATION,
            "not valid",
        ),
    ],
)
def test_a_recall_that_cannot_work_is_refused_saying_why(
    options: dict[str, object], code: ResponseCode, words: str
) -> None:
    store = FakeStore()
    handle = str(options.pop("handle", HANDLE))
    answer = recall(store, handle, **options)  # type: ignore[arg-type]
    assert answer.code == code
    assert answer.remark is not None
    assert words in answer.remark
    assert store.received == []


def test_a_recall_without_a_handle_field_is_a_system_error() -> None:
    clock = ManualClock(NOW)
    handler = RecallHandler(
        PutPath(FakeStore(), clock, PutSettings(timer=SETTINGS)),
        topic_table(),
        SETTINGS,
        clock,
        enabled=True,
        is_slave=False,
        broker_permission=lambda: 6,
    )
    request = RemotingCommand.request(RequestCode.RECALL_MESSAGE, {"topic": TOPIC})
    answer = asyncio.run(handler.recall(request, None))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark is not None
    assert "recallHandle" in answer.remark
