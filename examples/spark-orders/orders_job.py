"""Revenue and order count per event-time window of the `Orders` topic, streamed by Spark into
Parquet files and into the `OrderStats` topic.

A window is written once, when the watermark (the latest event time seen, minus the allowed
lateness) has passed its end; orders that arrive after that are dropped. Both outputs are exactly
once across restarts: each query keeps its source offsets in its own checkpoint directory.

    python orders_job.py -n 127.0.0.1:9876 --duration 600
    python orders_job.py -n 127.0.0.1:9876 --available-now
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.streaming.readwriter import DataStreamWriter
from topics import ensure_topics

ORDER_SCHEMA = "orderId string, customer string, amount decimal(12,2), eventTime long"


def window_stats(orders: DataFrame, window: str, watermark: str) -> DataFrame:
    """Orders (the source's rows, a JSON order in each body) to one row per window:
    windowStart, windowEnd, orders, revenue. Bodies that are not orders are skipped."""
    parsed = orders.select(
        F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("order")
    ).select("order.*")
    return (
        parsed.where(F.col("eventTime").isNotNull() & F.col("amount").isNotNull())
        .withColumn("eventTime", F.timestamp_millis("eventTime"))
        .withWatermark("eventTime", watermark)
        .groupBy(F.window("eventTime", window))
        .agg(F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("revenue"))
        .select(
            F.col("window.start").alias("windowStart"),
            F.col("window.end").alias("windowEnd"),
            "orders",
            "revenue",
        )
    )


def as_messages(stats: DataFrame) -> DataFrame:
    """A window row as a message: its JSON as the body, its start (UTC) as the key."""
    return stats.select(
        F.to_json(F.struct(*stats.columns)).alias("body"),
        F.date_format("windowStart", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("keys"),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add(
        "-n",
        "--namesrv",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="NameServer address(es) host:port;host:port (default: $NAMESRV_ADDR or %(default)s)",
    )
    add("--orders-topic", default="Orders", help="topic to read (default: %(default)s)")
    add("--stats-topic", default="OrderStats", help="topic to write (default: %(default)s)")
    add("-c", "--cluster", default="DefaultCluster", help="cluster for new topics")
    add("--queues", type=int, default=4, help="queues of a new topic (4)")
    add("--output", type=Path, default=Path("spark-orders-out/stats"), help="Parquet directory")
    add("--checkpoint", type=Path, default=Path("spark-orders-out/checkpoint"))
    add("--window", default="1 minute", help="window length (default: %(default)s)")
    add("--watermark", default="1 minute", help="allowed lateness (default: %(default)s)")
    add("--starting-offsets", default="earliest", help="first run only: earliest or latest")
    add("--max-orders-per-trigger", type=int, help="rate limit of each micro-batch")
    add("--group", default="spark-orders", help="consumer group prefix for progress reports")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--available-now", action="store_true", help="process what is there, stop")
    mode.add_argument("--duration", type=float, help="stop after this many seconds")
    add("--trigger", default="5 seconds", help="micro-batch interval (default: %(default)s)")
    add("--master", default="local[2]", help="Spark master (default: %(default)s)")
    add("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    return parser.parse_args(argv)


def build_session(args: argparse.Namespace) -> SparkSession:
    # Spark's Python workers run PYSPARK_PYTHON (python3 on PATH by default), which must be
    # an interpreter with pocketmq and pyarrow installed: this one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": "2",  # the aggregation's state: 2 partitions, not 200
        "spark.ui.showConsoleProgress": "false",
    }
    for setting in args.conf:
        key, sep, value = setting.partition("=")
        if not sep:
            raise SystemExit(f"--conf {setting!r}: expected KEY=VALUE")
        settings[key] = value
    builder = SparkSession.builder.master(args.master).appName("spark-orders")
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def read_orders(spark: SparkSession, args: argparse.Namespace, group: str) -> DataFrame:
    reader = (
        spark.readStream.format("pocketmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.orders_topic)
        .option("startingOffsets", args.starting_offsets)
        .option("consumerGroup", group)  # `pocketmq admin consumerProgress -g <group>`
    )
    if args.max_orders_per_trigger:
        reader = reader.option("maxMessagesPerTrigger", str(args.max_orders_per_trigger))
    return reader.load()


def start(writer: DataStreamWriter, args: argparse.Namespace, name: str) -> StreamingQuery:
    writer = writer.queryName(name).outputMode("append")
    writer = writer.option("checkpointLocation", str((args.checkpoint / name).resolve()))
    if args.available_now:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=args.trigger).start()


def wait(queries: list[StreamingQuery], duration_s: float | None) -> None:
    """Until every query stopped (AvailableNow) or `duration_s` passed; raises a query's error."""
    deadline = time.monotonic() + duration_s if duration_s else float("inf")
    try:
        while any(q.isActive for q in queries) and time.monotonic() < deadline:
            for query in queries:
                error = query.exception()
                if error is not None:
                    raise error
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for query in queries:
            query.stop()
    for query in queries:
        error = query.exception()
        if error is not None:
            raise error


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_topics(
        args.namesrv,
        [args.orders_topic, args.stats_topic],
        cluster=args.cluster,
        queues=args.queues,
    )
    spark = build_session(args)
    window, watermark = args.window, args.watermark
    to_parquet = window_stats(read_orders(spark, args, f"{args.group}-parquet"), window, watermark)
    to_topic = window_stats(read_orders(spark, args, f"{args.group}-topic"), window, watermark)
    queries = [
        start(
            to_parquet.writeStream.format("parquet").option("path", str(args.output.resolve())),
            args,
            "parquet",
        ),
        start(
            # The sink's identity comes from the checkpoint location: a new checkpoint is a new
            # sink, which publishes its batches from 0 again.
            as_messages(to_topic)
            .writeStream.format("pocketmq")
            .option("namesrv", args.namesrv)
            .option("topic", args.stats_topic),
            args,
            "topic",
        ),
    ]
    wait(queries, args.duration)
    for query in queries:
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        sys.stdout.write(f"{query.name}: {len(query.recentProgress)} batches, {rows} orders read\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
