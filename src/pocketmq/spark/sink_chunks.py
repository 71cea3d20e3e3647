"""The streaming sink's chunks: how a task's rows are cut into batch sends, how each send is
tagged, and how a task run again skips exactly the rows an earlier attempt stored.

A chunk is the rows `[first, first + count)` of one task's input (its partition of one
micro-batch), sent as one batch request, which a broker stores whole or not at all. Every
message of it carries the property `SPARK_SINK` =
`<sinkId>/<query>/<batchId>/<partition>/<first>+<count>/<digest>`, where `<digest>` hashes the
chunk's messages. A new attempt of the task reads back the chunks stored for its
`<sinkId>/<query>/<batchId>/<partition>/` and cuts its own rows around them: a stored range is
skipped (after checking its digest against the rows it would send), only the gaps are sent. So
a replay publishes each row once even with another `batchSize`, wherever (in whichever queue) the
first attempt put its chunks.

What cannot hold is a replay that brings other rows, or the same rows in another order, into a
partition than the first attempt did: after a shuffle Spark does not promise the order within a
partition. The digests notice it, and the task fails with `ReplayMismatch` instead of publishing
some rows twice and others never.

Pure: no Spark, no network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

from pocketmq.client.message import Message

SINK_PROPERTY: Final = "SPARK_SINK"
CHUNK_BYTES: Final = 1 << 20


class ReplayMismatch(RuntimeError):
    """A task run again does not bring the rows its earlier attempt stored."""


@dataclass(frozen=True, slots=True)
class StoredChunk:
    """A chunk found in the topic: rows `[first, first + count)`, and their digest."""

    first: int
    count: int
    digest: str


def task_tag(sink_id: str, query: str, batch_id: int, partition: int) -> str:
    """The prefix of every chunk tag of one task."""
    return f"{sink_id}/{query}/{batch_id}/{partition}/"


def chunk_tag(prefix: str, first: int, messages: list[Message]) -> str:
    return f"{prefix}{first}+{len(messages)}/{chunk_digest(messages)}"


def parse_chunk_tag(value: str, prefix: str) -> StoredChunk | None:
    """The chunk a `SPARK_SINK` value names, if it belongs to the task of `prefix`."""
    if not value.startswith(prefix):
        return None
    span, _, digest = value[len(prefix) :].partition("/")
    first, plus, count = span.partition("+")
    if not (plus and first.isdigit() and count.isdigit() and digest):
        raise ReplayMismatch(
            f"a chunk of this batch ({value}) was written by an older version of the sink: "
            "finish the batch with that version, or start the query from a new checkpoint"
        )
    return StoredChunk(int(first), int(count), digest)


def chunk_digest(messages: Iterable[Message]) -> str:
    """A hash of what the messages carry (topic, body, tags, keys, user properties)."""
    digest = hashlib.blake2b(digest_size=8)
    for message in messages:
        keys = message.keys_text or ""
        properties = sorted((k, v) for k, v in message.properties.items() if k != SINK_PROPERTY)
        for part in (message.topic, message.tags or "", keys, repr(properties)):
            digest.update(part.encode())
            digest.update(b"\0")
        digest.update(len(message.body).to_bytes(8, "big"))
        digest.update(message.body)
    return digest.hexdigest()


def plan_chunks(
    messages: Iterable[Message],
    stored: dict[int, StoredChunk],
    *,
    rows_max: int,
    bytes_max: int = CHUNK_BYTES,
) -> Iterator[tuple[int, list[Message]]]:
    """The chunks still to send, as (first row, messages), skipping the stored ones.

    Args:
        messages: The task's rows as messages, in the task's order.
        stored: Chunks an earlier attempt stored, by first row.
        rows_max: At most this many rows a chunk (`batchSize`).
        bytes_max: At most this many body bytes a chunk (one row may exceed it alone).

    Raises:
        ReplayMismatch: a stored chunk's rows differ from this attempt's rows at its place, or
            this attempt has fewer rows than stored chunks cover.
    """
    starts = sorted(stored)
    pending: list[Message] = []
    pending_first = size = row = 0
    rows = iter(messages)
    for message in rows:
        if starts and row == starts[0]:
            if pending:
                yield pending_first, pending
                pending, size = [], 0
            chunk = stored[starts.pop(0)]
            group = [message, *_take(rows, chunk.count - 1)]
            if len(group) < chunk.count or chunk_digest(group) != chunk.digest:
                raise _mismatch(chunk)
            row += chunk.count
            continue
        if starts and starts[0] < row:
            raise _mismatch(stored[starts[0]])  # overlaps what this attempt already sent
        if pending and size + len(message.body) > bytes_max:
            yield pending_first, pending
            pending, size = [], 0
        if not pending:
            pending_first = row
        pending.append(message)
        size += len(message.body)
        row += 1
        if len(pending) >= rows_max or (starts and row == starts[0]):
            yield pending_first, pending
            pending, size = [], 0
    if pending:
        yield pending_first, pending
    if starts:
        raise _mismatch(stored[starts[0]])


def _take(rows: Iterator[Message], count: int) -> list[Message]:
    taken = []
    for _ in range(count):
        message = next(rows, None)
        if message is None:
            break
        taken.append(message)
    return taken


def _mismatch(chunk: StoredChunk) -> ReplayMismatch:
    return ReplayMismatch(
        f"pocketmq sink: this task, run again, does not bring the rows {chunk.first}.."
        f"{chunk.first + chunk.count - 1} its earlier attempt stored; publishing it would "
        "duplicate some rows and lose others. The rows reaching the sink must come in the "
        "same order on every run: after a shuffle (repartition, groupBy, join) sort within "
        "partitions on a unique key before the sink (df.sortWithinPartitions(...))"
    )
