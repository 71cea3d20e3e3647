"""One SparkSession (local[2]) for the whole Spark suite and one `pocketmq up` per module:
starting Spark costs seconds, so no test pays it on its own."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer
from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.testing import ServerProcess, start_up_process
from pocketmq.testing.plugin import print_log_if_failed

pyspark = pytest.importorskip("pyspark", reason="the spark extra is not installed")

from pyspark.sql import DataFrame, Row, SparkSession  # noqa: E402

_topics = itertools.count(1)


def spark_settings() -> dict[str, str]:
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        "spark.sql.adaptive.enabled": "false",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    }


def local_session(app_name: str) -> SparkSession:
    """A quiet local[2] session whose Python workers run this interpreter, on loopback."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in spark_settings().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = local_session("pocketmq-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("pocketmq-up")
    server = start_up_process(work / "data", work / "up.log")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def cluster_log_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """Prints what the module's `pocketmq up` logged during a test using it, when it failed.

    Function-scoped on purpose: the module's fixture tears down after its last test, where a
    failure of an earlier test would not be shown.
    """
    if "cluster" not in request.fixturenames:
        yield
        return
    server: ServerProcess = request.getfixturevalue("cluster")
    start = len(server.log())
    yield
    print_log_if_failed(
        request, "log of pocketmq up during this test", lambda: server.log()[start:]
    )


def create_topic(namesrv: str, prefix: str, queues: int = 4) -> str:
    topic = f"{prefix}-{next(_topics)}"

    async def create() -> None:
        async with AdminClient([namesrv]) as admin:
            await admin.create_topic(
                TopicSettings(topic, read_queue_nums=queues, write_queue_nums=queues),
                cluster="DefaultCluster",
            )
            assert await admin.wait_for_route(topic, timeout_s=10)

    asyncio.run(create())
    return topic


def produce(namesrv: str, topic: str, count: int, *, first: int = 0, size: int = 0) -> list[str]:
    """Sends `count` messages with key, tag and a property; returns their bodies in order."""
    bodies = [
        f"message {n} ".ljust(size, "x") if size else f"message {n}"
        for n in range(first, first + count)
    ]
    messages = [
        Message(topic, body.encode(), tags=f"tag{n % 3}", keys=f"key-{n}", properties={"n": str(n)})
        for n, body in zip(range(first, first + count), bodies, strict=True)
    ]
    with Producer("spark-test-producer", namesrv=namesrv) as producer:
        for start in range(0, count, 50):  # a batch lands in one queue; batches spread
            producer.send_batch(messages[start : start + 50])
    return bodies


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"


def wait_until(what: str, done: Callable[[], bool], timeout_s: float, query: Any = None) -> None:
    """Polls `done` every 0.2 s until it holds; fails after `timeout_s`, or at once when the
    streaming `query` given failed."""
    deadline = time.monotonic() + timeout_s
    while not done():
        if query is not None:
            assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s"
        time.sleep(0.2)


def stream(spark: SparkSession, namesrv: str, topic: str, **options: str) -> DataFrame:
    """`spark.readStream` of one topic with the given source options."""
    return (
        spark.readStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .options(**options)
        .load()
    )


def publish_once(
    frame: DataFrame, namesrv: str, topic: str, checkpoint: Path, **options: str
) -> None:
    """Streams `frame` into `topic` through the pocketmq sink with AvailableNow and waits for
    the run to end."""
    query = (
        frame.writeStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .options(**options)
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), f"the run into {topic} did not end within 120 s"


def read_topic(spark: SparkSession, namesrv: str, topic: str) -> list[Row]:
    """Every message of `topic`, read back with a batch query."""
    return (
        spark.read.format("pocketmq").option("namesrv", namesrv).option("topic", topic).load()
    ).collect()
