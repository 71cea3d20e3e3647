"""Lets Spark find the `pocketmq` data source by name: Spark registers the `DefaultSource` of
every top-level module named `pyspark_*` on the workers' path."""

from pocketmq.spark import PocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
