"""MessageRecorder: a listener that records deliveries, from any thread, and waits for them."""

from __future__ import annotations

import asyncio
import threading

import pytest

from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.constants import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from pocketmq.testing import MessageRecorder


def _message(body: bytes, msg_id: str) -> MessageExt:
    return MessageExt(
        topic="T",
        body=body,
        properties={PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: msg_id},
        queue=MessageQueue("T", "broker-a", 0),
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


def test_it_records_bodies_ids_and_arrivals_and_counts_redeliveries_once() -> None:
    recorder = MessageRecorder()
    recorder([_message(b"a", "1"), _message(b"b", "2")])
    recorder([_message(b"a", "1")])
    assert recorder.bodies() == [b"a", b"b", b"a"]
    assert recorder.ids() == {"1", "2"}
    assert recorder.calls == 2
    assert [m.body for _, m in recorder.arrivals] == [b"a", b"b", b"a"]
    asyncio.run(recorder.wait_for(2, timeout_s=0))
    with pytest.raises(AssertionError, match="3 distinct messages"):
        asyncio.run(recorder.wait_for(3, timeout_s=0))


def test_fail_first_asks_for_redelivery_and_records_nothing() -> None:
    recorder = MessageRecorder(fail_first=1)
    with pytest.raises(RuntimeError):
        recorder([_message(b"a", "1")])
    recorder([_message(b"a", "1")])
    assert recorder.calls == 2
    assert recorder.bodies() == [b"a"]


def test_waits_see_deliveries_made_on_other_threads() -> None:
    recorder = MessageRecorder()

    async def scenario() -> None:
        deliver = threading.Timer(
            0.05, recorder, args=([_message(b"x", "1"), _message(b"y", "2")],)
        )
        deliver.start()
        try:
            assert (await recorder.wait_for_body(b"y", timeout_s=5)).msg_id == "2"
            await recorder.wait_for_bodies({b"x", b"y"}, timeout_s=5)
            await recorder.wait_for_ids({"1", "2"}, timeout_s=5)
            arrived, message = await recorder.wait_for_arrival(b"x", timeout_s=5)
            assert message.body == b"x"
            assert arrived > 0
        finally:
            deliver.join()

    asyncio.run(scenario())


def test_a_missing_body_fails_with_what_is_missing() -> None:
    recorder = MessageRecorder()
    recorder([_message(b"x", "1")])
    with pytest.raises(AssertionError, match=r"missing \[b'z'\]"):
        asyncio.run(recorder.wait_for_bodies([b"x", b"z"], timeout_s=0.05))
    with pytest.raises(AssertionError, match=r"1 of 2 missing"):
        asyncio.run(recorder.wait_for_ids(["1", "2"], timeout_s=0.05))
    with pytest.raises(AssertionError, match=r"b'z' delivered"):
        asyncio.run(recorder.wait_for_body(b"z", timeout_s=0.05))
