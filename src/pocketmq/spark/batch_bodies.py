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

import array
import sys
from bisect import bisect_right
from collections.abc import Iterator
from itertools import accumulate, pairwise
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc

from pocketmq.client.message import UniqueIdGenerator
from pocketmq.client.producer.wire import PreparedSend, prepared_batch
from pocketmq.common.batch import ENTRY_OVERHEAD_BYTES, HEAD_BYTES, PROPERTIES_LENGTH_BYTES
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
_GROUP_BYTES: Final = 8 << 20
"""The entries of chunks holding up to this many body bytes are made at once: a few Arrow calls
for thousands of usual rows, and a copy of that size at most, however large the rows."""
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
    path (see the module docstring). The ids of all its rows are taken with the first chunk.

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
    tags, keys = columns
    sink = (
        _sink_values(topic, _views(body_column), tags, keys, sink_prefix) if sink_prefix else None
    )
    return _chunks(
        topic, body_column, lengths.to_pylist(), tags, keys, sink, ids, now_ms, rows_max,
        bytes_max, max_message_bytes,
    )  # fmt: skip


def _chunks(
    topic: str,
    bodies: pa.Array,
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
    # The ids are those that taking them chunk by chunk gives (one time, a counter).
    unique_ids = ids.next_many(now_ms, len(lengths))
    properties = _properties(unique_ids, tags, keys, sink)
    body_ends = [0, *accumulate(lengths)]  # body_ends[i]: the body bytes of the rows before i
    first = 0
    group: list[tuple[int, int]] = []
    for cut in _cuts(body_ends, rows_max, bytes_max):
        group.append(cut)
        last = cut[1]
        if body_ends[last] - body_ends[first] < _GROUP_BYTES and last < len(lengths):
            continue
        entries, ends = _entries(bodies.slice(first, last - first), properties[first:last])
        for start, stop in group:
            body = entries[ends[start - first] : ends[stop - first]].tobytes()
            yield prepared_batch(
                topic, body, unique_ids[start:stop], max_message_bytes=max_message_bytes
            )
        first, group = last, []


def _cuts(body_ends: list[int], rows_max: int, bytes_max: int) -> Iterator[tuple[int, int]]:
    """Where the chunks start and stop, as `sink_chunks.plan_chunks` cuts them: at most
    `rows_max` rows, and rows while their bodies stay within `bytes_max` (the first always)."""
    count = len(body_ends) - 1
    start = 0
    while start < count:
        fit = bisect_right(body_ends, body_ends[start] + bytes_max, start + 1) - 1
        stop = max(start + 1, min(fit, start + rows_max, count))
        yield start, stop
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


def _entries(bodies: pa.Array, properties: list[bytes]) -> tuple[memoryview, list[int]]:
    """The batch body of every row (`common.batch`'s layout: a head, the body, the properties'
    length and text), joined by Arrow, and where each entry ends (0 first).

    The heads' two numbers (the entry's size and the body's length, big-endian) are written
    into a table of fixed-width heads a byte column at a time, by slice steps: no Python
    operation a row."""
    count = len(bodies)
    body_type = pa.large_binary()
    bodies = bodies.cast(body_type)  # offsets widened, values shared
    texts = pa.array(properties, body_type)
    body_lengths = pc.binary_length(bodies)
    text_lengths = pc.binary_length(texts)
    sizes = pc.add(pc.add(body_lengths, text_lengths), ENTRY_OVERHEAD_BYTES)
    # TOTALSIZE first, BODYLEN last in each head; MAGICCODE, BODYCRC and FLAG stay 0.
    heads = bytearray(HEAD_BYTES * count)
    _put_big_endian(heads, HEAD_BYTES, 0, 4, sizes)
    _put_big_endian(heads, HEAD_BYTES, HEAD_BYTES - 4, 4, body_lengths)
    text_heads = bytearray(PROPERTIES_LENGTH_BYTES * count)
    _put_big_endian(text_heads, PROPERTIES_LENGTH_BYTES, 0, PROPERTIES_LENGTH_BYTES, text_lengths)
    joined = pc.binary_join_element_wise(
        _fixed_width(heads, HEAD_BYTES, count, body_type),
        bodies,
        _fixed_width(text_heads, PROPERTIES_LENGTH_BYTES, count, body_type),
        texts,
        pa.scalar(b"", body_type),  # no separator
    )
    ends = [0, *accumulate(sizes.to_pylist())]
    _, offsets, data = joined.buffers()
    first = memoryview(offsets).cast("q")[joined.offset]
    return memoryview(data)[first : first + ends[-1]], ends


def _put_big_endian(table: bytearray, stride: int, at: int, width: int, values: pa.Array) -> None:
    """Writes `values` (non-negative, none null) as `width`-byte (2 or 4) big-endian integers
    at `at` of each `stride`-byte row of `table`."""
    words = array.array("i" if width == 4 else "h")
    narrow = values.cast(pa.int32() if width == 4 else pa.int16())
    start = narrow.offset * width
    words.frombytes(memoryview(narrow.buffers()[1])[start : start + len(narrow) * width])
    if sys.byteorder == "little":
        words.byteswap()
    raw = words.tobytes()
    for k in range(width):
        table[at + k :: stride] = raw[k::width]


def _fixed_width(data: bytearray, width: int, count: int, kind: pa.DataType) -> pa.Array:
    """`data` as `count` values of `width` bytes each, of type `kind`."""
    return pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), count, [None, pa.py_buffer(data)]
    ).cast(kind)


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
