"""Timer messages in the client: `deliver_time_ms` / `delay_ms` on the wire, the recall handle
of a send result, and what a batch refuses."""

from __future__ import annotations

import pytest

from pocketmq.client.errors import MessageError
from pocketmq.client.message import Message, MessageQueue, UniqueIdGenerator
from pocketmq.client.producer.wire import prepare_batch, prepare_message, read_send_response
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.properties import decode_properties
from pocketmq.remoting.command import RemotingCommand

NOW_MS = 1_763_800_000_000
QUEUE = MessageQueue("T", "broker-a", 1)


def _ids() -> UniqueIdGenerator:
    return UniqueIdGenerator("10.0.0.7", 0xABCDEF)


def test_a_delivery_time_travels_as_timer_deliver_ms() -> None:
    prepared = prepare_message(Message("T", b"x", deliver_time_ms=NOW_MS + 5000), _ids(), NOW_MS)
    properties = decode_properties(prepared.properties)
    assert properties["TIMER_DELIVER_MS"] == str(NOW_MS + 5000)
    assert "TIMER_DELAY_MS" not in properties


def test_a_relative_delay_travels_as_timer_delay_ms() -> None:
    prepared = prepare_message(Message("T", b"x", delay_ms=0), _ids(), NOW_MS)
    assert decode_properties(prepared.properties)["TIMER_DELAY_MS"] == "0"


@pytest.mark.parametrize(
    "message",
    [
        Message("T", b"x", deliver_time_ms=NOW_MS, delay_ms=5),
        Message("T", b"x", delay_level=2, delay_ms=5),
        Message("T", b"x", delay_ms=-1),
        Message("T", b"x", properties={"TIMER_DELIVER_MS": "1"}),
    ],
)
def test_conflicting_or_negative_timers_are_refused_before_sending(message: Message) -> None:
    with pytest.raises(MessageError):
        prepare_message(message, _ids(), NOW_MS)


def test_a_batch_refuses_timer_messages() -> None:
    with pytest.raises(MessageError, match="timer"):
        prepare_batch([Message("T", b"x"), Message("T", b"y", delay_ms=10)], _ids(), NOW_MS)


def test_delivers_later_covers_delay_levels_and_timers() -> None:
    assert not Message("T", b"x").delivers_later
    assert Message("T", b"x", delay_level=1).delivers_later
    assert Message("T", b"x", deliver_time_ms=NOW_MS).delivers_later
    assert Message("T", b"x", delay_ms=0).delivers_later


def test_the_send_result_carries_the_recall_handle() -> None:
    prepared = prepare_message(Message("T", b"x", delay_ms=10), _ids(), NOW_MS)
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2)
    answer = RemotingCommand.response_to(
        request,
        ResponseCode.SUCCESS,
        ext_fields={"msgId": "AB", "queueId": "1", "queueOffset": "4", "recallHandle": "djE="},
    )
    assert read_send_response(answer, prepared, QUEUE, "send").recall_handle == "djE="
    plain = RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields={"msgId": "AB"})
    assert read_send_response(plain, prepared, QUEUE, "send").recall_handle is None


def test_timer_bookkeeping_properties_are_not_user_properties() -> None:
    from pocketmq.client.message import MessageExt

    received = MessageExt(
        topic="T",
        body=b"x",
        properties={
            "TIMER_OUT_MS": "1",
            "TIMER_DEQUEUE_MS": "2",
            "TIMER_DELIVER_MS": "3",
            "p": "v",
        },
        queue=QUEUE,
        queue_offset=0,
        commit_log_offset=0,
        born_timestamp_ms=0,
        store_timestamp_ms=0,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2),
        reconsume_times=0,
        flag=0,
        sys_flag=0,
    )
    assert received.user_properties == {"p": "v"}
