"""The streaming sink's chunks: how a task's rows are cut into batch sends, how each message is
tagged, and how a task run again skips exactly the rows an earlier attempt stored.

Every message the sink sends carries the property `SPARK_SINK` =
`<sinkId>/<query>/<batchId>/<partition>/<digest>`, where `<digest>` hashes what the row carries
(topic, body, tags, keys, user properties). A new attempt of a task reads back the digests
stored for its `<sinkId>/<query>/<batchId>/<partition>/` (in every queue) and sends only its
rows beyond them, counting equal rows: a row that appears three times and was stored twice is
sent once more. The comparison is by content, so it holds whatever order the rows come in (after
a shuffle Spark does not keep the order within a partition) and whatever `batchSize` either
attempt used.

What cannot hold is a replay whose partition holds other rows than its first attempt stored
(rows placed in partitions by something that changes between runs: a random number, the
current time): the rows the first attempt stored would then be sent again by another
partition. A replay that lacks a row its first attempt stored is refused with `ReplayMismatch`
before it sends anything.

Pure: no Spark, no network.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Final

from pocketmq.client.message import Message

SINK_PROPERTY: Final = "SPARK_SINK"
CHUNK_BYTES: Final = 1 << 20


class ReplayMismatch(RuntimeError):
    """A task run again does not bring the rows its earlier attempt stored."""


def task_tag(sink_id: str, query: str, batch_id: int, partition: int) -> str:
    """The prefix of every `SPARK_SINK` value of one task."""
    return f"{sink_id}/{query}/{batch_id}/{partition}/"


def row_digest(message: Message) -> str:
    """A hash of what the row carries: topic, body, tags, keys and user properties."""
    properties = sorted((k, v) for k, v in message.properties.items() if k != SINK_PROPERTY)
    return content_digest(
        message.topic, message.tags or "", message.keys_text or "", repr(properties), message.body
    )


def content_digest(
    topic: str, tags: str, keys: str, properties: str, body: bytes | memoryview
) -> str:
    """`row_digest` from the row's parts (`properties`: the repr of its sorted user
    properties, `[]` for none), for encoders that hold no `Message`."""
    digest = hashlib.blake2b(f"{topic}\0{tags}\0{keys}\0{properties}\0".encode(), digest_size=10)
    digest.update(body)
    return digest.hexdigest()


def stored_digest(value: str, prefix: str) -> str | None:
    """The row digest a `SPARK_SINK` value carries, if it belongs to the task of `prefix`."""
    if not value.startswith(prefix):
        return None
    digest = value[len(prefix) :]
    if len(digest) != 20 or not digest.isalnum():
        raise ReplayMismatch(
            f"a row of this batch ({value}) was written by an older version of the sink: "
            "finish the batch with that version, or start the query from a new checkpoint"
        )
    return digest


def plan_chunks(
    messages: Iterable[Message],
    stored: Counter[str],
    *,
    rows_max: int,
    bytes_max: int = CHUNK_BYTES,
    prefix: str = "",
) -> Iterator[list[Message]]:
    """The chunks still to send, each message tagged with `prefix` and its digest (when a
    prefix is given), skipping the rows an earlier attempt stored.

    Without stored rows the messages stream through; with some, the task's rows are gathered
    first (a replay is rare), so that a mismatch is found before anything is sent.

    Args:
        messages: The task's rows as messages.
        stored: Digests an earlier attempt stored, with their counts.
        rows_max: At most this many rows a chunk (`batchSize`).
        bytes_max: At most this many body bytes a chunk (one row may exceed it alone).
        prefix: The task's tag prefix (`task_tag`); empty for batch writes, which tag nothing.

    Raises:
        ReplayMismatch: a row an earlier attempt stored is not among this attempt's rows.
    """
    rows: Iterable[tuple[Message, str]] = (
        (message, row_digest(message) if prefix else "") for message in messages
    )
    if stored:
        gathered = list(rows)
        missing = stored - Counter(digest for _, digest in gathered)
        if missing:
            raise ReplayMismatch(
                f"pocketmq sink: this task, run again, lacks {missing.total()} of the rows its "
                "earlier attempt stored; publishing it would send those rows twice (from "
                "another partition). The rows of a partition must be the same on every run of "
                "a micro-batch: partition by the rows' content, not by random numbers or time"
            )
        left = Counter(stored)
        rows = []
        for message, digest in gathered:
            if left[digest]:
                left[digest] -= 1
            else:
                rows.append((message, digest))
    chunk: list[Message] = []
    size = 0
    for message, digest in rows:
        if chunk and (len(chunk) >= rows_max or size + len(message.body) > bytes_max):
            yield chunk
            chunk, size = [], 0
        if prefix:
            message.properties[SINK_PROPERTY] = prefix + digest
        chunk.append(message)
        size += len(message.body)
    if chunk:
        yield chunk
