"""Rows per second through the `pocketmq` PySpark data source, in a local[2] session with the
broker on the same machine.

Starts `pocketmq up` (ASYNC_FLUSH) on free loopback ports with data in a temporary directory,
loads `--rows` messages of `--size` bytes into a topic of `--queues` queues, then, after one
warm-up query (the first query of a session starts Python workers):

1. batch read: `spark.read.format("pocketmq")` into `sum(length(body))`, with the connector's
   schema, and with `.schema("body binary")` (only the body column built);
2. streaming read: `Trigger.AvailableNow` from the earliest offsets into a Parquet sink;
3. batch write: a DataFrame of `--rows` bodies written with `df.write.format("pocketmq")`, and
   the same rows into Spark's `noop` sink, which shows what making them costs Spark alone;
4. streaming write: the loaded topic streamed into another through the idempotent sink.

With `--cpu`, each path also reports the CPU it cost a row (user + system, from `/proc`): the
broker's, Spark's JVM's and its Python workers' (the processes under this one that are neither
the broker nor Java).

`python benchmarks/spark_bench.py [--rows N] [--size BYTES] [--queues N] [--rounds N] [--cpu]
[--json]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import cast

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pyspark.sql import DataFrame, DataFrameReader, SparkSession  # noqa: E402
from pyspark.sql.streaming import StreamingQuery  # noqa: E402

from pocketmq.client.admin import AdminClient, TopicSettings  # noqa: E402
from pocketmq.client.aio import Message, Producer  # noqa: E402
from pocketmq.testing import start_up_process  # noqa: E402
from pocketmq.testing.proc_stat import proc_stat  # noqa: E402


async def create_topics(namesrv: str, topics: list[str], queues: int) -> None:
    async with AdminClient([namesrv]) as admin:
        for topic in topics:
            await admin.create_topic(
                TopicSettings(topic, read_queue_nums=queues, write_queue_nums=queues),
                cluster="DefaultCluster",
            )
            await admin.wait_for_route(topic, timeout_s=10)


async def load(namesrv: str, topic: str, rows: int, size: int) -> float:
    """Sends `rows` messages in batches of 64, 16 batches in flight; returns the seconds."""
    started = time.perf_counter()
    async with Producer("spark-bench-loader", namesrv=namesrv) as producer:
        window = asyncio.Semaphore(16)

        async def send(first: int, count: int) -> None:
            async with window:
                batch = [
                    Message(topic, f"{n:012d}".encode().ljust(size, b"x"), keys=f"k{n}")
                    for n in range(first, first + count)
                ]
                await producer.send_batch(batch)

        await asyncio.gather(*(send(f, min(64, rows - f)) for f in range(0, rows, 64)))
    return time.perf_counter() - started


class CpuMeter:
    """CPU seconds (user + system) of this process's descendants, by kind. Spark's workers may
    end during a run, so a thread reads them every 0.2 s and keeps each one's last reading."""

    def __init__(self, broker_pid: int) -> None:
        self._broker_pid = broker_pid
        self._last: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def totals(self) -> dict[str, float]:
        self._sample()
        with self._lock:
            found: dict[str, float] = {"broker": 0.0, "jvm": 0.0, "python workers": 0.0}
            for kind, seconds in self._last.values():
                found[kind] = found.get(kind, 0.0) + seconds
        return found

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def _sample(self) -> None:
        children: dict[int, list[int]] = {}
        seconds: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                stat = proc_stat(entry)
            except OSError:
                continue  # ended meanwhile
            children.setdefault(stat.parent, []).append(int(entry))
            seconds[int(entry)] = stat.cpu_s
        readings = {}
        pending = list(children.get(os.getpid(), []))
        for _ in range(10_000):  # a bounded walk of the tree below this process
            if not pending:
                break
            pid = pending.pop()
            pending.extend(children.get(pid, []))
            if pid in seconds:
                readings[pid] = (self._kind(pid), seconds[pid])
        with self._lock:
            self._last.update(readings)

    def _kind(self, pid: int) -> str:
        if pid == self._broker_pid:
            return "broker"
        try:
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0]
        except OSError:
            return "python workers"
        return "jvm" if os.path.basename(program) == b"java" else "python workers"


