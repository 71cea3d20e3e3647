"""The pocketmq sink under faults, with real drivers killed by SIGKILL: a driver killed with a
micro-batch partly written (chunks stored) while producers run; a replay through a shuffle, with
another batch size, into a topic that gained queues since the crash; the broker killed mid-batch.
Each ends with every source message published exactly once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.testing import ServerProcess, free_port, free_port_pair, start_server_process
from tests.spark.conftest import create_topic, produce, read_topic

ROOT = Path(__file__).resolve().parents[2]
DRIVER = [sys.executable, "-m", "tests.spark.scripts.stream_to_topic"]


class Driver:
    """One run of the streaming driver script, in its own process group."""

    def __init__(self, tmp_path: Path, name: str, args: list[str], **env: str) -> None:
        self.log_path = tmp_path / f"{name}.log"
        self._log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [*DRIVER, *args],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its JVM and Python workers die with it
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_for(self, marker: Path, timeout_s: float = 180) -> None:
        """Waits until the sink paused (it wrote `marker`)."""
        deadline = time.monotonic() + timeout_s
        while not marker.exists():
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, f"the sink never paused: {self.log()}"
            time.sleep(0.2)

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)
        self._log.close()

    def finish(self, timeout_s: float = 300) -> int:
        code = self.process.wait(timeout_s)
        self._log.close()
        return code


def add_queues(namesrv: str, topic: str, queues: int) -> None:
    async def update() -> None:
        async with AdminClient([namesrv]) as admin:
            await admin.create_topic(
                TopicSettings(topic, read_queue_nums=queues, write_queue_nums=queues),
                cluster="DefaultCluster",
            )

    asyncio.run(update())


def assert_published_once(spark: SparkSession, namesrv: str, topic: str, sent: list[str]) -> None:
    bodies = [r.body.decode() for r in read_topic(spark, namesrv, topic)]
    assert len(bodies) == len(set(bodies)), f"{len(bodies) - len(set(bodies))} rows published twice"
    assert sorted(bodies) == sorted(sent), f"{len(set(sent) - set(bodies))} rows never published"


def test_driver_killed_with_a_batch_partly_written_while_producing(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    source = create_topic(cluster.address, "partly-source")
    target = create_topic(cluster.address, "partly-target")
    sent = produce(cluster.address, source, 1500)
    producing = threading.Thread(
        target=lambda: sent.extend(produce(cluster.address, source, 1500, first=1500))
    )
    producing.start()
    marker = tmp_path / "paused"
    args = [cluster.address, source, target, str(tmp_path / "checkpoint"), "--per-trigger", "600"]
    first = Driver(
        tmp_path,
        "driver-1",
        [*args, "--batch-size", "40"],
        POCKETMQ_SPARK_SINK_PAUSE_AFTER_CHUNKS=f"1:2:{marker}",
    )
    try:
        first.wait_for(marker)
    finally:
        first.kill()
    producing.join(120)
    assert not producing.is_alive()
    second = Driver(tmp_path, "driver-2", [*args, "--batch-size", "70"])  # another batch size
    assert second.finish() == 0, second.log()
    assert_published_once(spark, cluster.address, target, sent)


def test_replay_through_a_shuffle_into_a_topic_that_gained_queues(
    spark: SparkSession, cluster: ServerProcess, tmp_path: Path
) -> None:
    source = create_topic(cluster.address, "shuffle-source")
    target = create_topic(cluster.address, "shuffle-target", queues=2)
    sent = produce(cluster.address, source, 1200)
    marker = tmp_path / "paused"
    args = [cluster.address, source, target, str(tmp_path / "checkpoint"), "--shuffle"]
    first = Driver(
        tmp_path,
        "driver-1",
        [*args, "--batch-size", "30"],
        POCKETMQ_SPARK_SINK_PAUSE_AFTER_CHUNKS=f"1:1:{marker}",
    )
    try:
        first.wait_for(marker)
    finally:
        first.kill()
    add_queues(cluster.address, target, 6)  # the replay's tasks pick other queues
    second = Driver(tmp_path, "driver-2", [*args, "--batch-size", "50"])
    assert second.finish() == 0, second.log()
    assert_published_once(spark, cluster.address, target, sent)


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[list[ServerProcess]]:
    """A `pocketmq up` of this test alone, on fixed ports, so it can be killed and started
    again where it was; the list holds the current process."""
    namesrv_port, broker_port = free_port(), free_port_pair()
    args = [
        *("up", "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port)),
        *("--data-dir", str(tmp_path / "data")),
    ]
    servers = [start_server_process(args, tmp_path / "up-1.log")]
    try:
        yield servers
    finally:
        servers[-1].stop()


def test_broker_killed_mid_batch(
    spark: SparkSession, own_cluster: list[ServerProcess], tmp_path: Path
) -> None:
    namesrv = own_cluster[0].address
    source = create_topic(namesrv, "broker-kill-source")
    target = create_topic(namesrv, "broker-kill-target")
    sent = produce(namesrv, source, 1500)
    marker = tmp_path / "paused"
    args = [namesrv, source, target, str(tmp_path / "checkpoint"), "--batch-size", "40"]
    first = Driver(
        tmp_path, "driver-1", args, POCKETMQ_SPARK_SINK_PAUSE_AFTER_CHUNKS=f"1:2:{marker}"
    )
    try:
        first.wait_for(marker)
        own_cluster[0].kill()  # SIGKILL: no shutdown steps
        own_cluster.append(start_server_process(own_cluster[0].args, tmp_path / "up-2.log"))
        Path(f"{marker}.resume").touch()  # the paused tasks go on against the new broker
        first.finish()  # it may fail (a send to the dead broker) or finish: either is fine
    finally:
        if first.process.poll() is None:
            first.kill()
    second = Driver(tmp_path, "driver-2", args)
    assert second.finish() == 0, second.log()
    assert_published_once(spark, namesrv, target, sent)
