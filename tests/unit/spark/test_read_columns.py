"""A read's columns from the schema Spark hands the reader: the connector's own, or a user's
`.schema(...)` naming some of its columns; anything else refused with what to change."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")
pytest.importorskip("pyspark")

from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pocketmq.spark.datasource import PocketMQDataSource  # noqa: E402
from pocketmq.spark.records import to_record_batch  # noqa: E402
from pocketmq.spark.rows import (  # noqa: E402
    ALL_COLUMNS,
    ARROW_SCHEMA,
    COLUMN_TYPES,
    SCHEMA_DDL,
    ReadColumns,
)
from tests.unit.spark.test_records import QUEUE, _plain, encode  # noqa: E402

FULL = StructType([StructField(name, kind) for name, kind in COLUMN_TYPES.items()])


def schema(*fields: tuple[str, object] | tuple[str, object, bool]) -> StructType:
    return StructType([StructField(*field) for field in fields])  # type: ignore[misc]


def test_the_sources_own_schema_reads_every_column() -> None:
    assert ReadColumns.of(FULL) == ALL_COLUMNS
    assert list(COLUMN_TYPES) == ARROW_SCHEMA.names
    assert SCHEMA_DDL.startswith("body binary, keys string, tags string, topic string")


def test_a_user_schema_picks_columns_in_its_order_under_its_names() -> None:
    read = ReadColumns.of(schema(("QueueOffset", LongType()), ("body", BinaryType(), False)))
    assert read.names == ("queueOffset", "body")
    assert read.schema == pa.schema(
        [pa.field("QueueOffset", pa.int64()), pa.field("body", pa.binary(), nullable=False)]
    )


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([("payload", BinaryType())], "no column 'payload'; its columns are body, keys"),
        ([("body", StringType())], "'body' is binary, not string: declare it binary and CAST"),
        ([("queueOffset", StringType())], "'queueOffset' is bigint, not string"),
        ([("keys", StringType(), False)], "'keys' is null for a message without it"),
        ([("body", BinaryType()), ("BODY", BinaryType())], "names the column 'body' twice"),
        ([], "names no column"),
    ],
)
def test_a_schema_the_source_cannot_fill_is_refused_with_what_to_change(
    fields: list[tuple[str, object]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ReadColumns.of(schema(*fields))


def test_a_batch_of_some_columns_holds_the_same_values_as_the_whole_batch() -> None:
    pulls = [b"".join(encode(100 + n, {**_plain(), "keys": f"k{n}"}) for n in range(5))]
    whole = to_record_batch(pulls, QUEUE, 101, 104)
    read = ReadColumns.of(schema(("keys", StringType()), ("queueOffset", LongType())))
    some = to_record_batch(pulls, QUEUE, 101, 104, read=read)
    assert some.schema == read.schema
    assert some.to_pylist() == [
        {"keys": row["keys"], "queueOffset": row["queueOffset"]} for row in whole.to_pylist()
    ]
    assert [row["keys"] for row in some.to_pylist()] == ["k1", "k2", "k3"]


def test_batch_and_stream_readers_take_the_schema_spark_hands_them() -> None:
    source = PocketMQDataSource({"namesrv": "127.0.0.1:9876", "topic": "Orders"})
    some = schema(("body", BinaryType()))
    assert source.reader(some).columns.names == ("body",)  # type: ignore[attr-defined]
    assert source.streamReader(some).columns.names == ("body",)  # type: ignore[attr-defined]
    assert source.reader(FULL).columns == ALL_COLUMNS  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="no column 'payload'"):
        source.streamReader(schema(("payload", BinaryType())))
