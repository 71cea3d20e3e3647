"""Pure readers of admin answers: ext-field integers, `KVTable` bodies, the `offsetTable` maps
of `TopicStatsTable` / `ConsumeStats` (keyed by `MessageQueue` objects in fastjson's object-key
form), and stored-message bodies.

Statistics rows are read leniently (a missing or odd number is 0, as a Java client's default),
because a broker version may leave fields out; the structure around them is not: a body
without its table, or a queue key that is not a `MessageQueue`, raises `AdminError` naming the
broker.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pocketmq.client.admin.errors import AdminError
from pocketmq.client.message import MessageQueue
from pocketmq.common.fastjson import FastjsonError, freeze_key, parse_fastjson_any_keys
from pocketmq.common.stored_message import MessageDecodeError, StoredMessage, decode_records
from pocketmq.remoting.command import RemotingCommand


def ext_int(response: RemotingCommand, name: str, address: str, default: int | None = None) -> int:
    """The integer ext field `name` of a broker's answer (`default` when absent).

    Raises:
        AdminError: absent without a default, or not an integer.
    """
    value = response.ext_fields.get(name)
    if value is None and default is not None:
        return default
    try:
        return int(value or "")
    except ValueError:
        raise AdminError(f"broker {address} answered a bad {name}: {value!r}") from None


def json_int(value: object) -> int:
    """A statistics number as an int; 0 for anything that is not one."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return 0
    return 0


def json_float(value: object) -> float:
    """A rate (`topicPutTps`, `consumeTps`) as a float; 0.0 for anything that is not one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 0.0


def decode_messages(body: bytes, address: str) -> list[StoredMessage]:
    """The stored messages of a pull, query or view answer.

    Raises:
        AdminError: the records do not decode.
    """
    try:
        return decode_records(body)
    except MessageDecodeError as exc:
        raise AdminError(f"broker {address} sent messages that do not decode: {exc}") from None


def decode_kv_table(body: bytes, address: str) -> dict[str, str]:
    """A `KVTable` body (`{"table": {...}}`) as strings.

    Raises:
        AdminError: not JSON, or no table.
    """
    try:
        document = parse_fastjson_any_keys(body)
    except FastjsonError as exc:
        raise AdminError(f"broker {address} sent a bad KVTable: {exc}") from None
    table = document.get("table") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        raise AdminError(f"broker {address} sent a KVTable without a table")
    return {str(k): str(v) for k, v in table.items()}


@dataclass(slots=True)
class OffsetTable:
    """A decoded `Map<MessageQueue, row>` body, and its other top-level fields."""

    rows: dict[MessageQueue, dict[str, Any]]
    extra: dict[str, Any]

    def items(self) -> Iterable[tuple[MessageQueue, dict[str, Any]]]:
        return self.rows.items()


def decode_offset_table(body: bytes, what: str, address: str) -> OffsetTable:
    """Reads `{"offsetTable": {<MessageQueue>: {...}}, ...}` in fastjson's object-key form.

    Raises:
        AdminError: not JSON, no offsetTable, or a key that is not a `MessageQueue`.
    """
    try:
        document = parse_fastjson_any_keys(body)
    except FastjsonError as exc:
        raise AdminError(f"broker {address} sent a bad {what}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("offsetTable"), dict):
        raise AdminError(f"broker {address} sent a {what} without an offsetTable")
    rows: dict[MessageQueue, dict[str, Any]] = {}
    for key, row in document["offsetTable"].items():
        queue = _message_queue(key)
        if queue is None or not isinstance(row, dict):
            raise AdminError(f"broker {address} sent a {what} with a bad queue key {key!r}")
        rows[queue] = row
    extra = {k: v for k, v in document.items() if k != "offsetTable"}
    return OffsetTable(rows, extra)


def _message_queue(key: Any) -> MessageQueue | None:
    if isinstance(key, str):  # a standard-JSON writer may send the key as an object string
        try:
            key = freeze_key(json.loads(key))
        except ValueError:
            return None
    if not isinstance(key, tuple):
        return None
    fields: dict[str, Any] = {}
    for item in key:
        if not (isinstance(item, tuple) and len(item) == 2):
            return None
        fields[str(item[0])] = item[1]
    topic, broker_name, queue_id = (fields.get(k) for k in ("topic", "brokerName", "queueId"))
    if not isinstance(topic, str) or not isinstance(broker_name, str):
        return None
    if not isinstance(queue_id, int) or isinstance(queue_id, bool):
        return None
    return MessageQueue(topic, broker_name, queue_id)
