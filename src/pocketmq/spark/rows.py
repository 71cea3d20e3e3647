"""The connector's schema (reads) and rows to messages (writes)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from pocketmq.client.aio import Message

COLUMN_TYPES: Final[dict[str, DataType]] = {
    "body": BinaryType(),
    "keys": StringType(),
    "tags": StringType(),
    "topic": StringType(),
    "brokerName": StringType(),
    "queueId": IntegerType(),
    "queueOffset": LongType(),
    "msgId": StringType(),
    "bornTimestamp": TimestampType(),
    "storeTimestamp": TimestampType(),
    "properties": MapType(StringType(), StringType()),
    "reconsumeTimes": IntegerType(),
}
"""A read's columns, in the order of the connector's own schema."""
NULLABLE: Final = frozenset({"keys", "tags"})
"""The columns a message can leave null (one without keys or tags); `msgId` falls back to
RocketMQ's offset message id."""
FROM_PROPERTIES: Final = frozenset({"keys", "tags", "msgId", "properties"})
SCHEMA_DDL: Final = ", ".join(f"{name} {t.simpleString()}" for name, t in COLUMN_TYPES.items())
TIMESTAMP = pa.timestamp("us", tz="UTC")
ARROW_SCHEMA = pa.schema(
    [
        ("body", pa.binary()),
        ("keys", pa.string()),
        ("tags", pa.string()),
        ("topic", pa.string()),
        ("brokerName", pa.string()),
        ("queueId", pa.int32()),
        ("queueOffset", pa.int64()),
        ("msgId", pa.string()),
        ("bornTimestamp", TIMESTAMP),
        ("storeTimestamp", TIMESTAMP),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("reconsumeTimes", pa.int32()),
    ]
)
WRITABLE = {"body", "keys", "tags", "properties", "topic"}


@dataclass(frozen=True)
class ReadColumns:
    """What a read yields: the connector's columns that a schema names, in its order and under
    its names (Spark compares names case-insensitively), as the Arrow schema Spark expects of
    every batch."""

    names: tuple[str, ...]
    """The connector's name of each column, in the batches' order."""
    schema: pa.Schema

    @property
    def needs_properties(self) -> bool:
        """Whether a column comes from the messages' properties (the rest are fixed fields)."""
        return not FROM_PROPERTIES.isdisjoint(self.names)

    @classmethod
    def of(cls, schema: StructType) -> ReadColumns:
        """The columns of the schema Spark hands a reader: the connector's own, or one a user
        gave with `.schema(...)` to read fewer columns (only those are built).

        Raises:
            ValueError: the schema names a column the connector does not have, one twice, one
                with another type, or one that can be null as NOT NULL; the message says which.
        """
        by_lower = {name.lower(): name for name in COLUMN_TYPES}
        names: list[str] = []
        fields: list[pa.Field] = []
        for field in schema.fields:
            name = by_lower.get(field.name.lower())
            if name is None:
                raise ValueError(
                    f"the pocketmq source has no column {field.name!r}; its columns are "
                    f"{', '.join(COLUMN_TYPES)} (schema: {SCHEMA_DDL})"
                )
            if name in names:
                raise ValueError(f"the schema names the column {name!r} twice")
            kind = COLUMN_TYPES[name]
            if field.dataType != kind:
                raise ValueError(
                    f"column {name!r} is {kind.simpleString()}, not "
                    f"{field.dataType.simpleString()}: declare it {kind.simpleString()} and "
                    "CAST it in the query"
                )
            if name in NULLABLE and not field.nullable:
                raise ValueError(
                    f"column {name!r} is null for a message without it: declare it nullable "
                    "(without NOT NULL)"
                )
            names.append(name)
            fields.append(pa.field(field.name, ARROW_SCHEMA.field(name).type, field.nullable))
        if not names:
            raise ValueError(f"the schema names no column; the source's schema: {SCHEMA_DDL}")
        return cls(tuple(names), pa.schema(fields))


ALL_COLUMNS: Final = ReadColumns(tuple(ARROW_SCHEMA.names), ARROW_SCHEMA)

# Properties the broker and clients set for themselves; the `properties` column leaves them out
# (keys and tags have columns of their own).
SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
        "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY",
        "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "CLUSTER", "__STARTDELIVERTIME",
        "TIMER_DELIVER_MS", "TIMER_DELAY_MS", "TIMER_OUT_MS", "INSTANCE_ID",
    }
)  # fmt: skip


def check_writable(columns: Iterable[str]) -> None:
    """Refuses, at planning time, a DataFrame the sink cannot turn into messages."""
    names = set(columns)
    if "body" not in names:
        raise ValueError(
            "the pocketmq sink needs a 'body' column (binary or string); optional: keys, tags, "
            "properties (map<string,string>), topic"
        )


def to_messages(batch: pa.RecordBatch, default_topic: str | None) -> list[Message]:
    """The rows of one Arrow batch (with at least `body`) as messages, column by column."""
    count = batch.num_rows
    names = set(batch.schema.names)

    def column(name: str) -> list[Any]:
        return batch.column(name).to_pylist() if name in names else [None] * count

    topics, tags, keys, maps = column("topic"), column("tags"), column("keys"), column("properties")
    messages = []
    for body, topic, tag, key, pairs in zip(column("body"), topics, tags, keys, maps, strict=True):
        topic = topic or default_topic
        if not topic:
            raise ValueError("a row has no topic: give the sink a 'topic' option or column")
        if body is None:
            raise ValueError(f"a row for {topic} has a null body: filter or fill nulls first")
        messages.append(
            Message(
                topic=topic,
                body=body.encode() if isinstance(body, str) else body,
                tags=tag,
                keys=key,
                properties={str(k): str(v) for k, v in pairs} if pairs else {},
            )
        )
    return messages
