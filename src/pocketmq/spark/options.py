"""The connector's options. Spark hands them over with lower-cased keys and string values."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from pocketmq.spark.offsets import OptionError, StartSpec, parse_spec


def _text(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    return value.strip() if value is not None and value.strip() else None


def _int(options: Mapping[str, str], name: str, default: int | None) -> int | None:
    value = _text(options, name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"{name}: {value!r} is not a whole number") from None
    if number <= 0:
        raise OptionError(f"{name}: must be positive, got {number}")
    return number


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = _text(options, name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise OptionError(f"{name}: {value!r} is not true or false")
    return value.lower() == "true"


@dataclass(frozen=True)
class Connection:
    """Where the cluster is and how to reach it: also the key that shares one client per
    process among a job's tasks."""

    namesrv: str
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: bool = False


def _connection(options: Mapping[str, str]) -> Connection:
    namesrv = _text(options, "namesrv")
    if namesrv is None:
        raise OptionError("namesrv: required, the NameServer address(es) as host:port[;host:port]")
    access_key, secret_key = _text(options, "accessKey"), _text(options, "secretKey")
    if (access_key is None) != (secret_key is None):
        raise OptionError("accessKey and secretKey: give both (an ACL account) or neither")
    return Connection(namesrv, access_key, secret_key, _bool(options, "tls", False))


@dataclass(frozen=True)
class ReadOptions:
    connection: Connection
    topics: list[str]
    topic_pattern: str | None
    starting: StartSpec
    ending: StartSpec
    max_messages_per_trigger: int | None
    max_records_per_partition: int
    fail_on_data_loss: bool
    consumer_group: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
        topics = [t.strip() for t in (_text(options, "topic") or "").split(",") if t.strip()]
        pattern = _text(options, "topicPattern")
        if bool(topics) == bool(pattern):
            raise OptionError("give exactly one of topic (a name or a comma list) and topicPattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise OptionError(
                    f"topicPattern: {pattern!r} is no regular expression: {exc}"
                ) from None
        if streaming and _text(options, "endingOffsets"):
            raise OptionError("endingOffsets: batch reads only (a stream has no end)")
        return cls(
            connection=_connection(options),
            topics=topics,
            topic_pattern=pattern,
            starting=parse_spec(
                "startingOffsets",
                _text(options, "startingOffsets"),
                "latest" if streaming else "earliest",
            ),
            ending=parse_spec("endingOffsets", _text(options, "endingOffsets"), "latest"),
            # Kafka's name works too: jobs moved from the Kafka source keep their rate limit.
            max_messages_per_trigger=_int(
                options, "maxMessagesPerTrigger", _int(options, "maxOffsetsPerTrigger", None)
            ),
            max_records_per_partition=_int(options, "maxRecordsPerPartition", 100_000) or 100_000,
            fail_on_data_loss=_bool(options, "failOnDataLoss", True),
            consumer_group=_text(options, "consumerGroup"),
        )


@dataclass(frozen=True)
class WriteOptions:
    connection: Connection
    topic: str | None
    sink_id: str | None
    batch_rows: int

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
        topic = _text(options, "topic")
        sink_id = _text(options, "sinkId")
        if sink_id is None and _text(options, "checkpointLocation"):
            location = _text(options, "checkpointLocation") or ""
            sink_id = hashlib.sha256(location.encode()).hexdigest()[:16]
        if streaming and (topic is None or sink_id is None):
            raise OptionError(
                "the streaming sink needs a topic option and a stable sinkId (or a "
                "checkpointLocation option): they identify what was already published"
            )
        if sink_id is not None and not all(c.isalnum() or c in "-_" for c in sink_id):
            raise OptionError(f"sinkId: {sink_id!r} may hold letters, digits, '-' and '_' only")
        return cls(
            connection=_connection(options),
            topic=topic,
            sink_id=sink_id,
            batch_rows=_int(options, "batchSize", 256) or 256,
        )
