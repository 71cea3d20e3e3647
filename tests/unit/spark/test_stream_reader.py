"""The stream reader's rule for queues that went back (a topic deleted and created again): data
loss, or with failOnDataLoss=false read from the queue's new beginning. The cluster is replaced
by the bounds it would report."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable

from pocketmq.client.message import MessageQueue
from pocketmq.spark import reader
from pocketmq.spark.cluster import QueueBounds
from pocketmq.spark.fetch import DataLossError
from pocketmq.spark.options import ReadOptions

Q0, Q1 = MessageQueue("t", "broker-a", 0), MessageQueue("t", "broker-a", 1)
START = {"t/broker-a/0": 100, "t/broker-a/1": 40}


def stream_reader(monkeypatch: pytest.MonkeyPatch, *, fail: bool) -> reader.StreamReader:
    # Queue 0 was emptied and holds 10 new messages from offset 0; queue 1 went on.
    bounds = [QueueBounds(Q0, 0, 10), QueueBounds(Q1, 0, 50)]
    monkeypatch.setattr(reader, "_bounds", lambda options: bounds)
    options = {"namesrv": "127.0.0.1:9876", "topic": "t", "failondataloss": str(fail).lower()}
    return reader.StreamReader(ReadOptions.parse(options, streaming=True))


def test_a_queue_that_went_back_is_data_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    strict = stream_reader(monkeypatch, fail=True)
    with pytest.raises(DataLossError, match=r"t/broker-a/0 at 10 \(query at 100\)"):
        strict.latestOffset(START, ReadAllAvailable())


def test_without_fail_on_data_loss_it_is_read_again_from_its_beginning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lenient = stream_reader(monkeypatch, fail=False)
    end = lenient.latestOffset(START, ReadAllAvailable())
    assert end == {"t/broker-a/0": 0, "t/broker-a/1": 50}
    assert lenient.partitions(START, end) == [reader.QueueRange("t", "broker-a", 1, 40, 50)]
    assert lenient.latestOffset(end, ReadAllAvailable()) == {"t/broker-a/0": 10, "t/broker-a/1": 50}


def test_a_new_queue_is_read_from_its_first_stored_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    bounds = [QueueBounds(Q0, 0, 10), QueueBounds(Q1, 30, 50)]  # queue 1 is new, retention ran
    monkeypatch.setattr(reader, "_bounds", lambda options: bounds)
    options = {"namesrv": "127.0.0.1:9876", "topic": "t"}
    stream = reader.StreamReader(ReadOptions.parse(options, streaming=True))
    start = {"t/broker-a/0": 10}
    end = stream.latestOffset(start, ReadAllAvailable())
    assert end == {"t/broker-a/0": 10, "t/broker-a/1": 50}
    assert stream.partitions(start, end) == [reader.QueueRange("t", "broker-a", 1, 30, 50)]
