"""A Spark driver for the sink's fault test: streams one topic into another through the pocketmq
sink, with availableNow, from a checkpoint. Run twice with the same checkpoint: the first run is
killed by the test while the sink waits after committing a batch."""

from __future__ import annotations

import sys

from tests.spark.conftest import local_session


def main() -> None:
    namesrv, source, target, checkpoint = sys.argv[1:5]
    spark = local_session("sink-fault")
    stream = (
        spark.readStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("maxMessagesPerTrigger", "500")
        .load()
        .select("body", "keys")
    )
    query = (
        stream.writeStream.format("pocketmq")
        .option("namesrv", namesrv)
        .option("topic", target)
        .option("sinkId", "fault-test")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    print("driver finished", flush=True)  # noqa: T201
    spark.stop()


if __name__ == "__main__":
    main()
