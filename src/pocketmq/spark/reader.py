"""Batch and streaming reads: one input partition per queue range, read in Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from pocketmq.client.message import MessageQueue
from pocketmq.spark.cluster import Cluster, QueueBounds
from pocketmq.spark.offsets import (
    StartSpec,
    admit,
    canonical,
    parse_queue_key,
    queue_key,
    resolve,
)
from pocketmq.spark.options import ReadOptions
from pocketmq.spark.rows import to_record_batch

ARROW_ROWS = 4096


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


def read_range(options: ReadOptions, part: QueueRange) -> Iterator[pa.RecordBatch]:
    cluster = Cluster.of(options.namesrv)
    queue = MessageQueue(part.topic, part.broker_name, part.queue_id)
    for first in range(part.start, part.end, ARROW_ROWS):
        messages = cluster.read(
            queue,
            first,
            min(part.end, first + ARROW_ROWS),
            fail_on_data_loss=options.fail_on_data_loss,
        )
        if messages:
            yield to_record_batch(messages, queue)


def _bounds(options: ReadOptions) -> list[QueueBounds]:
    cluster = Cluster.of(options.namesrv)
    return cluster.bounds(cluster.topics(options.topics, options.topic_pattern))


def _resolve(
    options: ReadOptions, spec: StartSpec, bounds: list[QueueBounds], *, unnamed: str
) -> dict[str, int]:
    return resolve(
        spec,
        [(b.queue, b.min_offset, b.max_offset) for b in bounds],
        Cluster.of(options.namesrv).offset_at,
        unnamed=unnamed,
    )


class BatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        bounds = _bounds(self.options)
        start = _resolve(self.options, self.options.starting, bounds, unnamed="earliest")
        end = _resolve(self.options, self.options.ending, bounds, unnamed="latest")
        ends = {key: max(end[key], start.get(key, 0)) for key in end}
        return split(start, ends, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())  # nothing planned: Spark still runs one task with its default
        return read_range(self.options, partition)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets live in Spark's checkpoint; this object only answers what the latest are.

    Spark keeps one instance of this class per query for offsets and builds others for the
    tasks: those see the options and the partition only."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self._target: dict[str, int] | None = None
        self._latest: dict[str, int] = {}

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
        latest = self._current()
        if self._target is not None:
            latest = {k: min(v, self._target.get(k, v)) for k, v in latest.items()}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        return admit(start, latest, max_rows)

    def reportLatestOffset(self) -> dict[str, int] | None:
        return self._latest or None

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        # A queue that appeared after `start` was planned is read from its beginning.
        return split(start, end, self.options.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):
            return iter(())  # nothing planned: Spark still runs one task with its default
        return read_range(self.options, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Spark finished the batches up to `end`: report it as the consumer group's progress
        (advisory: the checkpoint is what a restart reads)."""
        group = self.options.consumer_group
        if group:
            Cluster.of(self.options.namesrv).commit_offsets(
                group, {parse_queue_key(key): offset for key, offset in end.items()}
            )

    def stop(self) -> None:
        pass

    def _current(self) -> dict[str, int]:
        bounds = _bounds(self.options)
        self._latest = canonical({queue_key(b.queue): b.max_offset for b in bounds})
        return self._latest
