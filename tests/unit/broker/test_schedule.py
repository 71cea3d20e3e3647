"""Delayed messages by level: the rules (`broker/schedule.py`), the delivery time as tag code
(`store/dispatch.py`) and the delivery loop (`broker/delay_delivery.py`) on a real store in
tmp_path with a manual clock. RocketMQ: `ScheduleMessageService`, `CommitLog` tag codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.schedule import (
    DELAY_LEVELS_DEFAULT,
    SCHEDULE_TOPIC,
    DelayLevelError,
    DelayLevels,
    DelayOffsets,
    UndeliverableError,
    correct_deliver_timestamp,
    parse_delay_levels,
    redirect_delayed,
    restore_due,
)
from pocketmq.common.constants import TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore, PutResult, PutStatus
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch import deliver_timestamp_ms
from pocketmq.store.message_store import MessageStore

T = TypeVar("T")
NOW = 1_700_000_000_000
LEVELS = DelayLevels((1000, 5000, 10_000))


def put_path(store: MessageStore, clock: ManualClock) -> PutPath:
    return PutPath(store, clock, PutSettings(delay_level_count=LEVELS.max_level))


TOPIC = "Orders"


# -- levels -------------------------------------------------------------------------------


def test_default_levels_are_rocketmqs_eighteen() -> None:
    levels = parse_delay_levels(DELAY_LEVELS_DEFAULT)
    assert len(levels) == 18
    assert levels[:4] == [1000, 5000, 10_000, 30_000]
    assert levels[4:6] == [60_000, 120_000]
    assert levels[-2:] == [3_600_000, 7_200_000]


def test_levels_take_rocketmqs_units_and_milliseconds() -> None:
    assert parse_delay_levels("1s 2m 3h 1d 250ms") == [
        1000,
        120_000,
        10_800_000,
        86_400_000,
        250,
    ]
    assert parse_delay_levels("  1S   5s ") == [1000, 5000]


@pytest.mark.parametrize("text", ["", "   ", "5", "1x", "1s two", "-1s", "1.5s", "s"])
def test_bad_levels_are_refused_naming_the_item(text: str) -> None:
    with pytest.raises(DelayLevelError, match="messageDelayLevel"):
        parse_delay_levels(text)


def test_deliver_time_is_store_time_plus_the_levels_delay_clamped_to_the_last() -> None:
    assert LEVELS.deliver_timestamp_ms(1, NOW) == NOW + 1000
    assert LEVELS.deliver_timestamp_ms(3, NOW) == NOW + 10_000
    assert LEVELS.deliver_timestamp_ms(9, NOW) == NOW + 10_000
    assert deliver_timestamp_ms((), 2, NOW) == NOW + 1000  # RocketMQ's fallback


def test_a_due_time_beyond_the_levels_delay_counts_as_due_now() -> None:
    assert correct_deliver_timestamp(NOW, NOW + 900, 1000) == NOW + 900
    assert correct_deliver_timestamp(NOW, NOW + 1000, 1000) == NOW + 1000
    # The clock went back, or the level was shortened since the message was stored.
    assert correct_deliver_timestamp(NOW, NOW + 60_000, 1000) == NOW


# -- redirect and restore -----------------------------------------------------------------


def outgoing(properties: dict[str, str], *, sys_flag: int = 0) -> MessageToStore:
    return MessageToStore(
        TOPIC,
        b"body",
        encode_properties(properties),
        queue_id=3,
        sys_flag=sys_flag,
        born_timestamp=NOW - 5,
        born_host=("10.0.0.7", 5000),
        reconsume_times=2,
    )


def test_a_delayed_message_waits_in_the_schedule_queue_of_its_level() -> None:
    redirected = redirect_delayed(outgoing({"DELAY": "2", "KEYS": "k", "UNIQ_KEY": "U1"}), 3)
    assert (redirected.topic, redirected.queue_id) == (SCHEDULE_TOPIC, 1)
    assert decode_properties(redirected.properties) == {
        "DELAY": "2",
        "KEYS": "k",
        "UNIQ_KEY": "U1",
        "REAL_TOPIC": TOPIC,
        "REAL_QID": "3",
    }
    assert (redirected.body, redirected.reconsume_times) == (b"body", 2)


def test_levels_above_the_last_are_clamped_to_it() -> None:
    redirected = redirect_delayed(outgoing({"DELAY": "30"}), 18)
    assert redirected.queue_id == 17
    assert decode_properties(redirected.properties)["DELAY"] == "18"


@pytest.mark.parametrize(
    ("properties", "sys_flag", "level_count"),
    [
        ({"KEYS": "k"}, 0, 18),
        ({"DELAY": "0"}, 0, 18),
        ({"DELAY": "-1"}, 0, 18),
        ({"DELAY": "soon"}, 0, 18),
        ({"DELAY": "2"}, TRANSACTION_PREPARED_TYPE, 18),  # a half message waits for its commit
        ({"DELAY": "2"}, 0, 0),  # delays off
    ],
)
def test_other_messages_are_stored_as_sent(
    properties: dict[str, str], sys_flag: int, level_count: int
) -> None:
    message = outgoing(properties, sys_flag=sys_flag)
    assert redirect_delayed(message, level_count) is message


def test_a_committed_transactional_message_is_delayed_too() -> None:
    message = outgoing({"DELAY": "1"}, sys_flag=TRANSACTION_COMMIT_TYPE)
    assert redirect_delayed(message, 18).topic == SCHEDULE_TOPIC


def scheduled(properties: dict[str, str]) -> StoredMessage:
    return StoredMessage(
        topic=SCHEDULE_TOPIC,
        body=b"body",
        queue_id=1,
        flag=7,
        sys_flag=0,
        born_timestamp=NOW - 5,
        born_host=("10.0.0.7", 5000),
        store_timestamp=NOW,
        reconsume_times=2,
        properties=properties,
    )


def test_a_due_message_goes_back_to_its_real_queue_without_its_delay() -> None:
    restored = restore_due(
        scheduled(
            {
                "DELAY": "2",
                "REAL_TOPIC": TOPIC,
                "REAL_QID": "3",
                "UNIQ_KEY": "U1",
                "KEYS": "k",
                "TAGS": "t",
                "TIMER_DELIVER_MS": "1",
            }
        )
    )
    assert (restored.topic, restored.queue_id) == (TOPIC, 3)
    assert decode_properties(restored.properties) == {
        "REAL_TOPIC": TOPIC,
        "REAL_QID": "3",
        "UNIQ_KEY": "U1",
        "KEYS": "k",
        "TAGS": "t",
    }
    assert (restored.body, restored.flag, restored.reconsume_times) == (b"body", 7, 2)
    assert (restored.born_timestamp, restored.born_host) == (NOW - 5, ("10.0.0.7", 5000))


@pytest.mark.parametrize(
    "properties",
    [
        {"DELAY": "1"},
        {"DELAY": "1", "REAL_TOPIC": TOPIC, "REAL_QID": "x"},
        {"DELAY": "1", "REAL_TOPIC": "RMQ_SYS_TRANS_HALF_TOPIC", "REAL_QID": "0"},
    ],
)
def test_a_record_without_a_usable_real_place_is_undeliverable(properties: dict[str, str]) -> None:
    with pytest.raises(UndeliverableError):
        restore_due(scheduled(properties))


# -- delayOffset.json ---------------------------------------------------------------------


def test_delay_offsets_read_and_write_rocketmqs_document() -> None:
    offsets = DelayOffsets()
    offsets.load(
        {
            "offsetTable": {"1": 5, "3": 12, "x": 1, "2": "bad", "4": -1},
            "dataVersion": {"counter": 3, "timestamp": NOW},
        }
    )
    assert offsets.offsets == {1: 5, 3: 12}
    assert not offsets.changed
    offsets.set(2, 4)
    assert offsets.changed
    assert offsets.snapshot() == {"offsetTable": {"1": 5, "2": 4, "3": 12}}


def test_delay_offsets_are_kept_within_their_queue() -> None:
    offsets = DelayOffsets()
    offsets.load({"offsetTable": {"1": 5, "2": 50, "3": 7}})
    assert offsets.correct(1, 8, 20) == 5  # entries removed by retention
    assert offsets.correct(2, 0, 30) == 50  # the tail was lost in a crash
    assert offsets.correct(3, 0, 30) is None
    assert offsets.offsets == {1: 8, 2: 30, 3: 7}


# -- on a store ---------------------------------------------------------------------------


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def open_store(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[[], MessageStore]]:
    opened: list[MessageStore] = []

    def open_one() -> MessageStore:
        config = MessageStoreConfig(
            store_path_root_dir=str(tmp_path / "store"),
            mapped_file_size_commit_log=256 * 1024,
            mapped_file_size_consume_queue=20 * 100,
            max_hash_slot_num=64,
            max_index_num=400,
        )
        store = MessageStore(config, clock=clock)
        store.dispatcher.schedule_delays_ms = LEVELS.delays_ms
        store.load()
        opened.append(store)
        return store

    yield open_one
    for store in opened:
        store.close()


def send_delayed(store: MessageStore, level: int, body: bytes, *, uniq_key: str = "") -> None:
    properties = {"DELAY": str(level), "KEYS": "k", "TAGS": "t", "UNIQ_KEY": uniq_key or None}
    message = MessageToStore(
        TOPIC,
        body,
        encode_properties(properties),
        queue_id=2,
        born_timestamp=NOW - 1,
        reconsume_times=1,
    )
    assert store.put_messages_now([redirect_delayed(message, LEVELS.max_level)]).ok


def real_queue(store: MessageStore) -> list[StoredMessage]:
    store.dispatch_now()
    found: list[StoredMessage] = []
    offset = 0
    while True:
        result = store.get_message(TOPIC, 2, offset, 32)
        if not result.buffers:
            return found
        found.extend(decode_record(buffer) for buffer in result.buffers)
        offset = result.next_begin_offset


def run(coroutine_factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(coroutine_factory())


def test_schedule_entries_carry_their_delivery_time_as_tag_code(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    store = open_store()
    send_delayed(store, 2, b"a")
    clock.advance(0.25)
    send_delayed(store, 2, b"b")
    send_delayed(store, 9, b"c")  # clamped to level 3
    level_2 = store.consume_queues.find(SCHEDULE_TOPIC, 1)
    level_3 = store.consume_queues.find(SCHEDULE_TOPIC, 2)
    assert level_2 is not None
    assert level_3 is not None
    assert [tags for *_, tags in level_2.entries(0, 10)] == [NOW + 5000, NOW + 250 + 5000]
    assert [tags for *_, tags in level_3.entries(0, 10)] == [NOW + 250 + 10_000]


def test_a_delayed_message_is_invisible_until_due_then_delivered_with_its_properties(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    store = open_store()
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load(None)
    send_delayed(store, 1, b"a", uniq_key="U1")

    first = run(delivery.deliver_due)
    assert (first.delivered, first.next_due_ms, first.more) == (0, NOW + 1000, False)
    assert real_queue(store) == []

    clock.advance(0.999)
    assert run(delivery.deliver_due).delivered == 0
    clock.advance(0.001)
    assert run(delivery.deliver_due).delivered == 1
    [message] = real_queue(store)
    assert message.body == b"a"
    assert message.reconsume_times == 1
    assert message.store_timestamp == NOW + 1000
    assert "DELAY" not in message.properties
    assert {k: message.properties[k] for k in ("KEYS", "TAGS", "UNIQ_KEY", "REAL_QID")} == {
        "KEYS": "k",
        "TAGS": "t",
        "UNIQ_KEY": "U1",
        "REAL_QID": "2",
    }
    assert delivery.offsets.offsets == {1: 1}
    assert run(delivery.deliver_due).delivered == 0  # once


def test_levels_deliver_independently_and_in_store_order(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    store = open_store()
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock, batch_per_level=2)
    delivery.load(None)
    send_delayed(store, 2, b"five")
    for body in (b"one-a", b"one-b", b"one-c"):
        send_delayed(store, 1, body)
    clock.advance(1)
    first = run(delivery.deliver_due)
    assert (first.delivered, first.more) == (2, True)  # the batch of level 1
    second = run(delivery.deliver_due)
    assert (second.delivered, second.next_due_ms) == (1, NOW + 5000)
    clock.advance(4)
    assert run(delivery.deliver_due).delivered == 1
    assert [m.body for m in real_queue(store)] == [b"one-a", b"one-b", b"one-c", b"five"]


def test_offsets_persist_in_rocketmqs_shape_and_survive_a_restart(
    open_store: Callable[[], MessageStore], clock: ManualClock, tmp_path: Path
) -> None:
    store = open_store()
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load(None)
    send_delayed(store, 1, b"early", uniq_key="U1")
    send_delayed(store, 3, b"late", uniq_key="U2")
    clock.advance(1)
    assert run(delivery.deliver_due).delivered == 1
    run(delivery.stop)
    saved = json.loads((tmp_path / "store" / "config" / "delayOffset.json").read_text())
    assert saved == {"offsetTable": {"1": 1}}
    store.close()

    reopened = open_store()
    again = DelayDelivery(reopened, put_path(reopened, clock), LEVELS, clock)
    again.load(reopened.metadata.load_all().get("delayOffset.json"))
    clock.advance(9)
    assert run(again.deliver_due).delivered == 1
    assert [m.body for m in real_queue(reopened)] == [b"early", b"late"]


def test_a_delivery_whose_offset_was_lost_is_not_repeated_after_a_restart(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    store = open_store()
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load(None)
    for uniq_key in ("U1", "U2"):
        send_delayed(store, 1, b"same body", uniq_key=uniq_key)
    clock.advance(1)
    assert run(delivery.deliver_due).delivered == 2
    store.dispatch_now()
    send_delayed(store, 1, b"same body", uniq_key="U3")

    # A crash before the offsets were saved: the next start begins at 0 again.
    restarted = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    restarted.load(None)
    clock.advance(1)
    assert run(restarted.deliver_due).delivered == 1  # only U3
    uniq_keys = [m.properties["UNIQ_KEY"] for m in real_queue(store)]
    assert uniq_keys == ["U1", "U2", "U3"]
    assert restarted.offsets.offsets == {1: 3}


def test_the_same_uniq_key_sent_again_later_is_still_delivered(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    """A retry copy keeps its UNIQ_KEY but has another reconsume count: not a duplicate."""
    store = open_store()
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load(None)
    send_delayed(store, 1, b"x", uniq_key="U1")
    clock.advance(1)
    assert run(delivery.deliver_due).delivered == 1
    store.dispatch_now()
    properties = {"DELAY": "1", "KEYS": "k", "TAGS": "t", "UNIQ_KEY": "U1"}
    message = MessageToStore(
        TOPIC,
        b"x",
        encode_properties(properties),
        queue_id=2,
        born_timestamp=NOW - 1,
        reconsume_times=2,  # all else as the first
    )
    message = redirect_delayed(message, LEVELS.max_level)
    assert store.put_messages_now([message]).ok
    restarted = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    restarted.load({"offsetTable": {"1": 1}})
    clock.advance(1)
    assert run(restarted.deliver_due).delivered == 1


def test_undeliverable_and_missing_records_are_skipped(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    store = open_store()
    no_real_topic = MessageToStore(SCHEDULE_TOPIC, b"?", encode_properties({"DELAY": "1"}))
    assert store.put_messages_now([no_real_topic]).ok
    send_delayed(store, 1, b"fine")
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load(None)
    clock.advance(1)
    assert run(delivery.deliver_due).delivered == 1
    assert [m.body for m in real_queue(store)] == [b"fine"]
    assert delivery.offsets.offsets[1] == 2


def test_a_failed_put_holds_its_level_and_is_tried_again(
    open_store: Callable[[], MessageStore], clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store()
    send_delayed(store, 1, b"a")
    send_delayed(store, 2, b"b")
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load(None)
    real_put = store.put_messages
    failures = [PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark="disk full")]

    async def flaky_put(messages: Sequence[MessageToStore]) -> PutResult:
        if failures:
            return failures.pop()
        return await real_put(messages)

    monkeypatch.setattr(store, "put_messages", flaky_put)
    clock.advance(5)
    failed = run(delivery.deliver_due)
    assert failed.delivered == 1  # level 2 went on
    assert delivery.offsets.get(1) == 0
    assert run(delivery.deliver_due).delivered == 0  # level 1 waits
    clock.advance(1)
    assert run(delivery.deliver_due).delivered == 1
    assert sorted(m.body for m in real_queue(store)) == [b"a", b"b"]


def test_saved_offsets_past_the_queue_are_corrected_at_load(
    open_store: Callable[[], MessageStore], clock: ManualClock
) -> None:
    store = open_store()
    send_delayed(store, 1, b"a")
    delivery = DelayDelivery(store, put_path(store, clock), LEVELS, clock)
    delivery.load({"offsetTable": {"1": 9, "2": 4}})
    assert delivery.offsets.offsets == {1: 1, 2: 0}
    assert delivery.runtime_stats() == {
        "scheduleMessageOffset_1": "1,1",
        "scheduleMessageOffset_2": "0,0",
    }
