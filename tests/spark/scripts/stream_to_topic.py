"""A Spark driver for the sink's fault tests: streams one topic into another through the pocketmq
sink, with availableNow, from a checkpoint. Run twice with the same checkpoint: the first run is
killed by the test while the sink waits (after committing a batch, or with a batch partly
written)."""

from __future__ import annotations

import argparse

from tests.spark.conftest import local_session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("namesrv")
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("checkpoint")
    parser.add_argument("--batch-size", default="256")
    parser.add_argument("--per-trigger", default="500")
    parser.add_argument("--shuffle", action="store_true", help="repartition by key first")
    args = parser.parse_args()
    spark = local_session("sink-fault")
    stream = (
        spark.readStream.format("pocketmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", args.per_trigger)
        .load()
        .select("body", "keys")
    )
    if args.shuffle:
        # After a shuffle, the order of rows within a partition may differ between runs.
        stream = stream.repartition(3, "keys")
    query = (
        stream.writeStream.format("pocketmq")
        .option("namesrv", args.namesrv)
        .option("topic", args.target)
        .option("sinkId", "fault-test")
        .option("batchSize", args.batch_size)
        .option("checkpointLocation", args.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    print("driver finished", flush=True)  # noqa: T201
    spark.stop()


if __name__ == "__main__":
    main()
