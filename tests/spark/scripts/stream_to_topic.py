"""A Spark driver for the sink's fault test: streams one topic into another through the pocketmq
sink, with availableNow, from a checkpoint. Run twice with the same checkpoint: the first run is
killed by the test while the sink waits after committing a batch."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession
from tests.spark.conftest import spark_settings


def main() -> None:
    namesrv, source, target, checkpoint = sys.argv[1:5]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master("local[2]").appName("sink-fault")
    for key, value in spark_settings().items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
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
