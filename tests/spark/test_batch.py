"""Batch reads and writes of topics through a real local[2] SparkSession and `pocketmq up`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.utils import AnalysisException

from pocketmq.testing import ServerProcess
from tests.integration.test_docs_examples import blocks_of
from tests.spark.conftest import create_topic, produce

SPARK_DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"


def read(spark: SparkSession, namesrv: str, **options: str):  # type: ignore[no-untyped-def]
    return spark.read.format("pocketmq").option("namesrv", namesrv).options(**options).load()


def test_the_source_is_found_by_name_and_has_the_documented_schema(
    spark: SparkSession, cluster: ServerProcess
) -> None:
    topic = create_topic(cluster.address, "schema")
    frame = read(spark, cluster.address, topic=topic)
    assert [f.name for f in frame.schema.fields] == [
        "body", "keys", "tags", "topic", "brokerName", "queueId", "queueOffset", "msgId",
        "bornTimestamp", "storeTimestamp", "properties", "reconsumeTimes",
    ]  # fmt: skip
    assert frame.count() == 0


def test_batch_read_returns_exactly_what_was_produced(
    spark: SparkSession, cluster: ServerProcess
) -> None:
    topic = create_topic(cluster.address, "batch-read")
    bodies = produce(cluster.address, topic, 3000)
    rows = read(spark, cluster.address, topic=topic, maxRecordsPerPartition="200").collect()
    assert sorted(r.body.decode() for r in rows) == sorted(bodies)
    assert len({r.msgId for r in rows}) == 3000
    by_body = {r.body.decode(): r for r in rows}
    sample = by_body["message 7"]
    assert (sample.keys, sample.tags, sample.properties, sample.topic) == (
        "key-7",
        "tag1",
        {"n": "7"},
        topic,
    )
    assert sample.storeTimestamp >= sample.bornTimestamp.replace(microsecond=0)
    offsets = {(r.brokerName, r.queueId, r.queueOffset) for r in rows}
    assert len(offsets) == 3000, "every (queue, offset) once"


def test_batch_read_between_offsets_and_from_a_time(
    spark: SparkSession, cluster: ServerProcess
) -> None:
    topic = create_topic(cluster.address, "ranges", queues=2)
    produce(cluster.address, topic, 400)
    rows = read(spark, cluster.address, topic=topic).collect()
    broker = rows[0].brokerName
    ends = {q: max(r.queueOffset for r in rows if r.queueId == q) + 1 for q in (0, 1)}
    starting = json.dumps({topic: {f"{broker}:0": 10, f"{broker}:1": 20}})
    ending = json.dumps({topic: {f"{broker}:0": 30, f"{broker}:1": ends[1]}})
    subset = read(
        spark, cluster.address, topic=topic, startingOffsets=starting, endingOffsets=ending
    ).collect()
    assert sorted((r.queueId, r.queueOffset) for r in subset) == [(0, o) for o in range(10, 30)] + [
        (1, o) for o in range(20, ends[1])
    ]
    latest = read(spark, cluster.address, topic=topic, startingOffsets="latest").collect()
    assert latest == []
    newest = max(r.storeTimestamp for r in rows)
    since = read(
        spark, cluster.address, topic=topic, startingOffsets=str(int(newest.timestamp() * 1000))
    ).collect()
    assert 0 < len(since) < len(rows)


def test_a_pattern_reads_every_matching_topic(spark: SparkSession, cluster: ServerProcess) -> None:
    first = create_topic(cluster.address, "pattern-a")
    second = create_topic(cluster.address, "pattern-b")
    produce(cluster.address, first, 100)
    produce(cluster.address, second, 50)
    frame = read(spark, cluster.address, topicPattern="pattern-[ab]-[0-9]+")
    counts = {r.topic: r["count"] for r in frame.groupBy("topic").count().collect()}
    assert counts == {first: 100, second: 50}


def test_batch_write_round_trips(spark: SparkSession, cluster: ServerProcess) -> None:
    topic = create_topic(cluster.address, "batch-write")
    rows = [(f"row {n}".encode(), f"k{n}", "written", {"source": "spark"}) for n in range(1000)]
    frame = spark.createDataFrame(
        rows, "body binary, keys string, tags string, properties map<string,string>"
    )
    frame.write.format("pocketmq").option("namesrv", cluster.address).option("topic", topic).mode(
        "append"
    ).save()
    back = read(spark, cluster.address, topic=topic).collect()
    assert sorted(r.body for r in back) == sorted(r[0] for r in rows)
    assert {(r.tags, r.properties["source"]) for r in back} == {("written", "spark")}
    assert sorted(r.keys for r in back) == sorted(f"k{n}" for n in range(1000))


def test_batch_write_of_usual_rows_round_trips(spark: SparkSession, cluster: ServerProcess) -> None:
    """Rows without user properties: encoded from their columns straight into batch bodies."""
    topic = create_topic(cluster.address, "batch-write-usual")
    rows = [(f"row {n}", f"k{n}" if n % 3 else None, "odd" if n % 2 else "") for n in range(1000)]
    frame = spark.createDataFrame(rows, "body string, keys string, tags string").repartition(3)
    frame.write.format("pocketmq").option("namesrv", cluster.address).option("topic", topic).option(
        "batchSize", "64"
    ).mode("append").save()
    back = read(spark, cluster.address, topic=topic).collect()
    assert sorted((r.body.decode(), r.keys, r.tags or "") for r in back) == sorted(rows)
    assert len({r.msgId for r in back}) == len(rows)
    assert all(r.properties == {} for r in back)


def test_a_schema_of_some_columns_reads_those_as_docs_spark_md_shows(
    spark: SparkSession, cluster: ServerProcess
) -> None:
    topic = create_topic(cluster.address, "columns")
    bodies = produce(cluster.address, topic, 300)
    (block,) = [b for b in blocks_of(SPARK_DOC) if "tests/spark/test_batch.py" in (b.marker or "")]
    code = block.code.replace("127.0.0.1:9876", cluster.address).replace('"Orders"', f'"{topic}"')
    scope: dict[str, object] = {"spark": spark}
    exec(code, scope)  # the page's own example, run as written
    frame = scope["bodies"]
    assert frame.columns == ["queueOffset", "body"]  # type: ignore[attr-defined]
    rows = frame.collect()  # type: ignore[attr-defined]
    assert sorted(r.body.decode() for r in rows) == sorted(bodies)
    assert len({r.queueOffset for r in rows}) > 1
    same = read(spark, cluster.address, topic=topic).select("queueOffset", "body").collect()
    assert sorted(map(tuple, rows)) == sorted(map(tuple, same))


def test_a_schema_the_source_cannot_fill_fails_at_planning_with_what_to_change(
    spark: SparkSession, cluster: ServerProcess
) -> None:
    topic = create_topic(cluster.address, "bad-columns")
    produce(cluster.address, topic, 10)
    for ddl, message in [
        ("body string", "'body' is binary, not string: declare it binary and CAST"),
        ("payload binary", "no column 'payload'; its columns are body, keys"),
    ]:
        frame = spark.read.format("pocketmq").schema(ddl).option("namesrv", cluster.address)
        with pytest.raises(Exception, match=message):
            frame.option("topic", topic).load().collect()


def test_bad_options_fail_at_planning_with_a_clear_error(
    spark: SparkSession, cluster: ServerProcess
) -> None:
    with pytest.raises(Exception, match="exactly one of topic"):
        read(spark, cluster.address).collect()
    with pytest.raises(Exception, match="startingOffsets"):
        read(spark, cluster.address, topic="t", startingOffsets="yesterday").collect()
    frame = spark.createDataFrame([("x",)], "payload string")
    with pytest.raises((AnalysisException, Exception), match="'body' column"):
        frame.write.format("pocketmq").option("namesrv", cluster.address).option("topic", "t").mode(
            "append"
        ).save()
