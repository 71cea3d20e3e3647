"""The `pocketmq` PySpark data source: topics as DataFrames, batch and streaming, both ways."""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from pocketmq.spark.options import ReadOptions, WriteOptions
from pocketmq.spark.reader import BatchReader, StreamReader
from pocketmq.spark.rows import SCHEMA_DDL, ReadColumns, check_writable
from pocketmq.spark.writer import BatchWriter, StreamWriter


class PocketMQDataSource(DataSource):
    """`spark.read.format("pocketmq").option("namesrv", ...).option("topic", ...)`; see
    docs/spark.md for every option."""

    @classmethod
    def name(cls) -> str:
        return "pocketmq"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        # `schema` is this source's own, or the one a user gave to read fewer columns.
        options = ReadOptions.parse(self.options, streaming=False)
        return BatchReader(options, ReadColumns.of(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = ReadOptions.parse(self.options, streaming=True)
        return StreamReader(options, ReadColumns.of(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        check_writable(schema.fieldNames())
        return BatchWriter(WriteOptions.parse(self.options, streaming=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        check_writable(schema.fieldNames())
        return StreamWriter(WriteOptions.parse(self.options, streaming=True))
