"""The streaming source under change: queues added while a query runs, the consumer group's
progress as `pocketmq admin consumerProgress` shows it, retention deleting offsets a query still
needs (failOnDataLoss), and what Spark's idle polling of `latestOffset` costs the cluster.

Every wait is bounded in time; the Spark tests share the session of tests/spark/conftest.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from pocketmq.client import Message, Producer
from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import RequestCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.spark.cluster import ROUTE_REFRESH_S, Cluster
from pocketmq.spark.options import Connection, ReadOptions
from pocketmq.spark.reader import StreamReader
from pocketmq.testing import ServerProcess, start_up_process
from tests.spark.conftest import create_topic, produce, stream, wait_until

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "DefaultCluster"


def set_queues(namesrv: str, topic: str, queues: int) -> None:
    """What `pocketmq admin updateTopic -t TOPIC -c CLUSTER -r N -w N` does."""

    async def update() -> None:
        async with AdminClient([namesrv]) as admin:
            await admin.create_topic(TopicSettings(topic, queues, queues), cluster=CLUSTER)

    asyncio.run(update())


def broker_name(namesrv: str, topic: str) -> str:
    async def ask() -> str:
        async with AdminClient([namesrv]) as admin:
            return (await admin.topic_route(topic)).broker_datas[0].broker_name

    return asyncio.run(ask())


def min_offset(namesrv: str, topic: str) -> int:
    async def ask() -> int:
        async with AdminClient([namesrv]) as admin:
            return min(q.min_offset for q in (await admin.topic_stats(topic)).queues)

    return asyncio.run(ask())


def consumer_progress(namesrv: str, group: str) -> dict[int, int] | None:
    """`pocketmq admin consumerProgress -n NAMESRV -g GROUP --json` as {queueId: consumerOffset};
    None while the group has committed nothing (the command then fails, saying so)."""
    command = [sys.executable, "-m", "pocketmq.cli.main", "admin", "consumerProgress"]
    done = subprocess.run(
        [*command, "-n", namesrv, "-g", group, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        assert "has no consume progress" in done.stderr + done.stdout, done.stderr
        return None
    table = json.loads(done.stdout)["offsetTable"]
    return {row["queueId"]: row["consumerOffset"] for row in table}


# -- queues added while running -------------------------------------------------------------------


def test_queues_added_while_a_query_runs_are_read_exactly_once(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    namesrv = cluster.address
    topic = create_topic(namesrv, "grow", queues=2)
    sent = produce(namesrv, topic, 200)
    query = (
        stream(spark, namesrv, topic, startingOffsets="earliest", maxMessagesPerTrigger="150")
        .select("body", "queueId", "queueOffset")
        .writeStream.format("memory")
        .queryName("grown")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        wait_until("the first 200", lambda: spark.table("grown").count() >= 200, 90, query)
        set_queues(namesrv, topic, 4)
        broker = broker_name(namesrv, topic)
        with Producer("spark-test-grow", namesrv=namesrv) as producer:
            for queue_id in (2, 3):
                batch = [
                    Message(topic, f"new queue {queue_id} message {n}".encode()) for n in range(60)
                ]
                producer.send_batch(batch, queue=MessageQueue(topic, broker, queue_id))
                sent.extend(m.body.decode() for m in batch)
        sent.extend(produce(namesrv, topic, 100, first=200))  # the producer now sees 4 queues
        wait_until("all 420", lambda: spark.table("grown").count() >= len(sent), 60, query)
    finally:
        query.stop()
    rows = spark.table("grown").collect()
    assert len(rows) == len(sent) == 420
    assert len({(r.queueId, r.queueOffset) for r in rows}) == 420, "a message read twice"
    assert sorted(r.body.decode() for r in rows) == sorted(sent)
    new = sorted((r.queueId, r.queueOffset) for r in rows if r.queueId >= 2)
    assert new[:1] == [(2, 0)], "a new queue is read from its first offset"
    assert {queue for queue, _ in new} == {2, 3}


# -- consumerGroup --------------------------------------------------------------------------------


def test_consumer_group_shows_the_progress_of_every_finished_batch(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    """Spark calls `commit(end)` of a batch only when it plans the next one, so the last batch of
    a run would never reach the group; the reader also commits the `start` it is asked to plan
    from (everything before it is in the sink and in Spark's commit log). So right after an
    AvailableNow run the group shows the run's end."""
    namesrv = cluster.address
    topic = create_topic(namesrv, "group", queues=2)
    group = "spark-progress-job"
    produce(namesrv, topic, 300)

    def run() -> StreamingQuery:
        query = (
            stream(
                spark,
                namesrv,
                topic,
                startingOffsets="earliest",
                maxMessagesPerTrigger="100",
                consumerGroup=group,
            )
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(90)
        return query

    first = run()
    assert sum(p["numInputRows"] for p in first.recentProgress) == 300
    ends = json.loads(first.lastProgress["sources"][0]["endOffset"])
    checkpoint_end = {int(key.rsplit("/", 1)[1]): offset for key, offset in ends.items()}
    assert sum(checkpoint_end.values()) == 300
    assert consumer_progress(namesrv, group) == checkpoint_end

    produce(namesrv, topic, 100, first=300)
    second = run()
    assert sum(p["numInputRows"] for p in second.recentProgress) == 100
    progress = consumer_progress(namesrv, group)
    assert progress is not None
    assert sum(progress.values()) == 400


# -- failOnDataLoss -------------------------------------------------------------------------------

RETENTION = {
    "mappedFileSizeCommitLog": "65536",  # 64 KiB CommitLog files: a few hundred KiB make several
    "fileReservedTime": "0.0005",  # hours (1.8 s) since a file's last write
    "deleteWhen": ";".join(f"{hour:02d}" for hour in range(24)),  # any hour is a time to delete
    "cleanResourceInterval": "200",  # ms between retention passes
}


@pytest.fixture
def short_retention(tmp_path: Path) -> Iterator[ServerProcess]:
    """A `pocketmq up` that deletes CommitLog files 2 s after their last write (all but the
    current one), and with them the queue entries pointing there."""
    config = tmp_path / "broker.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in RETENTION.items()))
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        yield server
    finally:
        server.stop()


def test_fail_on_data_loss_stops_the_query_and_false_skips_what_retention_deleted(
    spark: SparkSession, short_retention: ServerProcess, tmp_path: Path
) -> None:
    namesrv = short_retention.address
    topic = create_topic(namesrv, "retention", queues=1)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    sent = produce(namesrv, topic, 20)

    def run(**options: str) -> StreamingQuery:
        return (
            stream(spark, namesrv, topic, startingOffsets="earliest", **options)
            .select("body", "queueOffset")
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    assert run().awaitTermination(90)  # the checkpoint now stands at offset 20
    sent += produce(namesrv, topic, 400, first=20, size=1000)  # ~7 CommitLog files
    wait_until("retention past offset 20", lambda: min_offset(namesrv, topic) > 20, 30)
    gone_below = min_offset(namesrv, topic)

    failing = run()
    with pytest.raises(StreamingQueryException) as caught:
        failing.awaitTermination(90)
    message = str(caught.value)
    assert "are gone (retention)" in message
    assert "failOnDataLoss=false" in message

    assert run(failOnDataLoss="false").awaitTermination(90)  # replays the failed batch
    rows = spark.read.parquet(str(output)).collect()
    offsets = sorted(r.queueOffset for r in rows)
    skipped_to = offsets[20]
    assert offsets == list(range(20)) + list(range(skipped_to, 420)), "not one suffix, once"
    assert skipped_to >= gone_below
    assert sorted(r.body.decode() for r in rows) == sorted(sent[:20] + sent[skipped_to:])


# -- latestOffset cost ----------------------------------------------------------------------------


class CountingCluster:
    """A connector `Cluster` with a manual clock whose every request is counted by code."""

    def __init__(self, namesrv: str) -> None:
        self.clock = ManualClock()
        self.cluster = Cluster(namesrv, clock=self.clock)
        self.requests: Counter[tuple[str, int]] = Counter()
        client = self.cluster._admin_client().instance.remoting
        invoke = client.invoke

        async def counted(
            address: str, request: RemotingCommand, timeout_s: float = 3.0
        ) -> RemotingCommand:
            self.requests[(address, request.code)] += 1
            return await invoke(address, request, timeout_s)

        client.invoke = counted  # type: ignore[method-assign]

    def count(self, code: int) -> int:
        return sum(n for (_, c), n in self.requests.items() if c == code)

    def take(self) -> Counter[tuple[str, int]]:
        taken, self.requests = self.requests, Counter()
        return taken


def test_latest_offset_asks_each_broker_once_and_the_nameserver_only_to_refresh(
    cluster: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    namesrv = cluster.address
    topic = create_topic(namesrv, "cheap-latest", queues=2)
    produce(namesrv, topic, 100)
    counting = CountingCluster(namesrv)
    # What Cluster.of returns for the reader's options.
    monkeypatch.setitem(Cluster._shared, Connection(namesrv), counting.cluster)
    reader = StreamReader(ReadOptions.parse({"namesrv": namesrv, "topic": topic}, streaming=True))
    start = reader.initialOffset()
    assert sum(start.values()) == 100
    counting.take()

    for _ in range(60):  # an idle query for about a second
        assert reader.latestOffset(start, ReadAllAvailable()) == start
    requests = counting.take()
    assert set(requests.values()) == {60}, f"not one stats request per call: {requests}"
    assert [code for _, code in requests] == [RequestCode.GET_TOPIC_STATS_INFO]

    set_queues(namesrv, topic, 3)  # a new queue shows at once: the broker's stats list it
    produce(namesrv, topic, 50, first=100)
    end = reader.latestOffset(start, ReadMaxRows(1000))
    assert len(end) == 3
    assert sum(end.values()) == 150
    assert counting.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 0
    counting.take()

    counting.clock.advance(ROUTE_REFRESH_S)  # the route is looked up again once per period
    for _ in range(10):
        reader.latestOffset(end, ReadAllAvailable())
    assert counting.count(RequestCode.GET_ROUTEINFO_BY_TOPIC) == 1
    assert counting.count(RequestCode.GET_TOPIC_STATS_INFO) == 10


def test_a_pattern_lists_topics_once_per_refresh_and_then_sees_new_ones(
    cluster: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    namesrv = cluster.address
    first = create_topic(namesrv, "pattern-x")
    counting = CountingCluster(namesrv)
    monkeypatch.setitem(Cluster._shared, Connection(namesrv), counting.cluster)
    pattern = first.rsplit("-", 1)[0] + "-[0-9]+"
    reader = StreamReader(
        ReadOptions.parse({"namesrv": namesrv, "topicpattern": pattern}, streaming=True)
    )
    start = reader.initialOffset()
    assert {key.split("/")[0] for key in start} == {first}
    for _ in range(30):
        reader.latestOffset(start, ReadAllAvailable())
    assert counting.count(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == 1

    second = create_topic(namesrv, "pattern-x")
    produce(namesrv, second, 10)
    assert reader.latestOffset(start, ReadAllAvailable()) == start, "listed again too early"
    counting.clock.advance(ROUTE_REFRESH_S)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert {key.split("/")[0] for key in end} == {first, second}
    assert sum(offset for key, offset in end.items() if key.startswith(second + "/")) == 10
    assert counting.count(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == 2


def test_available_now_leaves_a_queue_added_during_the_run_for_the_next_run(
    cluster: ServerProcess,
) -> None:
    """AvailableNow reads what was there when it started (as Kafka's source does): a queue
    added meanwhile, with a producer writing into it, must not keep the run from ending."""
    namesrv = cluster.address
    topic = create_topic(namesrv, "available-now-grow", queues=1)
    produce(namesrv, topic, 30)
    options = ReadOptions.parse(
        {"namesrv": namesrv, "topic": topic, "startingoffsets": "earliest"}, streaming=True
    )
    reader = StreamReader(options)
    start = reader.initialOffset()
    reader.prepareForTriggerAvailableNow()
    set_queues(namesrv, topic, 2)
    broker = broker_name(namesrv, topic)
    with Producer("spark-test-available-now", namesrv=namesrv) as producer:
        batch = [Message(topic, f"late {n}".encode()) for n in range(20)]
        producer.send_batch(batch, queue=MessageQueue(topic, broker, 1))
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {f"{topic}/{broker}/0": 30, f"{topic}/{broker}/1": 0}
    assert reader.latestOffset(end, ReadAllAvailable()) == end, "the run ends here"

    next_run = StreamReader(options)
    next_run.prepareForTriggerAvailableNow()
    assert next_run.latestOffset(end, ReadAllAvailable())[f"{topic}/{broker}/1"] == 20
