"""The Spark sink's usual rows, encoded from their Arrow columns straight into batch sends.

A row becomes a batch entry (`pocketmq.common.batch`) whose properties are its TAGS, its KEYS
and a new UNIQ_KEY, in the order `Message.encode_properties` gives them: the bytes sent are
those `rows.to_messages` and `prepare_batch` would send, with no `Message` a row. Only rows
every check passes on go this way; `encode_rows` answers None for an Arrow batch with anything
else (a null or empty body, a body over a chunk, no topic or several, user properties, a
separator character or an oversized text in tags or keys), and the writer sends that batch
the general way, which words each error as before.

Chunks are cut as `sink_chunks.plan_chunks` cuts them (rows and body bytes), within one Arrow
batch; a chunk of one row is a batch of one too. For the streaming sink each row also carries
its `SPARK_SINK` tag, as `plan_chunks` sets it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from itertools import pairwise
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from pocketmq.client.message import UniqueIdGenerator
from pocketmq.client.producer.wire import PreparedSend, prepared_batch
from pocketmq.common.batch import ENTRY_OVERHEAD_BYTES
from pocketmq.common.constants import (
    MAX_MESSAGE_SIZE_DEFAULT,
    MAX_PROPERTIES_LENGTH,
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.topic_names import TopicError, validate_topic_name
from pocketmq.spark.sink_chunks import SINK_PROPERTY, content_digest

_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE, MAGICCODE, BODYCRC, FLAG, BODYLEN
_TAGS: Final = PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_KEYS: Final = PROPERTY_KEYS + NAME_VALUE_SEPARATOR
_UNIQ_KEY: Final = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR
_END: Final = PROPERTY_SEPARATOR
_SINK: Final = SINK_PROPERTY + NAME_VALUE_SEPARATOR
_ID_BYTES: Final = 32
_SINK_BYTES: Final = len(_SINK) + 20 + len(_END)
"""The sink's property past its task tag: its name, the row's 20-character digest, the end."""
_TEXT_BYTES_MAX: Final = MAX_PROPERTIES_LENGTH - 64 - _ID_BYTES
"""Tags and keys together at most this long (UTF-8) keep an entry's properties in bounds."""
_BINARY_TYPES: Final = (pa.binary(), pa.large_binary(), pa.string(), pa.large_string())
_TEXT_TYPES: Final = (pa.string(), pa.large_string())


def encode_rows(
    batch: pa.RecordBatch,
    default_topic: str | None,
    ids: UniqueIdGenerator,
    now_ms: int,
    *,
    rows_max: int,
    bytes_max: int,
    max_message_bytes: int = MAX_MESSAGE_SIZE_DEFAULT,
    sink_prefix: str = "",
) -> Iterator[PreparedSend] | None:
    """The batch sends of `batch`'s rows, chunk by chunk; None when a row needs the general
    path (see the module docstring). Ids are taken as each chunk is encoded.

    Args:
        batch: Rows with a `body` column, and maybe `topic`, `tags`, `keys`, `properties`.
        default_topic: The sink's topic option, for rows without a topic column.
        ids: Where the rows' UNIQ_KEYs come from.
        now_ms: The time the ids carry.
        rows_max: At most this many rows a chunk (`batchSize`).
        bytes_max: At most this many body bytes a chunk (`sink_chunks.CHUNK_BYTES`).
        max_message_bytes: The largest request body the broker takes.
        sink_prefix: The streaming sink's task tag (`sink_chunks.task_tag`): each row then
            carries `SPARK_SINK` = the tag and the row's digest, as `plan_chunks` tags it.
    """
    names = batch.schema.names
    topic = _one_topic(batch, default_topic)
    if topic is None or batch.num_rows == 0 or _holds_separator_text(sink_prefix):
        return None
    body_column = batch.column("body")
    if body_column.type not in _BINARY_TYPES or body_column.null_count:
        return None
    lengths = pc.binary_length(body_column)
    shortest, longest = pc.min_max(lengths).values()
    if shortest.as_py() < 1 or longest.as_py() > min(bytes_max, max_message_bytes):
        return None
    if "properties" in names and _has_entries(batch.column("properties")):
        return None
    texts_bytes = len(sink_prefix.encode()) + _SINK_BYTES if sink_prefix else 0
    columns: list[list[str | None] | None] = []
    for name in ("tags", "keys"):
        if name not in names:
            columns.append(None)
            continue
        column = batch.column(name)
        if column.null_count == len(column):
            columns.append(None)
            continue
        if column.type not in _TEXT_TYPES or _holds_separator(column):
            return None
        texts_bytes += pc.max(pc.binary_length(column)).as_py() or 0
        columns.append(column.to_pylist())
    if texts_bytes > _TEXT_BYTES_MAX:
        return None
    bodies = _views(body_column)
    tags, keys = columns
    sink = _sink_values(topic, bodies, tags, keys, sink_prefix) if sink_prefix else None
    return _chunks(
        topic, bodies, lengths.to_pylist(), tags, keys, sink, ids, now_ms, rows_max, bytes_max,
        max_message_bytes,
    )  # fmt: skip


