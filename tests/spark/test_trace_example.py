"""examples/spark-trace runs as its README says: traced producers and two traced push consumer
groups fill `RMQ_SYS_TRACE_TOPIC`, and the Spark job prints and writes one latency row per
topic, consumer group and minute, whose counts match what was sent and consumed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from pocketmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from pocketmq.client.admin import AdminClient
from pocketmq.client.trace_dispatch import TraceDispatcher
from pocketmq.observability.trace import TRACE_TOPIC_DEFAULT
from pocketmq.testing import ServerProcess
from tests.spark.conftest import create_topic, spark_settings, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark-trace"
PER_TOPIC = 25  # N = 2 * PER_TOPIC messages, on two topics
GROUPS = ("latency-group-a", "latency-group-b")
MINUTE_MS = 60_000


class Seen:
    """A listener that records the message ids it was given (duplicates count once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ids: set[str] = set()

    def __call__(self, messages: list[MessageExt]) -> None:
        with self._lock:
            self.ids.update(m.msg_id for m in messages)

    def count(self) -> int:
        with self._lock:
            return len(self.ids)


def dispatcher(client: Producer | PushConsumer) -> TraceDispatcher:
    """The trace dispatcher of a started traced client (internal: its counters are how the
    test knows how many trace messages to wait for)."""
    aio: Any = client.aio
    tracer = aio._tracer if isinstance(client, Producer) else aio._calls.tracer
    assert tracer is not None, "message trace is not on"
    found: TraceDispatcher = tracer.dispatcher
    return found


def stored_messages(namesrv: str, topic: str) -> int:
    async def ask() -> int:
        async with AdminClient([namesrv]) as admin:
            stats = await admin.topic_stats(topic)
        return sum(q.max_offset - q.min_offset for q in stats.queues)

    return asyncio.run(ask())


def wait_out_minute_end(margin_s: float = 15.0) -> None:
    """Sleeps into the next minute when this one ends within `margin_s`, so that every send
    starts and ends in the same minute and the expected rows are known."""
    left = MINUTE_MS - time.time() * 1000 % MINUTE_MS
    if left < margin_s * 1000:
        time.sleep(left / 1000 + 0.05)


def run_job(*args: str, cwd: Path, timeout_s: float = 240) -> str:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    process = subprocess.Popen(
        [sys.executable, str(EXAMPLE / "trace_latency.py"), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)  # the job's JVM and Python workers too
        process.communicate()
        raise
    assert process.returncode == 0, f"{stdout[-3000:]}\n{stderr[-5000:]}"
    return stdout


def test_the_trace_example_reports_latency_per_topic_group_and_minute(
    cluster: ServerProcess, tmp_path: Path
) -> None:
    namesrv = cluster.address
    topics = [create_topic(namesrv, "traced-a"), create_topic(namesrv, "traced-b")]
    seen = {group: Seen() for group in GROUPS}
    consumers = []
    for group in GROUPS:
        consumer = PushConsumer(
            group,
            namesrv=namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            enable_msg_trace=True,
        )
        for topic in topics:
            consumer.subscribe(topic)
        consumer.register_listener(seen[group])
        consumer.start()
        consumers.append(consumer)
    dispatchers = [dispatcher(c) for c in consumers]

    expected: Counter[tuple[str, str, int]] = Counter()  # (topic, group, minute ms) -> messages
    try:
        with Producer("latency-producer", namesrv=namesrv, enable_msg_trace=True) as producer:
            dispatchers.append(dispatcher(producer))
            wait_out_minute_end()
            for n in range(PER_TOPIC):
                for topic in topics:
                    before = int(time.time() * 1000)
                    producer.send(Message(topic, f"traced {n}".encode(), keys=f"k{n}"))
                    after = int(time.time() * 1000)
                    minute = before - before % MINUTE_MS
                    assert after - after % MINUTE_MS == minute, "a send crossed a minute"
                    for group in GROUPS:
                        expected[(topic, group, minute)] += 1
        total = PER_TOPIC * len(topics)
        for listener in seen.values():
            wait_until("every message consumed", lambda: listener.count() == total, 60)  # noqa: B023
    finally:
        for consumer in consumers:
            consumer.close()  # sends the trace records still waiting
    # Every client is closed, so every trace message was sent (or failed, which fails here).
    assert sum(d.failed_messages + d.dropped for d in dispatchers) == 0
    sent = sum(d.sent_messages for d in dispatchers)
    wait_until(
        f"{sent} trace messages stored",
        lambda: stored_messages(namesrv, TRACE_TOPIC_DEFAULT) >= sent,
        30,
    )

    output = tmp_path / "latency"
    settings = [f"--conf={key}={value}" for key, value in spark_settings().items()]
    stdout = run_job(
        "-n", namesrv, "--output", str(output), "--format", "json", *settings, cwd=tmp_path
    )
    assert "|p99Ms" in stdout, stdout  # the printed table's header
    assert f"{len(expected)} rows written to {output}" in stdout, stdout

    rows = [
        json.loads(line)
        for part in sorted(output.glob("part-*.json"))
        for line in part.read_text().splitlines()
    ]
    got = Counter(
        {
            (r["topic"], r["consumerGroup"], int(datetime.fromisoformat(r["minute"]).timestamp())
             * 1000): r["messages"]
            for r in rows
        }
    )  # fmt: skip
    assert len(rows) == len(got), "one row per (topic, group, minute)"
    assert got == expected
    for group in GROUPS:
        assert sum(r["messages"] for r in rows if r["consumerGroup"] == group) == total
    for r in rows:
        assert 0 <= r["p50Ms"] <= r["p90Ms"] <= r["p99Ms"] <= r["maxMs"], r
