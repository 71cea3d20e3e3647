"""Batch and streaming reads: one input partition per queue range, read in Arrow batches."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from pocketmq.client.admin import AdminError
from pocketmq.client.message import MessageQueue
from pocketmq.spark.cluster import Cluster, QueueBounds
from pocketmq.spark.fetch import DataLossError
from pocketmq.spark.offsets import (
    StartSpec,
    admit,
    canonical,
    parse_queue_key,
    queue_key,
    resolve,
)
from pocketmq.spark.options import ReadOptions
from pocketmq.spark.records import to_record_batch
from pocketmq.spark.rows import ALL_COLUMNS, ReadColumns

log = logging.getLogger(__name__)

ARROW_ROWS = 4096
READ_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Offsets [start, end) of one queue: what one Spark task reads."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int


def split(start: dict[str, int], end: dict[str, int], max_rows: int) -> list[InputPartition]:
    ranges: list[InputPartition] = []
    for key in sorted(end):
        queue = parse_queue_key(key)
        low, high = start.get(key, 0), end[key]
        ranges.extend(
            QueueRange(
                queue.topic, queue.broker_name, queue.queue_id, first, min(high, first + max_rows)
            )
            for first in range(low, high, max_rows)
        )
    return ranges


def read_range(
    options: ReadOptions, part: QueueRange, columns: ReadColumns = ALL_COLUMNS
) -> Iterator[pa.RecordBatch]:
    """The partition's messages in batches of `ARROW_ROWS` with `columns`; the next batch's
    pulls are in flight while this one is decoded."""
    cluster = Cluster.of(options.connection)
    queue = MessageQueue(part.topic, part.broker_name, part.queue_id)
    spans = [
        (low, min(part.end, low + ARROW_ROWS)) for low in range(part.start, part.end, ARROW_ROWS)
    ]

    def submit(span: tuple[int, int]) -> Future[list[bytes]]:
        return cluster.submit_read(queue, *span, fail_on_data_loss=options.fail_on_data_loss)

    ahead = submit(spans[0]) if spans else None
    for index, span in enumerate(spans):
        assert ahead is not None
        pulls = ahead.result(READ_TIMEOUT_S)
        ahead = submit(spans[index + 1]) if index + 1 < len(spans) else None
        batch = to_record_batch(pulls, queue, *span, read=columns)
        if batch.num_rows:
            yield batch


def _bounds(options: ReadOptions) -> list[QueueBounds]:
    """The queues of the subscribed topics with their bounds; cheap enough for `latestOffset`
    (routes and the pattern's topic list are cached by `Cluster`)."""
    cluster = Cluster.of(options.connection)
    return cluster.bounds(
        cluster.topics(options.topics, options.topic_pattern),
        skip_missing=options.topic_pattern is not None,
    )


def _resolve(
    options: ReadOptions, spec: StartSpec, bounds: list[QueueBounds], *, unnamed: str
) -> dict[str, int]:
    return resolve(
        spec,
        [(b.queue, b.min_offset, b.max_offset) for b in bounds],
        Cluster.of(options.connection).offset_at,
        unnamed=unnamed,
    )


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, columns: ReadColumns = ALL_COLUMNS) -> None:
        self.options = options
        self.columns = columns

    def partitions(self) -> Sequence[InputPartition]:
        bounds = _bounds(self.options)
        start = _resolve(self.options, self.options.starting, bounds, unnamed="earliest")
        end = _resolve(self.options, self.options.ending, bounds, unnamed="latest")
        ends = {key: max(end[key], start.get(key, 0)) for key in end}
        return split(start, ends, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())  # nothing planned: Spark still runs one task with its default
        return read_range(self.options, partition, self.columns)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets live in Spark's checkpoint; this object only answers what the latest are.

    Spark keeps one instance of this class per query for offsets and builds others for the
    tasks: those see the options and the partition only.

    `latestOffset` runs 50 to 90 times a second on an idle query: it costs one stats request
    per broker and topic (see `Cluster.bounds`) and nothing else unless its `start` moved."""

    def __init__(self, options: ReadOptions, columns: ReadColumns = ALL_COLUMNS) -> None:
        self.options = options
        self.columns = columns
        self._target: dict[str, int] | None = None
        self._latest: dict[str, int] = {}
        self._reported: dict[str, int] | None = None
        self._earliest: dict[str, int] = {}

    def initialOffset(self) -> dict[str, int]:
        # Queues a JSON start does not name begin at the latest, as Kafka's source does.
        return _resolve(
            self.options, self.options.starting, _bounds(self.options), unnamed="latest"
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_messages_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._current()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        # Spark plans a batch only once the one before it is in the sink and in its commit log,
        # so everything before `start` is done; its own commit(end) comes a batch later.
        self._report_progress(start)
        latest = self._current()
        if self._target is not None:
            # AvailableNow reads what was there when it started: a queue that appeared since
            # waits for the next run, or a producer writing into it would keep the run going.
            latest = {k: min(v, self._target.get(k, start.get(k, 0))) for k, v in latest.items()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return self._restarted_queues(start, admit(start, latest, max_rows))

    def reportLatestOffset(self) -> dict[str, int] | None:
        return self._latest or None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        # A queue that appeared after `start` was planned is read from its first offset still
        # stored (a topic a pattern finds may be old), as Kafka's source reads new partitions.
        new = [key for key in end if key not in start]
        if new and any(key not in self._earliest for key in new):
            self._current()
        first = {key: min(self._earliest.get(key, 0), end[key]) for key in new}
        return split({**first, **start}, end, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())  # nothing planned: Spark still runs one task with its default
        return read_range(self.options, partition, self.columns)

    def commit(self, end: dict[str, int]) -> None:
        """Spark finished the batches up to `end` (reported already by `latestOffset`, which
        Spark calls first with `end` as its start)."""
        self._report_progress(end)

    def _report_progress(self, done: dict[str, int]) -> None:
        """Commits `done` as the consumerGroup's offsets, once per position. Advisory, for
        `consumerProgress` and lag monitors: a restart reads Spark's checkpoint, so a failed
        commit only logs (and is tried again at the next position)."""
        group = self.options.consumer_group
        if not group or done == self._reported:
            return
        self._reported = dict(done)
        try:
            Cluster.of(self.options.connection).commit_offsets(
                group, {parse_queue_key(key): offset for key, offset in done.items()}
            )
        except (AdminError, RuntimeError) as exc:
            log.warning("consumerGroup %s: progress not committed: %s", group, exc)

    def stop(self) -> None:
        pass

    def _current(self) -> dict[str, int]:
        bounds = _bounds(self.options)
        self._latest = canonical({queue_key(b.queue): b.max_offset for b in bounds})
        self._earliest = {queue_key(b.queue): b.min_offset for b in bounds}
        return self._latest

    def _restarted_queues(self, start: dict[str, int], end: dict[str, int]) -> dict[str, int]:
        """A queue that now ends before the query's position was emptied (its topic deleted and
        created again): an error, or with failOnDataLoss=false read again from its beginning
        (the batch ends there for that queue, the next one starts there)."""
        behind = {k: v for k, v in self._latest.items() if v < start.get(k, 0)}
        if not behind:
            return end
        named = ", ".join(f"{k} at {behind[k]} (query at {start[k]})" for k in sorted(behind))
        if self.options.fail_on_data_loss:
            raise DataLossError(
                f"queues went back: {named}. Was the topic deleted and created again? Restart "
                "from a new checkpoint, or set failOnDataLoss=false to read them from their "
                "beginning"
            )
        log.warning("queues went back, reading them from their beginning: %s", named)
        return canonical({**end, **{k: self._earliest.get(k, 0) for k in behind}})
