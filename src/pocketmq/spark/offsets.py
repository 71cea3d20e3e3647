"""Offsets as the connector writes them into Spark's checkpoint, and the rules that turn the
user's options into them. Pure: no pyspark, no network.

An offset is a flat JSON object `{"<topic>/<brokerName>/<queueId>": <next offset>}` with keys
in sorted order: Spark compares offsets by their JSON text, so the same position must always
serialize the same way."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from pocketmq.client.message import MessageQueue

EARLIEST = -2
LATEST = -1


class OptionError(ValueError):
    """A connector option that cannot be used; the message says which and why."""


def queue_key(queue: MessageQueue) -> str:
    return f"{queue.topic}/{queue.broker_name}/{queue.queue_id}"


def parse_queue_key(key: str) -> MessageQueue:
    topic, broker, queue_id = key.rsplit("/", 2)
    return MessageQueue(topic, broker, int(queue_id))


def canonical(offsets: Mapping[str, int]) -> dict[str, int]:
    """The same mapping with keys in sorted order (json.dumps keeps insertion order)."""
    return {key: int(offsets[key]) for key in sorted(offsets)}


@dataclass(frozen=True, slots=True)
class StartSpec:
    """Where reading starts (or, for a batch, ends): `earliest`, `latest`, a timestamp, or
    explicit per-queue offsets (-2 earliest, -1 latest) with a default for queues not named."""

    kind: str
    timestamp_ms: int = 0
    per_queue: Mapping[str, int] | None = None


def parse_spec(option: str, value: str | None, default: str) -> StartSpec:
    text = (value or default).strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return StartSpec(lowered)
    if text.isdigit():
        return StartSpec("timestamp", timestamp_ms=int(text))
    try:
        decoded = json.loads(text)
    except ValueError:
        raise OptionError(
            f"{option}: {text!r} is not earliest, latest, a timestamp in ms, or JSON like "
            '{"orders": {"broker-a:0": 42}}'
        ) from None
    if not isinstance(decoded, dict):
        raise OptionError(f"{option}: the JSON must be an object of topics")
    per_queue: dict[str, int] = {}
    for topic, queues in decoded.items():
        if not isinstance(queues, dict):
            raise OptionError(f"{option}: {topic!r} must map 'broker:queueId' to an offset")
        for name, offset in queues.items():
            broker, sep, queue_id = str(name).rpartition(":")
            if not sep or not queue_id.isdigit() or not _is_offset(offset):
                raise OptionError(
                    f"{option}: {topic}/{name}={offset!r}: expected 'broker:queueId': offset, "
                    "the offset -2 (earliest), -1 (latest) or >= 0"
                )
            per_queue[f"{topic}/{broker}/{queue_id}"] = offset
    return StartSpec("json", per_queue=per_queue)


def _is_offset(value: object) -> bool:
    # JSON true/false decode to bool, a subclass of int: `true` is no offset.
    return isinstance(value, int) and not isinstance(value, bool) and value >= EARLIEST


def resolve(
    spec: StartSpec,
    queues: Iterable[tuple[MessageQueue, int, int]],
    offset_at: Callable[[MessageQueue, int], int],
    *,
    unnamed: str,
) -> dict[str, int]:
    """Turns a spec into offsets for each (queue, min, max); queues a JSON spec does not name
    take `unnamed` (earliest or latest)."""
    resolved: dict[str, int] = {}
    for queue, low, high in queues:
        key = queue_key(queue)
        kind, value = spec.kind, 0
        if kind == "json":
            assert spec.per_queue is not None
            value = spec.per_queue.get(key, EARLIEST if unnamed == "earliest" else LATEST)
            kind = "earliest" if value == EARLIEST else "latest" if value == LATEST else "at"
        if kind == "earliest":
            resolved[key] = low
        elif kind == "latest":
            resolved[key] = high
        elif kind == "timestamp":
            resolved[key] = min(max(offset_at(queue, spec.timestamp_ms), low), high)
        else:
            resolved[key] = value
    return canonical(resolved)


def admit(
    start: Mapping[str, int], latest: Mapping[str, int], max_rows: int | None
) -> dict[str, int]:
    """The end of the next micro-batch: everything up to `latest`, or at most `max_rows`
    messages shared fairly across the queues that have some (a queue never gets less than
    an equal share of what is left, if it has that much)."""
    end = {key: max(latest[key], start.get(key, 0)) for key in latest}
    for key, offset in start.items():  # a queue no longer listed keeps its position
        end.setdefault(key, offset)
    if max_rows is None:
        return canonical(end)
    available = {key: end[key] - start.get(key, 0) for key in end if end[key] > start.get(key, 0)}
    granted = dict.fromkeys(available, 0)
    budget = max_rows
    while budget > 0 and available:
        share = max(1, budget // len(available))
        for key in sorted(available):
            take = min(share, available[key], budget)
            granted[key] += take
            available[key] -= take
            budget -= take
            if budget == 0:
                break
        available = {k: v for k, v in available.items() if v > 0}
    admitted = {key: start.get(key, 0) + granted.get(key, 0) for key in end}
    for key in end:  # queues with nothing new keep their position
        admitted[key] = max(admitted[key], start.get(key, 0))
    return canonical(admitted)
