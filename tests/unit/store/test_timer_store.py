"""The timer message store on a real message store with a manual clock: enqueue, delivery at
the end of a slot and never before, recall markers, rolls, and recovery after clean and unclean
stops (no sockets, no sleeps)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.common.constants import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import Delivery, MessageToStore, classify_put
from pocketmq.store.message_store import MessageStore
from pocketmq.store.timer import TIMER_TOPIC, TimerMessageStore, delete_key, wheel_slot_count
from pocketmq.store.timer import delivery as delivery_module
from pocketmq.store.timer.log import ENTRY_SIZE
from pocketmq.store.timer.timer_store import SLOT_COUNT_MAX
from tests.unit.store.conftest import small_config

PRECISION_MS = 1000
REAL_TOPIC = "Real"
REAL_QUEUE = 1


def timer_message(
    out_ms: int,
    uniq_key: str,
    *,
    topic: str = REAL_TOPIC,
    deletes: str | None = None,
) -> MessageToStore:
    """A record as the send path stores a timer message (or, with `deletes`, a recall)."""
    properties = {
        PROPERTY_TIMER_OUT_MS: str(out_ms),
        PROPERTY_REAL_TOPIC: topic,
        PROPERTY_REAL_QUEUE_ID: str(REAL_QUEUE),
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq_key,
        "TAGS": "t",
        PROPERTY_TIMER_DEL_UNIQKEY: deletes,
    }
    return MessageToStore(
        topic=TIMER_TOPIC,
        body=uniq_key.encode(),
        properties=encode_properties(properties),
        born_timestamp=1_700_000_000_000,
        born_host=("10.0.0.1", 5555),
    )


class Broker:
    """A message store and its timer store on one directory, opened and reopened by hand."""

    def __init__(self, root: Path, clock: ManualClock, **settings: object) -> None:
        self.root = root
        self.clock = clock
        self.settings = {"timer_max_delay_sec": 60, **settings}
        self.slot_count: int | None = None
        self.store: MessageStore
        self.timer: TimerMessageStore
        self.open()

    def open(self) -> None:
        self.store = MessageStore(small_config(self.root, **self.settings), clock=self.clock)
        self.store.load()
        self.timer = TimerMessageStore(
            self.store,
            self.store.config,
            self.clock,
            deliver=self.deliver,
            slot_count=self.slot_count,
        )
        self.timer.load()

    async def deliver(self, message: MessageToStore) -> tuple[Delivery, str]:
        """Due messages straight into the store: these tests are about the timer store alone
        (the broker stores them through its put path)."""
        return classify_put(await self.store.put_messages([message]))

    def send(self, *messages: MessageToStore) -> None:
        for message in messages:
            assert self.store.put_messages_now([message]).ok

    def step(self) -> None:
        """One enqueue step and one delivery step, then everything stored is dispatched."""

        async def run() -> None:
            await self.timer.enqueue_available()
            await self.timer.deliver_due()
            await asyncio.sleep(0)  # the store's own dispatch callback

        asyncio.run(run())
        self.store.dispatch_now()

    def delivered(self, topic: str = REAL_TOPIC) -> list[StoredMessage]:
        found = self.store.get_message(topic, REAL_QUEUE, 0, 10_000)
        return [decode_record(record) for record in found.buffers]

    def bodies(self, topic: str = REAL_TOPIC) -> list[bytes]:
        return [message.body for message in self.delivered(topic)]

    def crash(self) -> None:
        """Closes without any clean-stop step: the next open recovers."""
        self.timer.close()
        self.store.close()

    def stop(self) -> None:
        async def run() -> None:
            await self.timer.stop()
            await self.store.shutdown()

        asyncio.run(run())

    def restart(self, *, clean: bool) -> None:
        if clean:
            self.stop()
        else:
            self.crash()
        self.open()


@pytest.fixture
def broker(tmp_path: Path, clock: ManualClock) -> Iterator[Broker]:
    started = Broker(tmp_path / "store", clock)
    yield started
    started.crash()


def test_a_timer_is_delivered_when_its_slot_ends_and_not_a_millisecond_before(
    broker: Broker, clock: ManualClock
) -> None:
    start = clock.now_ms()
    broker.send(timer_message(start + 3000, "A"))
    broker.step()
    assert broker.timer.pending == 1
    clock.advance(3.999)
    broker.step()
    assert broker.bodies() == []
    clock.advance(0.001)
    broker.step()
    [message] = broker.delivered()
    assert message.body == b"A"
    assert message.topic == REAL_TOPIC
    assert message.queue_id == REAL_QUEUE
    assert PROPERTY_REAL_TOPIC not in message.properties
    assert PROPERTY_REAL_QUEUE_ID not in message.properties
    assert message.properties[PROPERTY_TIMER_OUT_MS] == str(start + 3000)
    assert message.properties[PROPERTY_TIMER_DEQUEUE_MS] == str(start + 4000)
    assert message.properties["TAGS"] == "t"
    assert broker.timer.pending == 0
    clock.advance(5)
    broker.step()
    assert broker.bodies() == [b"A"]


def test_random_timers_each_arrive_once_at_the_first_look_after_their_slot_ends(
    broker: Broker, clock: ManualClock
) -> None:
    rng = random.Random(20261122)
    start = clock.now_ms()
    due_ms = {}
    for index in range(300):
        out_ms = start + rng.randrange(0, 40) * PRECISION_MS
        due_ms[str(index).encode()] = out_ms + PRECISION_MS
        broker.send(timer_message(out_ms, str(index)))
    seen: dict[bytes, int] = {}
    for _ in range(400):
        broker.step()
        now = clock.now_ms()
        for body in broker.bodies()[len(seen) :]:
            seen[body] = now
        if len(seen) == len(due_ms):
            break
        clock.advance(rng.randrange(1, 700) / 1000)
    assert len(broker.bodies()) == len(due_ms)  # none twice
    for body, arrived in seen.items():
        assert arrived >= due_ms[body], body  # never early
        assert arrived - due_ms[body] < 700, body  # at the first look after it was due


def test_entries_of_one_slot_are_delivered_in_the_order_they_were_sent(
    broker: Broker, clock: ManualClock
) -> None:
    out_ms = clock.now_ms() + 2000
    broker.send(*(timer_message(out_ms, f"m{i}") for i in range(6)))
    broker.step()
    clock.advance(3)
    broker.step()
    assert broker.bodies() == [f"m{i}".encode() for i in range(6)]


def test_a_recall_marker_stops_exactly_the_message_it_names(
    broker: Broker, clock: ManualClock
) -> None:
    out_ms = clock.now_ms() + 2000
    broker.send(
        timer_message(out_ms, "A"),
        timer_message(out_ms, "B"),
        timer_message(out_ms, "C", topic="Other"),
        timer_message(out_ms, "A", deletes=delete_key(REAL_TOPIC, "A")),
        timer_message(out_ms, "C", deletes=delete_key(REAL_TOPIC, "C")),  # wrong topic
    )
    broker.step()
    assert broker.timer.pending == 3
    assert broker.timer.wheel.get(out_ms).count == 1  # three timers, two markers
    clock.advance(3)
    broker.step()
    assert broker.bodies() == [b"B"]
    assert broker.bodies("Other") == [b"C"]
    assert broker.timer.pending == 0


def test_a_timer_whose_slot_has_passed_is_delivered_when_enqueued(
    broker: Broker, clock: ManualClock
) -> None:
    clock.advance(10)
    broker.step()  # the wheel reads up to now
    broker.send(timer_message(clock.now_ms() - 5000, "late"))
    broker.step()
    assert broker.bodies() == [b"late"]
    assert broker.timer.pending == 0
    broker.restart(clean=False)
    broker.step()
    assert broker.bodies() == [b"late"]  # its log entry tells recovery it was enqueued


def test_pending_timers_survive_a_clean_restart_without_a_rebuild(
    broker: Broker, clock: ManualClock
) -> None:
    start = clock.now_ms()
    broker.send(*(timer_message(start + 1000 * i, f"m{i}") for i in range(1, 4)))
    broker.step()
    broker.restart(clean=True)
    loaded = broker.timer.last_load
    assert loaded is not None
    assert (loaded.clean, loaded.rebuilt_entries, loaded.pending) == (True, 0, 3)
    clock.advance(5)
    broker.step()
    assert broker.bodies() == [b"m1", b"m2", b"m3"]


def test_after_an_unclean_stop_the_wheel_is_rebuilt_even_if_its_file_is_garbage(
    broker: Broker, clock: ManualClock
) -> None:
    start = clock.now_ms()
    broker.send(*(timer_message(start + 1000 * (i % 3 + 1), f"m{i}") for i in range(9)))
    broker.step()
    broker.crash()
    wheel_path = broker.root / "timer" / "wheel"
    garbage = random.Random(3).randbytes(wheel_path.stat().st_size)
    wheel_path.write_bytes(garbage)
    broker.open()
    loaded = broker.timer.last_load
    assert loaded is not None
    assert (loaded.clean, loaded.rebuilt_entries, loaded.pending) == (False, 9, 9)
    clock.advance(5)
    broker.step()
    assert sorted(broker.bodies()) == sorted(f"m{i}".encode() for i in range(9))


def test_a_timer_whose_log_entry_was_torn_is_enqueued_again_from_the_queue(
    broker: Broker, clock: ManualClock
) -> None:
    start = clock.now_ms()
    broker.send(*(timer_message(start + 2000, f"m{i}") for i in range(3)))
    broker.step()
    broker.crash()
    log_file = next((broker.root / "timer" / "log").iterdir())
    data = bytearray(log_file.read_bytes())
    data[2 * ENTRY_SIZE + 10] ^= 0xFF
    log_file.write_bytes(bytes(data))
    broker.open()
    loaded = broker.timer.last_load
    assert loaded is not None
    assert (loaded.rebuilt_entries, loaded.enqueue_offset) == (2, 2)
    broker.step()
    clock.advance(4)
    broker.step()
    assert broker.bodies() == [b"m0", b"m1", b"m2"]


def test_a_slot_cut_short_by_a_crash_goes_on_where_it_stopped(
    broker: Broker, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery_module, "DELIVER_BATCH", 2)
    out_ms = clock.now_ms() + 1000
    broker.send(*(timer_message(out_ms, f"m{i}") for i in range(5)))
    broker.step()
    clock.advance(3)
    broker.step()
    assert broker.bodies() == [b"m0", b"m1"]
    assert broker.timer.slot_done == 2
    broker.restart(clean=False)
    for _ in range(3):
        broker.step()
    assert broker.bodies() == [b"m0", b"m1", b"m2", b"m3", b"m4"]


def test_a_time_beyond_the_wheel_goes_round_until_it_is_within_reach(
    tmp_path: Path, clock: ManualClock
) -> None:
    small = Broker.__new__(Broker)
    small.root, small.clock = tmp_path / "small", clock
    small.settings = {"timer_max_delay_sec": 60}
    small.slot_count = 8  # reaches 8 s ahead
    small.open()
    try:
        start = clock.now_ms()
        small.send(timer_message(start + 20_000, "far"))
        small.step()
        first = small.timer.wheel.get(start + 7000)
        assert not first.empty  # parked in the farthest slot
        for _ in range(60):
            clock.advance(0.5)
            small.step()
            if small.bodies():
                break
        [message] = small.delivered()
        assert clock.now_ms() >= start + 21_000
        assert message.properties[PROPERTY_TIMER_ROLL_TIMES] == "2"
        assert message.properties[PROPERTY_TIMER_OUT_MS] == str(start + 20_000)
    finally:
        small.crash()


def test_log_files_are_deleted_once_every_entry_in_them_is_delivered(
    tmp_path: Path, clock: ManualClock
) -> None:
    broker = Broker(tmp_path / "store", clock, mapped_file_size_timer_log=4 * ENTRY_SIZE)
    try:
        start = clock.now_ms()
        broker.send(*(timer_message(start + 1000 * (i + 1), f"m{i}") for i in range(10)))
        broker.step()
        broker.step()
        assert broker.timer.log.file_count() == 3
        clock.advance(6)
        broker.step()
        assert asyncio.run(broker.timer.delete_delivered_log_files()) == 1  # m0-m3 delivered
        clock.advance(10)
        broker.step()
        assert asyncio.run(broker.timer.delete_delivered_log_files()) == 1  # never the last
        assert broker.timer.log.file_count() == 1
        broker.restart(clean=False)
        broker.step()
        assert len(broker.bodies()) == 10
    finally:
        broker.crash()


def test_runtime_stats_report_pending_timers_and_how_far_enqueuing_is_behind(
    broker: Broker, clock: ManualClock
) -> None:
    start = clock.now_ms()
    broker.send(*(timer_message(start + 5000, f"m{i}") for i in range(3)))
    assert broker.timer.runtime_stats()["timerOffsetBehind"] == "3"
    broker.step()
    assert broker.timer.runtime_stats() == {
        "timerReadBehind": "0",
        "timerOffsetBehind": "0",
        "timerCongestNum": "3",
    }


def test_a_record_without_a_delivery_time_is_skipped(broker: Broker, clock: ManualClock) -> None:
    broken = MessageToStore(topic=TIMER_TOPIC, body=b"?", properties=encode_properties({"a": "b"}))
    broker.send(broken, timer_message(clock.now_ms() + 1000, "ok"))
    broker.step()
    clock.advance(2)
    broker.step()
    assert broker.bodies() == [b"ok"]


def test_the_wheel_covers_twice_the_longest_delay_up_to_rocketmqs_size() -> None:
    assert wheel_slot_count(1000, 3 * 24 * 3600) == 2 * 3 * 24 * 3600 + 60
    assert wheel_slot_count(1000, 10) == 80
    assert wheel_slot_count(100, 3 * 24 * 3600) == SLOT_COUNT_MAX


def test_the_task_enqueues_what_is_dispatched_and_stops_cleanly(
    broker: Broker, clock: ManualClock
) -> None:
    async def run() -> None:
        broker.timer.start()
        result = await broker.store.put_messages([timer_message(clock.now_ms() + 5000, "A")])
        assert result.ok
        for _ in range(200):  # the dispatch callback wakes the task; no clock involved
            await asyncio.sleep(0)
            if broker.timer.pending:
                break
        assert broker.timer.pending == 1
        await broker.timer.stop()

    asyncio.run(run())
    broker.timer.close()
    broker.store.close()
    broker.open()
    loaded = broker.timer.last_load
    assert loaded is not None
    assert (loaded.clean, loaded.pending) == (True, 1)
