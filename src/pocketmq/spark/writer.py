"""Batch and streaming writes: rows become messages, sent from the tasks in batches.

The streaming sink publishes each micro-batch once even when Spark runs it again after a crash.
Every task sends its rows in chunks (`sink_chunks.py`), each chunk one batch request (stored
whole or not at all) to one queue chosen by the task's partition, each message tagged with its
task and a digest of its content. Before sending, a task skips the whole batch if the sink
recorded it as committed for this query, and otherwise the rows already stored by an earlier
attempt, found in any queue after the sink's last recorded positions (a queue added since the
crash included). The
commit records the batch id first, then the new positions (as the consumer offsets of groups
named after the sink), so a crash between the two can only make a later scan start earlier."""

from __future__ import annotations

import hashlib
import os
import time
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from pocketmq.client.aio import Message
from pocketmq.client.message import MessageQueue
from pocketmq.client.producer.wire import PreparedSend
from pocketmq.spark.batch_bodies import encode_rows
from pocketmq.spark.cluster import Cluster
from pocketmq.spark.offsets import parse_queue_key, queue_key
from pocketmq.spark.options import WriteOptions
from pocketmq.spark.rows import to_messages
from pocketmq.spark.sink_chunks import (
    CHUNK_BYTES,
    SINK_PROPERTY,
    plan_chunks,
    stored_digest,
    task_tag,
)

PAUSE_AFTER_COMMIT = "POCKETMQ_SPARK_SINK_PAUSE_AFTER_COMMIT"
"""Fault tests only: `<batchId>:<file>` makes the sink, once it committed that batch, create the
file and wait, so the test can kill the driver before Spark records the batch."""
PAUSE_AFTER_CHUNKS = "POCKETMQ_SPARK_SINK_PAUSE_AFTER_CHUNKS"
"""Fault tests only: `<batchId>:<chunks>:<file>` makes each task of that batch, once that many
of its chunks are stored, append a line to the file and wait until `<file>.resume` exists, so
the test can kill the driver or the broker with the batch partly written."""
IN_FLIGHT = 8
"""Batch sends a task keeps in flight: the broker stores one while the next travels."""
SEND_TIMEOUT_S = 120.0


@dataclass
class Sent(WriterCommitMessage):
    rows: int = 0
    ends: dict[str, int] = field(default_factory=dict)
    """Queue key -> the offset after what this task stored there."""
    query: str = ""
    """The streaming query's short id (`_query_tag`): tasks know it, the commit does not."""


def _messages(batches: Iterator[pa.RecordBatch], topic: str | None) -> Iterator[Message]:
    for batch in batches:
        yield from to_messages(batch, topic)


