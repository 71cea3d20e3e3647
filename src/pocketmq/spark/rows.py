"""The connector's schema (reads) and rows to messages (writes)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from pocketmq.client.aio import Message

SCHEMA_DDL = (
    "body binary, keys string, tags string, topic string, brokerName string, queueId int, "
    "queueOffset long, msgId string, bornTimestamp timestamp, storeTimestamp timestamp, "
    "properties map<string,string>, reconsumeTimes int"
)
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
