"""The labels the broker's send path gives a message: RocketMQ 5's `message_type`, and which
topics count as traffic."""

from __future__ import annotations

import pytest

from pocketmq.broker.metrics import BrokerMetrics, _LagView, message_type
from pocketmq.observability.exporter import source_for
from pocketmq.observability.metrics_config import MetricsConfig


@pytest.mark.parametrize(
    ("properties", "expected"),
    [
        ("KEYS\x01k\x02UNIQ_KEY\x01ABC\x02WAIT\x01true\x02", "normal"),
        ("DELAY\x013\x02", "delay"),
        ("KEYS\x01k\x02TIMER_DELAY_SEC\x015\x02", "delay"),
        ("TIMER_DELIVER_MS\x011790000000000\x02", "delay"),
        ("A\x01b\x02TRAN_MSG\x01true\x02", "transaction"),
        ("TRAN_MSG\x01false\x02", "normal"),
        ("__SHARDINGKEY\x01order-1\x02", "fifo"),
        # A user property whose name only ends like a system one is not one.
        ("MYDELAY\x01x\x02NOTTIMER_X\x011\x02", "normal"),
        ("", "normal"),
    ],
)
def test_message_type_follows_the_properties(properties: str, expected: str) -> None:
    assert message_type(properties) == expected


def test_retry_and_dead_letter_sends_are_not_traffic_but_are_receipts() -> None:
    metrics = BrokerMetrics(source_for(MetricsConfig(), "broker-meter", "broker", "c", "b"))
    metrics.stored("Orders", "normal", 2, 300, "FLUSHED")
    metrics.stored("%RETRY%g", "normal", 1, 100, "FLUSHED")
    metrics.stored("%DLQ%g", "normal", 1, 100, "FLUSHED")
    metrics.stored("RMQ_SYS_TRACE_TOPIC", "normal", 1, 100, "FLUSHED")
    assert metrics.messages_in.values == {
        ("Orders", "normal", "false"): 2,
        ("RMQ_SYS_TRACE_TOPIC", "normal", "true"): 1,
    }
    assert metrics.throughput_in.values[("Orders", "normal", "false")] == 300
    assert metrics.receipts.values == {("FLUSHED",): 5}


class _Store:
    """Queue 0 of `Orders` holds offsets 0..9, stored at 1,000 ms + offset."""

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return 10

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        return 1_000 + offset


class _Offsets:
    def entries(self) -> list[tuple[tuple[str, str], dict[int, int]]]:
        return [(("Orders", "g"), {0: 3})]


class _Clock:
    def now_ms(self) -> int:
        return 2_000


class _Broker:
    store = _Store()
    offsets = _Offsets()
    clock = _Clock()


def test_lag_ready_and_inflight_split_at_the_pulled_and_committed_offsets() -> None:
    metrics = BrokerMetrics(source_for(MetricsConfig(), "broker-meter", "broker", "c", "b"))
    metrics.pulled_messages("g", "Orders", 0, count=4, size=400, next_offset=7)
    view = _LagView(metrics, _Broker())  # type: ignore[arg-type]
    labels = ("g", "Orders", "false", "false")
    assert view.lag() == [(labels, 7)]  # 10 - 3 committed
    assert view.inflight() == [(labels, 4)]  # pulled up to 7, committed 3
    assert view.ready() == [(labels, 3)]  # 10 - 7 pulled
    assert view.lag_latency() == [(labels, 2_000 - 1_003)]  # the first uncommitted, offset 3
    assert view.queueing_latency() == [(labels, 2_000 - 1_007)]  # the first unpulled, offset 7
