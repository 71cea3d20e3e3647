"""PySpark data source for pocketmq topics (needs the `spark` extra: pyspark and pyarrow)."""

from pocketmq.spark.datasource import PocketMQDataSource

__all__ = ["PocketMQDataSource"]
