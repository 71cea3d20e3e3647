"""The `pocketmq` PySpark data source: topics as DataFrames, batch and streaming, both ways.

Spark imports this module in each Python process that plans a query (finding the source by
name, asking its schema, planning the read or write), a new process each time: the readers and
writers, with the client and Arrow they bring (about 0.4 s of imports), are imported only by
the methods that make them.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pocketmq.spark.schema import SCHEMA_DDL


class PocketMQDataSource(DataSource):
    """`spark.read.format("pocketmq").option("namesrv", ...).option("topic", ...)`; see
    docs/spark.md for every option."""

    @classmethod
    def name(cls) -> str:
        return "pocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        from pocketmq.spark.options import ReadOptions
        from pocketmq.spark.reader import BatchReader
        from pocketmq.spark.rows import ReadColumns

        # `schema` is this source's own, or the one a user gave to read fewer columns.
        options = ReadOptions.parse(self.options, streaming=False)
        return BatchReader(options, ReadColumns.of(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from pocketmq.spark.options import ReadOptions
        from pocketmq.spark.reader import StreamReader
        from pocketmq.spark.rows import ReadColumns

        options = ReadOptions.parse(self.options, streaming=True)
        return StreamReader(options, ReadColumns.of(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pocketmq.spark.options import WriteOptions
        from pocketmq.spark.rows import check_writable
        from pocketmq.spark.writer import BatchWriter

        check_writable(schema.fieldNames())
        return BatchWriter(WriteOptions.parse(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pocketmq.spark.options import WriteOptions
        from pocketmq.spark.rows import check_writable
        from pocketmq.spark.writer import StreamWriter

        check_writable(schema.fieldNames())
        return StreamWriter(WriteOptions.parse(self.options, streaming=True))