class _Sender:
    """Keeps up to `window` batch sends in flight and adds up what was stored where."""

    def __init__(self, cluster: Cluster, topic: str | None, window: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.window = window
        self.sent = Sent()
        self._flying: deque[tuple[int, Future[tuple[MessageQueue, int]]]] = deque()

    def send(self, messages: list[Message], queue: MessageQueue | None = None) -> None:
        self._track(len(messages), self.cluster.submit_send(messages, queue))

    def send_prepared(self, prepared: PreparedSend, queue: MessageQueue | None = None) -> None:
        self._track(len(prepared.msg_ids), self.cluster.submit_prepared(prepared, queue))

    def _track(self, rows: int, flying: Future[tuple[MessageQueue, int]]) -> None:
        self._flying.append((rows, flying))
        if len(self._flying) >= self.window:
            self._land_one()

    def finish(self) -> Sent:
        while self._flying:
            self._land_one()
        return self.sent

    def _land_one(self) -> None:
        rows, flying = self._flying.popleft()
        try:
            stored, end = flying.result(SEND_TIMEOUT_S)
        except Exception as exc:  # the task fails; Spark reports this message
            self._settle_rest()
            raise RuntimeError(
                f"pocketmq sink: sending {rows} rows to {self.topic or 'their topics'} failed: "
                f"{exc}. Check that the topic exists and the broker accepts writes "
                "(pocketmq admin topicRoute -t TOPIC)"
            ) from exc
        key = queue_key(stored)
        self.sent.rows += rows
        self.sent.ends[key] = max(end, self.sent.ends.get(key, 0))

    def _settle_rest(self) -> None:
        """Waits for the sends still in flight, whatever their outcome: a send that lands after
        the task failed would be missed by the scan of the task's next attempt, and sent twice."""
        while self._flying:
            _, flying = self._flying.popleft()
            try:
                flying.result(SEND_TIMEOUT_S)
            except Exception:  # noqa: BLE001  (the first failure is the one reported)
                continue


def _by_topic(chunk: list[Message]) -> dict[str, list[Message]]:
    grouped: dict[str, list[Message]] = {}
    for message in chunk:
        grouped.setdefault(message.topic, []).append(message)
    return grouped


class BatchWriter(DataSourceArrowWriter):
    """`df.write.format("pocketmq")`: at least once (a task Spark retries sends again)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Sent:
        cluster = Cluster.of(self.options.connection)
        topic = self.options.topic
        rows_max = self.options.batch_rows
        sender = _Sender(cluster, topic, IN_FLIGHT)
        ids = cluster.id_generator()
        for batch in iterator:
            sends = encode_rows(
                batch, topic, ids, time.time_ns() // 1_000_000, rows_max=rows_max,
                bytes_max=CHUNK_BYTES,
            )  # fmt: skip
            if sends is not None:
                for prepared in sends:
                    sender.send_prepared(prepared)
                continue
            # Rows the encoder leaves to messages: user properties, several topics, or
            # something to refuse, which this path words.
            messages = to_messages(batch, topic)
            for chunk in plan_chunks(messages, Counter(), rows_max=rows_max):
                for same_topic in _by_topic(chunk).values():
                    sender.send(same_topic)
        return sender.finish()


class StreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("pocketmq")`: each micro-batch published exactly once."""

    def __init__(self, options: WriteOptions) -> None:
        assert options.topic is not None
        assert options.sink_id is not None
        self.options = options
        self.topic: str = options.topic
        self.sink_id: str = options.sink_id
        self._scan: dict[str, tuple[int, int]] = self._anchor()
        """Queue key -> the range of offsets where an earlier attempt's rows can lie, as known
        before any task ran: from the sink's committed position to the queue's end."""

    def _anchor(self) -> dict[str, tuple[int, int]]:
        """Records where this sink begins in each queue it has no position for yet, and
        returns the ranges tasks read for rows an earlier attempt stored.

        Spark builds the writer before any task of a batch runs, so nothing of this sink lies
        before these offsets: the scan starts here instead of at the beginning of the topic,
        and ends where the queues ended then. Rows an attempt before a crash stored lie in
        these ranges; rows the running tasks send land after them, so a first attempt reads
        none of its siblings' rows."""
        cluster = Cluster.of(self.options.connection)
        scan: dict[str, tuple[int, int]] = {}
        fresh = {}
        for bound in cluster.bounds([self.topic]):
            position = cluster.consumer_offset(self._positions_group, bound.queue)
            if position is None:
                fresh[bound.queue] = position = bound.max_offset
            scan[queue_key(bound.queue)] = (max(position, bound.min_offset), bound.max_offset)
        if fresh:
            cluster.commit_offsets(self._positions_group, fresh)
        return scan

    @property
    def _positions_group(self) -> str:
        return f"spark-sink-{self.sink_id}"

    def _batches_group(self, query: str) -> str:
        return f"spark-sink-{self.sink_id}-{query}-batches"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Sent:
        context = TaskContext.get()
        assert context is not None, "write() runs in a Spark task"
        batch_id = int(context.getLocalProperty("streaming.sql.batchId") or "0")
        query = _query_tag(context.getLocalProperty("sql.streaming.queryId"))
        partition = context.partitionId()
        cluster = Cluster.of(self.options.connection)
        queues = sorted(b.queue for b in cluster.bounds([self.topic]))
        if not queues:
            raise RuntimeError(f"topic {self.topic} has no queues: create it first")
        marker = _committed_batches(cluster, self._batches_group(query), queues)
        if marker > batch_id:
            return Sent(query=query)  # Spark runs again a batch committed: published already
        queue = queues[partition % len(queues)]
        tag = task_tag(self.sink_id, query, batch_id, partition)
        stored = self._rows_stored(cluster, tag, retry=context.attemptNumber() > 0)
        sender = _Sender(cluster, self.topic, IN_FLIGHT)
        sender.sent.query = query
        pause = _ChunkPause(batch_id)
        if stored:  # a replay: every row is compared with what its earlier attempt stored
            self._send_messages(_messages(iterator, self.topic), stored, tag, queue, sender, pause)
            return sender.finish()
        ids = cluster.id_generator()
        for batch in iterator:
            # Rows naming a topic go the general way, which refuses any other than the sink's.
            sends = None
            if "topic" not in batch.schema.names:
                sends = encode_rows(
                    batch, self.topic, ids, time.time_ns() // 1_000_000,
                    rows_max=self.options.batch_rows, bytes_max=CHUNK_BYTES, sink_prefix=tag,
                )  # fmt: skip
            if sends is None:
                self._send_messages(
                    to_messages(batch, self.topic), stored, tag, queue, sender, pause
                )
                continue
            for prepared in sends:
                sender.send_prepared(prepared, queue)
                pause.after_chunk(sender)
        return sender.finish()

    def _send_messages(
        self,
        messages: Iterable[Message],
        stored: Counter[str],
        tag: str,
        queue: MessageQueue,
        sender: _Sender,
        pause: _ChunkPause,
    ) -> None:
        chunks = plan_chunks(messages, stored, rows_max=self.options.batch_rows, prefix=tag)
        for chunk in chunks:
            for message in chunk:
                if message.topic != self.topic:
                    raise ValueError(
                        f"the streaming sink writes to its topic option ({self.topic}); a row "
                        f"asks for {message.topic}"
                    )
            sender.send(chunk, queue)
            pause.after_chunk(sender)

    def _rows_stored(self, cluster: Cluster, tag: str, *, retry: bool) -> Counter[str]:
        """Digests of the rows of this task's batch an earlier attempt stored, in any queue (a
        replay may send to another queue than its first attempt: queues were added meanwhile).

        A first attempt reads the ranges planned with the writer (after a crash, they hold
        what the crashed run stored; otherwise they are empty). A retried task (`retry`) reads
        on to the queues' current ends, where its failed attempt's rows lie."""
        found: Counter[str] = Counter()
        for bound in cluster.bounds([self.topic]):
            planned = self._scan.get(queue_key(bound.queue))
            if planned is None or retry:  # a queue added since planning, or a task retried
                position = cluster.consumer_offset(self._positions_group, bound.queue)
                start = position if position is not None else bound.min_offset
                end = bound.max_offset
            else:
                start, end = planned
            start = max(start, bound.min_offset)
            if start >= end:
                continue
            for message in cluster.read(bound.queue, start, end, fail_on_data_loss=False):
                digest = stored_digest(message.properties.get(SINK_PROPERTY, ""), tag)
                if digest is not None:
                    found[digest] += 1
        return found

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        sent = [m for m in messages if isinstance(m, Sent)]
        if not sent:  # no task ran: nothing was published
            _pause_for_fault_test(batchId)
            return
        cluster = Cluster.of(self.options.connection)
        queues = sorted(b.queue for b in cluster.bounds([self.topic]))
        group = self._batches_group(sent[0].query)
        if _committed_batches(cluster, group, queues) <= batchId:  # never lowered
            cluster.commit_offsets(group, dict.fromkeys(queues, batchId + 1))
        ends: dict[str, int] = {}
        for message in sent:
            for key, end in message.ends.items():
                ends[key] = max(end, ends.get(key, 0))
        if ends:
            cluster.commit_offsets(
                self._positions_group, {parse_queue_key(k): v for k, v in ends.items()}
            )
        _pause_for_fault_test(batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Chunks already sent stay; the batch's next run finds them and does not resend."""


def _committed_batches(cluster: Cluster, group: str, queues: list[MessageQueue]) -> int:
    """How many batches the sink committed: kept on every queue of the topic, so it survives a
    broker that leaves or joins the route."""
    return max((cluster.consumer_offset(group, queue) or 0 for queue in queues), default=0)


def _query_tag(query_id: str | None) -> str:
    """A short, group-name-safe form of Spark's query id."""
    return hashlib.sha256((query_id or "").encode()).hexdigest()[:12]


class _ChunkPause:
    """The `PAUSE_AFTER_CHUNKS` fault hook (inert unless the variable names this batch)."""

    def __init__(self, batch_id: int) -> None:
        wanted, _, rest = os.environ.get(PAUSE_AFTER_CHUNKS, "").partition(":")
        chunks, _, self._path = rest.partition(":")
        self._after = int(chunks) if wanted and int(wanted) == batch_id and self._path else 0
        self._sent = 0

    def after_chunk(self, sender: _Sender) -> None:
        if not self._after:
            return
        self._sent += 1
        if self._sent == self._after:
            sender.finish()  # the chunks are stored
            with open(self._path, "a") as marker:
                marker.write(f"{self._sent}\n")
            resume = f"{self._path}.resume"
            for _ in range(6000):  # at most 10 minutes
                if os.path.exists(resume):
                    return
                time.sleep(0.1)


def _pause_for_fault_test(batch_id: int) -> None:
    setting = os.environ.get(PAUSE_AFTER_COMMIT, "")
    wanted, _, path = setting.partition(":")
    if wanted and path and int(wanted) == batch_id:
        with open(path, "w") as marker:
            marker.write(str(batch_id))
        time.sleep(600)
