"""The connector's columns (reads), apart from Arrow and the client: Spark imports the data
source in every planning worker, and `schema()` needs only this."""

from __future__ import annotations

from typing import Final

from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    TimestampType,
)

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
"""The columns read from the messages' properties; a read of none of them skips the properties."""
SCHEMA_DDL: Final = ", ".join(f"{name} {t.simpleString()}" for name, t in COLUMN_TYPES.items())