def session() -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pocketmq-spark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(run: Callable[[], int]) -> tuple[float, int]:
    started = time.perf_counter()
    rows = run()
    return time.perf_counter() - started, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--bulk-pulls",
        action="store_true",
        help="let one pull carry up to 4,096 messages / 4 MiB (maxTransferCountOnMessageInMemory, "
        "maxTransferBytesOnMessageInMemory) instead of RocketMQ's 32 / 256 KiB",
    )
    parser.add_argument("--only", help="run these paths only, e.g. 'batch read,batch write'")
    parser.add_argument(
        "--cpu", action="store_true", help="also report each path's CPU a row, by process"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pocketmq-spark-bench-") as tmp:
        work = Path(tmp)
        properties = work / "broker.properties"
        properties.write_text(
            "maxTransferCountOnMessageInMemory=4096\nmaxTransferBytesOnMessageInMemory=4194304\n"
            if args.bulk_pulls
            else ""
        )
        server = start_up_process(work / "d", work / "up.log", "-c", str(properties))
        meter = CpuMeter(server.process.pid) if args.cpu else None
        try:
            figures = run(server.address, work, args, meter)
        finally:
            if meter is not None:
                meter.close()
            server.stop()
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    cpu = cast(dict[str, dict[str, list[float]]], figures.get("cpu_us_per_row", {}))
    print(f"\n{args.rows:,} rows of {args.size} B, {args.queues} queues, local[2]")
    extra = " CPU us a row: broker / JVM / Python workers (medians) |" if cpu else ""
    print(f"| path | rows/s (median) | min-max | MiB/s |{extra}")
    print("|---|---:|---:|---:|" + ("---:|" if cpu else ""))
    for name, rates in figures["rates"].items():
        if not rates:
            continue
        median = statistics.median(rates)
        line = (
            f"| {name} | {median:,.0f} | {min(rates):,.0f}-{max(rates):,.0f} "
            f"| {median * args.size / 2**20:,.0f} |"
        )
        if cpu:
            kinds = cpu[name]
            line += " " + " / ".join(
                f"{statistics.median(kinds[k]):.1f}" for k in ("broker", "jvm", "python workers")
            ) + " |"  # fmt: skip
        print(line)


def run(
    namesrv: str, work: Path, args: argparse.Namespace, meter: CpuMeter | None
) -> dict[str, object]:
    topic, written, copied = "SparkBench", "SparkBenchWritten", "SparkBenchCopied"
    asyncio.run(create_topics(namesrv, [topic, written, copied], args.queues))
    seconds = asyncio.run(load(namesrv, topic, args.rows, args.size))
    print(f"loaded {args.rows:,} messages in {seconds:.1f} s", file=sys.stderr)
    spark = session()

    def source() -> DataFrameReader:
        # A reader keeps what `.schema(...)` set on it: a new one for each query.
        return spark.read.format("pocketmq").option("namesrv", namesrv).option("topic", topic)

    source().load().limit(10).collect()  # warm-up: Python workers, imports, connections

    def from_earliest() -> DataFrame:
        return (
            spark.readStream.format("pocketmq")
            .option("namesrv", namesrv)
            .option("topic", topic)
            .option("startingOffsets", "earliest")
            .load()
        )

    def rows_of(query: StreamingQuery) -> int:
        query.awaitTermination()
        return sum(p["numInputRows"] for p in query.recentProgress)

    def batch_read(_round: int) -> int:
        row = source().load().selectExpr("count(*) AS n", "sum(length(body)) AS b").collect()[0]
        return int(row.n)

    def batch_read_bodies(_round: int) -> int:
        frame = source().schema("body binary").load()
        row = frame.selectExpr("count(*) AS n", "sum(length(body)) AS b").collect()[0]
        return int(row.n)

    def stream_to_parquet(round_no: int) -> int:
        return rows_of(
            from_earliest()
            .writeStream.format("parquet")
            .option("path", str(work / f"parquet-{round_no}"))
            .option("checkpointLocation", str(work / f"checkpoint-parquet-{round_no}"))
            .trigger(availableNow=True)
            .start()
        )

    def rows_to_write() -> DataFrame:
        # Each body is its row's number and a constant Spark folds once, joined as binary:
        # `rpad` padded each row afresh (about 8 us of the JVM's CPU a row, two thirds of its
        # share of a write to pocketmq), and so does `substr` on a string (about 5 us).
        number = min(args.size, 20)
        return spark.range(args.rows).selectExpr(
            f"concat(cast(lpad(cast(id AS string), {number}, '0') AS binary), "
            f"cast(repeat('x', {args.size - number}) AS binary)) AS body",
            "cast(id AS string) AS keys",
        )

    def batch_write(_round: int) -> int:
        rows_to_write().write.format("pocketmq").option("namesrv", namesrv).option(
            "topic", written
        ).mode("append").save()
        return args.rows

    def rows_alone(_round: int) -> int:
        rows_to_write().write.format("noop").mode("overwrite").save()
        return args.rows

    def stream_write(round_no: int) -> int:
        return rows_of(
            from_earliest()
            .select("body", "keys")
            .writeStream.format("pocketmq")
            .option("namesrv", namesrv)
            .option("topic", copied)
            .option("checkpointLocation", str(work / f"checkpoint-sink-{round_no}"))
            .trigger(availableNow=True)
            .start()
        )

    rates: dict[str, list[float]] = {
        "batch read": [],
        "batch read (body column only)": [],
        "streaming read into Parquet": [],
        "batch write": [],
        "the rows alone into Spark's noop sink": [],
        "streaming write (idempotent sink)": [],
    }
    cpu: dict[str, dict[str, list[float]]] = {name: {} for name in rates}
    wanted = set(args.only.split(",")) if args.only else set(rates)
    for round_no in range(args.rounds):
        for name, step in zip(
            rates,
            (
                batch_read,
                batch_read_bodies,
                stream_to_parquet,
                batch_write,
                rows_alone,
                stream_write,
            ),
            strict=True,
        ):
            if name not in wanted:
                continue
            before = meter.totals() if meter is not None else {}
            elapsed, rows = timed(lambda: step(round_no))  # noqa: B023 (called at once)
            if rows != args.rows:
                raise RuntimeError(f"{name}: {rows} rows, expected {args.rows}")
            rates[name].append(rows / elapsed)
            line = f"round {round_no + 1} {name}: {rows / elapsed:,.0f} rows/s"
            if meter is not None:
                spent = {k: v - before.get(k, 0.0) for k, v in meter.totals().items()}
                per_row = {k: v / rows * 1e6 for k, v in spent.items()}
                for kind, micros in per_row.items():
                    cpu[name].setdefault(kind, []).append(micros)
                line += ", CPU a row: " + ", ".join(f"{k} {v:.1f} us" for k, v in per_row.items())
            print(line, file=sys.stderr)
    spark.stop()
    figures: dict[str, object] = {
        "rows": args.rows, "size": args.size, "queues": args.queues, "rates": rates
    }  # fmt: skip
    if meter is not None:
        figures["cpu_us_per_row"] = cpu
    return figures


if __name__ == "__main__":
    main()
