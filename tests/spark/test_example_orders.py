"""examples/spark-orders runs as its README says: the producer replays known orders into
`Orders`, the Spark job (AvailableNow) writes per-minute revenue to Parquet and to `OrderStats`,
and both hold exactly the closed windows, once each."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from pocketmq.testing import ServerProcess
from tests.spark.conftest import read_topic, spark_settings

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark-orders"
T0_MS = 1_704_110_400_000  # 2024-01-01T12:00:00Z, a minute boundary
MINUTE_MS = 60_000

# (event time after T0 in ms, customer, amount), not in event-time order.
ORDERS = [
    (5_000, "alice", "10.50"),
    (61_000, "bob", "20.00"),
    (50_000, "carol", "1.25"),
    (120_000, "alice", "7.00"),
    (119_999, "dave", "3.30"),  # the last millisecond of 12:01
    (210_000, "erin", "100.01"),
    (150_000, "bob", "0.99"),
    (59_999, "frank", "5.00"),  # the last millisecond of 12:00
    (60_000, "grace", "12.34"),  # the first millisecond of 12:01
    (179_000, "heidi", "45.60"),
    (30_000, "alice", "2.22"),
    (235_500, "bob", "19.99"),
    (100_000, "carol", "0.01"),
    (200_000, "dave", "8.88"),
]
# A much later order: it moves the watermark (1 minute behind) past the end of 12:03.
CLOSER = (6 * MINUTE_MS, "closer", "1.00")
EXPECTED = {  # window start -> (orders, revenue)
    "2024-01-01T12:00:00Z": (4, Decimal("18.97")),
    "2024-01-01T12:01:00Z": (4, Decimal("35.65")),
    "2024-01-01T12:02:00Z": (3, Decimal("53.59")),
    "2024-01-01T12:03:00Z": (3, Decimal("128.88")),
}


def utc(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def start(script: str, *args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE / script), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a kill reaches the job's JVM and Python workers too
    )


def kill(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()


def finish(process: subprocess.Popen[str], timeout_s: float) -> str:
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill(process)
        raise
    assert process.returncode == 0, f"{process.args}:\n{stdout[-3000:]}\n{stderr[-5000:]}"
    return stdout


def test_the_orders_example_writes_exact_window_totals_to_parquet_and_the_topic(
    cluster: ServerProcess, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    replay = tmp_path / "orders.jsonl"
    lines = [
        {"orderId": f"o-{n}", "customer": who, "amount": float(amount), "eventTime": T0_MS + at}
        for n, (at, who, amount) in enumerate([*ORDERS, CLOSER])
    ]
    replay.write_text("".join(json.dumps(line) + "\n" for line in lines))
    producer = start(
        "produce_orders.py", "-n", cluster.address, "--replay", str(replay), "--rate", "0",
        cwd=tmp_path,
    )  # fmt: skip
    assert f"sent {len(lines)} orders to Orders" in finish(producer, 60)

    settings = [f"--conf={key}={value}" for key, value in spark_settings().items()]
    output, checkpoint = tmp_path / "stats", tmp_path / "checkpoint"
    job = start(
        "orders_job.py", "-n", cluster.address, "--available-now", "--output", str(output),
        "--checkpoint", str(checkpoint), *settings, cwd=tmp_path,
    )  # fmt: skip
    try:
        spark: SparkSession = request.getfixturevalue("spark")  # starts while the job runs
        summary = finish(job, 180)
    finally:
        kill(job)
    for query in ("parquet", "topic"):
        pattern = rf"^{query}: \d+ batches, {len(lines)} orders read$"
        assert re.search(pattern, summary, re.MULTILINE), summary

    windows = (
        spark.read.parquet(str(output))
        .selectExpr(
            "unix_millis(windowStart) AS start_ms",
            "unix_millis(windowEnd) - unix_millis(windowStart) AS length_ms",
            "orders",
            "revenue",
        )
        .collect()
    )
    assert sorted((utc(w.start_ms), (w.orders, w.revenue)) for w in windows) == sorted(
        EXPECTED.items()
    )
    assert {w.length_ms for w in windows} == {MINUTE_MS}

    messages = read_topic(spark, cluster.address, "OrderStats")
    assert sorted(m.keys for m in messages) == sorted(EXPECTED), "one message per window"
    for message in messages:
        stats = json.loads(message.body, parse_float=Decimal)
        assert (stats["orders"], stats["revenue"]) == EXPECTED[message.keys]
        assert stats["windowStart"] == message.keys.replace("Z", ".000Z")
