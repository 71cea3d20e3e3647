"""Streaming reads and writes through a real local[2] SparkSession and `pocketmq up`: exactly
once into Parquet across a stop and restart with producers running, exactly once through the
sink even when the driver dies between the sink's commit and Spark's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from pyspark.sql import SparkSession

from pocketmq.testing import ServerProcess
from tests.spark.conftest import (
    create_topic,
    produce,
    publish_once,
    read_topic,
    stream,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[2]


def test_stream_into_parquet_exactly_once_across_a_restart_while_producing(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    topic = create_topic(cluster.address, "stream-parquet")
    sent: list[str] = produce(cluster.address, topic, 1000)
    producing = threading.Thread(
        target=lambda: sent.extend(produce(cluster.address, topic, 2000, first=1000))
    )
    producing.start()
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def start():  # type: ignore[no-untyped-def]
        return (
            stream(
                spark,
                cluster.address,
                topic,
                startingOffsets="earliest",
                maxMessagesPerTrigger="300",
                consumerGroup="spark-parquet-job",
            )
            .select("msgId", "body", "queueId", "queueOffset")
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
        )

    first = start().trigger(processingTime="200 milliseconds").start()
    wait_until(
        "a few batches in", lambda: (first.lastProgress or {}).get("batchId", -1) >= 2, 120, first
    )
    first.stop()
    producing.join(120)
    assert not producing.is_alive()
    second = start().trigger(availableNow=True).start()
    assert second.awaitTermination(180)
    rows = spark.read.parquet(str(output)).collect()
    assert len(rows) == len(sent) == 3000, "every message once"
    assert len({r.msgId for r in rows}) == 3000
    assert sorted(r.body.decode() for r in rows) == sorted(sent)


def test_trigger_available_now_honours_the_rate_limit_and_stops(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    topic = create_topic(cluster.address, "available-now")
    produce(cluster.address, topic, 1000)
    query = (
        stream(
            spark, cluster.address, topic, startingOffsets="earliest", maxMessagesPerTrigger="250"
        )
        .writeStream.format("memory")
        .queryName("available_now")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(batches) == 1000
    assert max(batches) <= 250
    assert len(batches) >= 4
    assert spark.table("available_now").count() == 1000


def test_stream_write_round_trips_exactly_once(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    source = create_topic(cluster.address, "sink-source")
    target = create_topic(cluster.address, "sink-target")
    sent = produce(cluster.address, source, 1500)
    frame = stream(
        spark, cluster.address, source, startingOffsets="earliest", maxMessagesPerTrigger="400"
    )
    publish_once(
        frame.select("body", "keys", "tags"), cluster.address, target, tmp_path / "checkpoint"
    )
    back = read_topic(spark, cluster.address, target)
    assert sorted(r.body.decode() for r in back) == sorted(sent)


def test_sink_killed_after_publishing_a_batch_publishes_it_once(
    cluster: ServerProcess, tmp_path: Path, spark: SparkSession
) -> None:
    source = create_topic(cluster.address, "fault-source")
    target = create_topic(cluster.address, "fault-target")
    sent = produce(cluster.address, source, 2000)
    checkpoint = tmp_path / "checkpoint"
    paused = tmp_path / "sink-paused"
    command = [
        sys.executable, "-m", "tests.spark.scripts.stream_to_topic",
        cluster.address, source, target, str(checkpoint),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (tmp_path / "driver-1.log").open("w")
    driver = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**env, "POCKETMQ_SPARK_SINK_PAUSE_AFTER_COMMIT": f"1:{paused}"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its JVM and Python workers die with it
    )
    try:
        deadline = time.monotonic() + 180
        while not paused.exists():
            assert driver.poll() is None, (tmp_path / "driver-1.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the sink never committed batch 1"
            time.sleep(0.2)
        assert not (checkpoint / "commits" / "1").exists(), "Spark recorded batch 1 already"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(30)
        log.close()
    second = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    back = read_topic(spark, cluster.address, target)
    bodies = [r.body.decode() for r in back]
    assert len(bodies) == len(set(bodies)), f"{len(bodies) - len(set(bodies))} rows published twice"
    assert sorted(bodies) == sorted(sent)


def test_a_sink_id_reused_with_a_new_checkpoint_publishes_every_batch(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    source = create_topic(cluster.address, "reuse-source")
    target = create_topic(cluster.address, "reuse-target")
    sent = produce(cluster.address, source, 90)
    for run in ("first", "second"):  # a new checkpoint: Spark numbers batches from 0 again
        frame = stream(
            spark, cluster.address, source, startingOffsets="earliest", maxMessagesPerTrigger="30"
        )
        publish_once(frame.select("body"), cluster.address, target, tmp_path / run, sinkId="reused")
    back = read_topic(spark, cluster.address, target)
    assert sorted(r.body.decode() for r in back) == sorted(sent * 2), "each run publishes all"
