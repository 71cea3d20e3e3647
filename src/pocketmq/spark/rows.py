"""Messages to Arrow record batches (reads) and rows to messages (writes)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from pocketmq.client.aio import Message
from pocketmq.client.message import MessageQueue
from pocketmq.common.stored_message import StoredMessage

SCHEMA_DDL = (
    "body binary, keys string, tags string, topic string, brokerName string, queueId int, "
    "queueOffset long, msgId string, bornTimestamp timestamp, storeTimestamp timestamp, "
    "properties map<string,string>, reconsumeTimes int"
)
_TIMESTAMP = pa.timestamp("us", tz="UTC")
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
        ("bornTimestamp", _TIMESTAMP),
        ("storeTimestamp", _TIMESTAMP),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("reconsumeTimes", pa.int32()),
    ]
)
WRITABLE = {"body", "keys", "tags", "properties", "topic"}

# Properties the broker and clients set for themselves; the `properties` column leaves them out
# (keys and tags have columns of their own).
_SYSTEM_PROPERTIES = frozenset(
    {
        "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG",
        "PGROUP", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
        "CORRECTION_FLAG", "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY",
        "MAX_RECONSUME_TIMES", "CONSUME_START_TIME", "CLUSTER", "__STARTDELIVERTIME",
        "TIMER_DELIVER_MS", "TIMER_DELAY_MS", "TIMER_OUT_MS", "INSTANCE_ID",
    }
)  # fmt: skip


def to_record_batch(messages: Sequence[StoredMessage], queue: MessageQueue) -> pa.RecordBatch:
    """One Arrow batch with the connector's schema; columns are built whole, not row by row."""
    count = len(messages)
    properties = [m.properties for m in messages]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.body for m in messages], pa.binary()),
            pa.array([p.get("KEYS") for p in properties], pa.string()),
            pa.array([p.get("TAGS") for p in properties], pa.string()),
            pa.array([queue.topic] * count, pa.string()),
            pa.array([queue.broker_name] * count, pa.string()),
            pa.array([queue.queue_id] * count, pa.int32()),
            pa.array([m.queue_offset for m in messages], pa.int64()),
            pa.array([p.get("UNIQ_KEY") for p in properties], pa.string()),
            pa.array([m.born_timestamp * 1000 for m in messages], _TIMESTAMP),
            pa.array([m.store_timestamp * 1000 for m in messages], _TIMESTAMP),
            pa.array(
                [[(k, v) for k, v in p.items() if k not in _SYSTEM_PROPERTIES] for p in properties],
                pa.map_(pa.string(), pa.string()),
            ),
            pa.array([m.reconsume_times for m in messages], pa.int32()),
        ],
        schema=ARROW_SCHEMA,
    )


def check_writable(columns: Iterable[str]) -> None:
    """Refuses, at planning time, a DataFrame the sink cannot turn into messages."""
    names = set(columns)
    if "body" not in names:
        raise ValueError(
            "the pocketmq sink needs a 'body' column (binary or string); optional: keys, tags, "
            "properties (map<string,string>), topic"
        )


def to_messages(
    rows: Iterable[Any], default_topic: str | None, extra: dict[str, str]
) -> Iterator[Message]:
    """Spark rows (with at least `body`) as messages; `extra` properties are added to each."""
    for row in rows:
        fields = row.asDict() if hasattr(row, "asDict") else dict(row)
        topic = fields.get("topic") or default_topic
        if not topic:
            raise ValueError("a row has no topic: give the sink a 'topic' option or column")
        body = fields["body"]
        if body is None:
            raise ValueError(f"a row for {topic} has a null body")
        if isinstance(body, str):
            body = body.encode()
        given = fields.get("properties") or {}
        pairs = given.items() if isinstance(given, dict) else given  # Arrow maps: (key, value)s
        properties = {str(k): str(v) for k, v in pairs}
        properties.update(extra)
        yield Message(
            topic=topic,
            body=bytes(body),
            tags=fields.get("tags"),
            keys=fields.get("keys"),
            properties=properties,
        )
