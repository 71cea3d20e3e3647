"""The put path: the one ordered way into the store (dead letter -> half -> timer -> delay ->
store), its classification of outcomes, and that no other broker module writes to the store."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

import pocketmq
from pocketmq.broker.put_path import PutPath, PutRefusal, PutSettings
from pocketmq.broker.schedule import SCHEDULE_TOPIC
from pocketmq.broker.timer_messages import TimerSettings
from pocketmq.broker.transaction.half_messages import CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC
from pocketmq.common.batch import encode_batch_body, scan_batch_body
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import TRANSACTION_COMMIT_TYPE, TRANSACTION_TYPE_MASK
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import BatchToStore, Delivery, MessageToStore, PutResult, PutStatus
from pocketmq.store.message_store import StoreNotRunningError
from pocketmq.store.timer import TIMER_TOPIC

NOW = 1_700_000_000_000
TIMER = TimerSettings(enabled=True, precision_ms=1000, max_delay_sec=3600, broker_name="b")
SETTINGS = PutSettings(delay_level_count=3, timer=TIMER, broker_ip="10.0.0.1")


@dataclass
class FakeWriter:
    """Answers every put with `result` (or raises `error`); remembers what it was given."""

    result: PutResult = field(default_factory=lambda: PutResult(PutStatus.PUT_OK, [0], 0))
    error: Exception | None = None
    received: list[MessageToStore] = field(default_factory=list)

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        if self.error is not None:
            raise self.error
        self.received.extend(messages)
        return self.result


def message(topic: str = "Orders", **properties: str) -> MessageToStore:
    return MessageToStore(topic, b"body", encode_properties(properties), queue_id=2)


def put(writer: FakeWriter, messages: Sequence[MessageToStore], **how: object) -> MessageToStore:
    path = PutPath(writer, ManualClock(NOW), SETTINGS)
    asyncio.run(path.put(messages, **how))  # type: ignore[arg-type]
    [stored] = writer.received
    return stored


def test_a_plain_message_is_stored_as_it_came() -> None:
    sent = message(TAGS="a")
    assert put(FakeWriter(), [sent]) is sent


def test_a_delay_level_goes_through_the_schedule_topic() -> None:
    stored = put(FakeWriter(), [message(DELAY="2")])
    assert (stored.topic, stored.queue_id) == (SCHEDULE_TOPIC, 1)
    assert decode_properties(stored.properties)["REAL_TOPIC"] == "Orders"


def test_a_future_timer_goes_through_the_timer_topic_but_not_in_a_batch() -> None:
    timed = message(TIMER_DELAY_MS="5000")
    assert put(FakeWriter(), [timed]).topic == TIMER_TOPIC
    assert put(FakeWriter(), [timed], batch=True) is timed


@dataclass
class FakeBatchWriter(FakeWriter):
    """A writer that also takes batch sends whole, as the message store does."""

    batches: list[BatchToStore] = field(default_factory=list)

    async def put_batch(self, batch: BatchToStore) -> PutResult:
        if self.error is not None:
            raise self.error
        self.batches.append(batch)
        return self.result


def batch_of(*entries: dict[str, str]) -> BatchToStore:
    body = encode_batch_body((0, b"body", encode_properties(entry)) for entry in entries)
    return BatchToStore("Orders", 2, body, scan_batch_body(body))


def put_batch(writer: FakeWriter, batch: BatchToStore, settings: PutSettings = SETTINGS) -> None:
    asyncio.run(PutPath(writer, ManualClock(NOW), settings).put_batch(batch))


def test_a_batch_goes_whole_to_a_writer_that_takes_batches() -> None:
    writer = FakeBatchWriter()
    batch = batch_of({"KEYS": "a"}, {"TIMER_DELAY_MS": "5000"})  # a batch takes no timer
    put_batch(writer, batch)
    assert writer.batches == [batch]
    assert writer.received == []


def test_a_batch_goes_message_by_message_to_other_writers() -> None:
    writer = FakeWriter()
    put_batch(writer, batch_of({"KEYS": "a"}, {"KEYS": "b"}))
    assert [decode_properties(m.properties)["KEYS"] for m in writer.received] == ["a", "b"]
    assert {(m.topic, m.queue_id, m.body) for m in writer.received} == {("Orders", 2, b"body")}


def test_a_batch_with_a_delayed_entry_goes_message_by_message_and_waits() -> None:
    writer = FakeBatchWriter()
    put_batch(writer, batch_of({"KEYS": "a"}, {"DELAY": "2"}))
    assert writer.batches == []
    assert [m.topic for m in writer.received] == ["Orders", SCHEDULE_TOPIC]
    # With delays off, DELAY is stored as sent: the batch goes whole.
    put_batch(writer, batch_of({"DELAY": "2"}), replace(SETTINGS, delay_level_count=0))
    assert len(writer.batches) == 1


def test_a_stopped_store_refuses_a_batch_as_service_not_available() -> None:
    writer = FakeBatchWriter(error=StoreNotRunningError("stopped"))
    path = PutPath(writer, ManualClock(NOW), SETTINGS)
    outcome = asyncio.run(path.put_batch(batch_of({"KEYS": "a"})))
    assert outcome.result.status is PutStatus.SERVICE_NOT_AVAILABLE


def test_a_delay_level_wins_over_a_timer_as_in_rocketmq() -> None:
    stored = put(FakeWriter(), [message(DELAY="1", TIMER_DELAY_MS="5000")])
    assert stored.topic == SCHEDULE_TOPIC
    assert "TIMER_DELAY_MS" not in decode_properties(stored.properties)


def test_a_dead_letter_loses_its_delay_and_goes_to_the_dlq() -> None:
    stored = put(FakeWriter(), [message("%RETRY%g", DELAY="3")], dead_letter_group="g")
    assert (stored.topic, stored.queue_id) == ("%DLQ%g", 0)
    assert "DELAY" not in decode_properties(stored.properties)


def test_a_transactional_send_becomes_a_half_that_no_wait_applies_to() -> None:
    sent = message(TRAN_MSG="true", DELAY="2", TIMER_DELAY_MS="5000", UNIQ_KEY="U")
    stored = put(FakeWriter(), [sent], transaction_send=True)
    properties = decode_properties(stored.properties)
    assert (stored.topic, stored.queue_id) == (HALF_TOPIC, 0)
    assert properties["DELAY"] == "2"
    assert properties["TIMER_DELAY_MS"] == "5000"


@pytest.mark.parametrize("topic", [HALF_TOPIC, OP_TOPIC, CHECK_MAX_TIME_TOPIC])
def test_transaction_records_stored_again_are_never_delayed(topic: str) -> None:
    kept = message(topic, DELAY="2", TIMER_DELAY_MS="5000")
    assert put(FakeWriter(), [kept]) is kept


def test_a_commit_with_a_delay_is_delayed() -> None:
    committed = message(DELAY="2")
    committed.sys_flag = TRANSACTION_COMMIT_TYPE
    stored = put(FakeWriter(), [committed])
    assert stored.topic == SCHEDULE_TOPIC
    assert stored.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE


def test_refusals_name_the_code_and_store_nothing() -> None:
    writer = FakeWriter()
    path = PutPath(writer, ManualClock(NOW), PutSettings(reject_transaction_message=True))
    with pytest.raises(PutRefusal) as refused:
        asyncio.run(path.put([message(TRAN_MSG="true")], transaction_send=True))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    path = PutPath(writer, ManualClock(NOW), SETTINGS)
    with pytest.raises(PutRefusal) as refused:
        asyncio.run(path.put([message(TIMER_DELAY_SEC="999999")]))
    assert refused.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert writer.received == []


def test_a_stopped_store_is_service_not_available() -> None:
    writer = FakeWriter(error=StoreNotRunningError("stopped"))
    outcome = asyncio.run(PutPath(writer, ManualClock(NOW), SETTINGS).put([message()]))
    assert outcome.result.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert not outcome.stored
    assert not outcome.never_storable


@pytest.mark.parametrize(
    ("status", "delivery"),
    [
        (PutStatus.PUT_OK, Delivery.STORED),
        (PutStatus.FLUSH_DISK_TIMEOUT, Delivery.STORED),
        (PutStatus.SLAVE_NOT_AVAILABLE, Delivery.STORED),
        (PutStatus.MESSAGE_ILLEGAL, Delivery.SKIPPED),
        (PutStatus.PROPERTIES_SIZE_EXCEEDED, Delivery.SKIPPED),
        (PutStatus.SERVICE_NOT_AVAILABLE, Delivery.RETRY),
        (PutStatus.CREATE_MAPPED_FILE_FAILED, Delivery.RETRY),
        (PutStatus.OS_PAGE_CACHE_BUSY, Delivery.RETRY),
    ],
)
def test_deliveries_are_classified_once(status: PutStatus, delivery: Delivery) -> None:
    writer = FakeWriter(result=PutResult(status, [0], 0))
    outcome, _why = asyncio.run(PutPath(writer, ManualClock(NOW), SETTINGS).deliver(message()))
    assert outcome is delivery


def test_a_delivery_refused_by_a_step_is_skipped_not_raised() -> None:
    path = PutPath(FakeWriter(), ManualClock(NOW), SETTINGS)
    outcome, why = asyncio.run(path.deliver(message(TIMER_DELAY_SEC="999999")))
    assert outcome is Delivery.SKIPPED
    assert "timerMaxDelaySec" in why


def test_no_broker_or_timer_module_but_the_put_path_writes_to_the_store() -> None:
    """Every door goes through `PutPath`: that is where a replicated CommitLog plugs in."""
    package = Path(pocketmq.__file__).parent
    writes = re.compile(r"\.put_messages(_now)?\(")
    offenders = [
        str(path.relative_to(package))
        for folder in (package / "broker", package / "store" / "timer")
        for path in folder.rglob("*.py")
        if path.name != "put_path.py" and writes.search(path.read_text())
    ]
    assert offenders == []
