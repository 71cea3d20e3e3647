"""The broker's offset requests to a consumer: rewind to a reset, report where you are.

A broker that resets a group's offsets (`mqadmin resetOffsetByTime`, `skipAccumulatedMessage`)
tells each online member with RESET_CONSUMER_CLIENT_OFFSET (220, oneway; header topic, group,
timestamp; body `ResetOffsetBody` `{"offsetTable": {<MessageQueue>: offset}}`, or for a CPP
admin `ResetOffsetBodyForC`, the same table as a list of `{topic, brokerName, queueId,
offset}`). The member drops what it holds of those queues and reads them again from the new
offsets, as RocketMQ's `MQClientInstance.resetOffset` does (without its 10 s pause: here the
queues' pulls and listener calls are stopped before the offsets change).

GET_CONSUMER_STATUS_FROM_CLIENT (221; header topic, group) asks for the member's offsets of a
topic; the answer is a `GetConsumerStatusBody` whose `messageQueueTable` holds them.

Decoding and encoding only; `ClientInstance` routes the requests to the group's consumer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol, TypeGuard, runtime_checkable

from pocketmq.client.message import MessageQueue
from pocketmq.common.fastjson import FastjsonError, parse_fastjson_any_keys


class OffsetResetError(ValueError):
    """A RESET_CONSUMER_CLIENT_OFFSET body that is not a reset table."""


@runtime_checkable
class ResettableConsumer(Protocol):
    """What a consumer offers the broker's offset requests (push and lite pull consumers)."""

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Drops held messages of the queues it reads among `offsets` and reads them again
        from there."""
        ...

    def offsets_of(self, topic: str) -> dict[MessageQueue, int]:
        """Its offsets of `topic`'s queues, as its offset store holds them."""
        ...


def decode_reset_offsets(body: bytes) -> dict[MessageQueue, int]:
    """The queues and offsets of a `ResetOffsetBody` (or `ResetOffsetBodyForC`).

    Raises:
        OffsetResetError: not JSON, or not a table of queues and offsets.
    """
    try:
        document = parse_fastjson_any_keys(body)
    except FastjsonError as exc:
        raise OffsetResetError(f"reset body is not JSON: {exc}") from None
    table = document.get("offsetTable") if isinstance(document, dict) else None
    offsets: dict[MessageQueue, int] = {}
    if isinstance(table, list):  # ResetOffsetBodyForC
        for row in table:
            queue = _queue(row) if isinstance(row, dict) else None
            offset = row.get("offset") if isinstance(row, dict) else None
            if queue is None or not _is_int(offset):
                raise OffsetResetError(f"bad reset entry {row!r}")
            offsets[queue] = offset
        return offsets
    if not isinstance(table, dict):
        raise OffsetResetError("reset body has no offsetTable")
    for key, offset in table.items():
        fields = _key_fields(key)
        queue = _queue(fields) if fields is not None else None
        if queue is None or not _is_int(offset):
            raise OffsetResetError(f"bad reset entry {key!r}: {offset!r}")
        offsets[queue] = offset
    return offsets


def encode_consumer_status(offsets: Mapping[MessageQueue, int]) -> bytes:
    """A `GetConsumerStatusBody` with `offsets` as its `messageQueueTable` (fastjson form)."""
    entries = [
        json.dumps(
            {"brokerName": q.broker_name, "queueId": q.queue_id, "topic": q.topic},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        + f":{offset}"
        for q, offset in sorted(offsets.items())
    ]
    return ('{"consumerTable":{},"messageQueueTable":{' + ",".join(entries) + "}}").encode()


def _key_fields(key: Any) -> dict[str, Any] | None:
    if isinstance(key, str):  # a standard-JSON writer quotes the object
        try:
            key = json.loads(key)
        except ValueError:
            return None
        return key if isinstance(key, dict) else None
    if isinstance(key, tuple) and all(isinstance(i, tuple) and len(i) == 2 for i in key):
        return {str(name): value for name, value in key}
    return None


def _queue(fields: Mapping[str, Any]) -> MessageQueue | None:
    topic, broker_name, queue_id = (fields.get(k) for k in ("topic", "brokerName", "queueId"))
    if not isinstance(topic, str) or not isinstance(broker_name, str) or not _is_int(queue_id):
        return None
    return MessageQueue(topic, broker_name, queue_id)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)
