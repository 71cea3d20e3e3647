"""End-to-end latency of traced messages, per topic, consumer group and minute, from the
message-trace topic, as a Spark batch job.

Clients with message trace on write a Pub record when they send a message and SubBefore and
SubAfter records around each listener call that consumes it. This job reads those records
through the `pocketmq` data source, pairs each message's Pub with the Sub records of every
consumer group by message id, and prints, per topic, consumer group and minute of the send:
how many messages, and the p50, p90, p99 and max of consumed time minus send time in ms.

    python trace_latency.py -n 127.0.0.1:9876
    python trace_latency.py -n 127.0.0.1:9876 --output latency --format json
"""

from __future__ import annotations

import argparse
import os
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pocketmq.observability.trace import TRACE_TOPIC_DEFAULT, TraceDecodeError, decode

RECORD = "type string, timestampMs long, group string, topic string, msgId string, ok boolean"
"""One trace record, as `trace_records` gives it. Sub records carry no topic (it is "")."""


def trace_records(body: bytearray | None) -> list[tuple[str, int, str, str, str, bool]]:
    """The records of one trace message body; none when the body is not trace text.

    Runs in Spark's Python workers, once per message of the trace topic.
    """
    try:
        contexts = decode(bytes(body or b"").decode("utf-8"))
    except (UnicodeDecodeError, TraceDecodeError):
        return []
    return [
        (c.trace_type.value, c.timestamp_ms, c.group_name, b.topic, b.msg_id, c.success)
        for c in contexts
        for b in c.beans
    ]


def latency_table(trace_messages: DataFrame, consumed: str = "SubAfter") -> DataFrame:
    """From trace messages (the data source's rows) to one row per topic, consumer group and
    minute of the send: messages, p50Ms, p90Ms, p99Ms, maxMs.

    A message's latency for a group is the timestamp of the group's first successful
    `consumed` record (SubBefore: the listener got it; SubAfter: the listener returned) minus
    its Pub timestamp (the send began). Redeliveries and duplicate records count once; Sub
    records without a Pub (an untraced producer) or without a group (clients that do not
    write it in SubAfter) are left out.
    """
    decode_body = F.udf(trace_records, f"array<struct<{RECORD}>>")
    records = trace_messages.select(F.inline(decode_body("body")))
    sent = (
        records.where(F.col("type") == "Pub")
        .groupBy("msgId", "topic")
        .agg(F.min("timestampMs").alias("sentMs"))
    )
    received = (
        records.where((F.col("type") == consumed) & F.col("ok") & (F.col("group") != ""))
        .groupBy("msgId", "group")
        .agg(F.min("timestampMs").alias("consumedMs"))
    )
    latencies = sent.join(received, "msgId").select(
        "topic",
        F.col("group").alias("consumerGroup"),
        F.date_trunc("minute", F.timestamp_millis("sentMs")).alias("minute"),
        (F.col("consumedMs") - F.col("sentMs")).alias("latencyMs"),
    )
    # percentile_approx returns observed values; its rank error is at most count / 10000.
    return (
        latencies.groupBy("topic", "consumerGroup", "minute")
        .agg(
            F.count("*").alias("messages"),
            F.percentile_approx("latencyMs", 0.5, 10000).alias("p50Ms"),
            F.percentile_approx("latencyMs", 0.9, 10000).alias("p90Ms"),
            F.percentile_approx("latencyMs", 0.99, 10000).alias("p99Ms"),
            F.max("latencyMs").alias("maxMs"),
        )
        .orderBy("topic", "consumerGroup", "minute")
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
    add("-t", "--trace-topic", default=TRACE_TOPIC_DEFAULT, help="(default: %(default)s)")
    add(
        "--consumed",
        choices=["SubBefore", "SubAfter"],
        default="SubAfter",
        help="the record that ends a latency: listener called or returned (default: %(default)s)",
    )
    add(
        "--starting-offsets",
        default="earliest",
        help="where to start reading the trace topic: earliest, or a time in epoch ms",
    )
    add("--output", help="also write the table to this directory")
    add("--format", choices=["csv", "json"], default="csv", help="of --output (default: csv)")
    add("--master", default="local[2]", help="Spark master (default: %(default)s)")
    add("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting")
    return parser.parse_args(argv)


def build_session(args: argparse.Namespace) -> SparkSession:
    # Spark's Python workers must run an interpreter that has pocketmq installed: this one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(args.master)
        .appName("spark-trace")
        .config("spark.sql.session.timeZone", "UTC")  # minutes are UTC minutes
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for setting in args.conf:
        key, sep, value = setting.partition("=")
        if not sep:
            raise SystemExit(f"--conf {setting!r}: expected KEY=VALUE")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = build_session(args)
    trace_messages = (
        spark.read.format("pocketmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.trace_topic)
        .option("startingOffsets", args.starting_offsets)
        .load()
    )
    table = latency_table(trace_messages, args.consumed).cache()
    rows = table.count()
    table.show(max(rows, 1), truncate=False)
    if args.output:
        writer = table.coalesce(1).write.mode("overwrite")
        if args.format == "csv":
            writer.option("header", "true").csv(args.output)
        else:
            writer.json(args.output)
        sys.stdout.write(f"{rows} rows written to {args.output}\n")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