def _chunks(
    topic: str,
    bodies: list[memoryview],
    lengths: list[int],
    tags: list[str | None] | None,
    keys: list[str | None] | None,
    sink: list[str] | None,
    ids: UniqueIdGenerator,
    now_ms: int,
    rows_max: int,
    bytes_max: int,
    max_message_bytes: int,
) -> Iterator[PreparedSend]:
    start = 0
    count = len(bodies)
    while start < count:
        stop = start + 1
        size = lengths[start]
        limit = min(count, start + rows_max)
        while stop < limit and size + lengths[stop] <= bytes_max:
            size += lengths[stop]
            stop += 1
        unique_ids = ids.next_many(now_ms, stop - start)
        properties = _properties(
            unique_ids,
            tags[start:stop] if tags is not None else None,
            keys[start:stop] if keys is not None else None,
            sink[start:stop] if sink is not None else None,
        )
        body = _body(bodies[start:stop], properties)
        yield prepared_batch(topic, body, unique_ids, max_message_bytes=max_message_bytes)
        start = stop


def _properties(
    unique_ids: list[str],
    tags: list[str | None] | None,
    keys: list[str | None] | None,
    sink: list[str] | None,
) -> list[bytes]:
    """Each row's properties string, as `Message.encode_properties` makes it (an empty text
    sets nothing, as None does; the sink's property comes last, as user properties do)."""
    if tags is None and keys is None and sink is None:
        return [f"{_UNIQ_KEY}{u}{_END}".encode() for u in unique_ids]
    if tags is None and sink is None:
        assert keys is not None
        return [
            (f"{_KEYS}{k}{_END}{_UNIQ_KEY}{u}{_END}" if k else f"{_UNIQ_KEY}{u}{_END}").encode()
            for k, u in zip(keys, unique_ids, strict=True)
        ]
    none: list[str | None] = [None] * len(unique_ids)
    return [
        (
            (f"{_TAGS}{t}{_END}" if t else "")
            + (f"{_KEYS}{k}{_END}" if k else "")
            + f"{_UNIQ_KEY}{u}{_END}"
            + (f"{_SINK}{v}{_END}" if v else "")
        ).encode()
        for t, k, u, v in zip(tags or none, keys or none, unique_ids, sink or none, strict=True)
    ]


def _body(bodies: list[memoryview], properties: list[bytes]) -> bytes:
    parts: list[bytes | memoryview] = []
    add = parts.append
    pack_head = _HEAD.pack
    for body, encoded in zip(bodies, properties, strict=True):
        add(pack_head(ENTRY_OVERHEAD_BYTES + len(body) + len(encoded), 0, 0, 0, len(body)))
        add(body)
        add(len(encoded).to_bytes(2, "big") + encoded)
    return b"".join(parts)


def _views(column: pa.Array) -> list[memoryview]:
    """Each value of a binary or string column without nulls, as a view of Arrow's buffer (no
    copy: the batch body is where each is copied)."""
    _, offsets_buffer, data = column.buffers()
    wide = pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)
    first = column.offset
    offsets = memoryview(offsets_buffer).cast("q" if wide else "i")[first : first + len(column) + 1]
    view = memoryview(data)
    return [view[start:end] for start, end in pairwise(offsets.tolist())]


def _sink_values(
    topic: str,
    bodies: list[memoryview],
    tags: list[str | None] | None,
    keys: list[str | None] | None,
    prefix: str,
) -> list[str]:
    """Each row's `SPARK_SINK` value: the task's tag and the row's digest (no user
    properties: rows with some take the general path)."""
    no_texts: list[str | None] = [None] * len(bodies)
    return [
        prefix + content_digest(topic, t or "", k or "", "[]", body)
        for body, t, k in zip(bodies, tags or no_texts, keys or no_texts, strict=True)
    ]


def _one_topic(batch: pa.RecordBatch, default_topic: str | None) -> str | None:
    """The topic every row goes to, when it is one valid topic; else None."""
    topic = default_topic
    if "topic" in batch.schema.names:
        column = batch.column("topic")
        if column.null_count:
            if column.null_count < len(column):
                return None  # some rows name a topic, others take the default
        elif column.type in _TEXT_TYPES:
            distinct = pc.unique(column)
            if len(distinct) != 1:
                return None
            topic = distinct[0].as_py() or default_topic
        else:
            return None
    if not topic:
        return None
    try:
        validate_topic_name(topic)
    except TopicError:
        return None
    return topic


def _has_entries(column: pa.Array | pa.ChunkedArray) -> bool:
    if column.null_count == len(column):
        return False
    if not pa.types.is_map(column.type):
        return True
    offsets = column.offsets  # of this slice; a null row spanning entries counts as entries
    return bool(offsets[-1].as_py() != offsets[0].as_py())


def _holds_separator_text(text: str) -> bool:
    return NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text


def _holds_separator(column: pa.Array | pa.ChunkedArray) -> bool:
    return any(
        pc.any(pc.match_substring(column, separator)).as_py()
        for separator in (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)
    )
