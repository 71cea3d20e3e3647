"""What a DLedger group writes into its Raft log: one entry per command.

- PUT: messages of one topic and queue as the put path staged them, with the store time and
  store host the leader chose, so every replica encodes the same CommitLog bytes, queue offsets
  and message ids when the entry commits.
- META: a JSON document of metadata changes (consumer offsets, topics, subscription groups,
  delay offsets), applied in log order on every replica.
- BARRIER: nothing; a new leader serves once its own barrier applied (then everything an
  earlier leader committed is in its CommitLog).

The first byte is the kind. Strings are UTF-8 with a length prefix; integers big-endian.
"""

from __future__ import annotations

import enum
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.common.stored_message import HostAddress
from pocketmq.store.api import MessageToStore


class Kind(enum.IntEnum):
    BARRIER = 0
    PUT = 1
    META = 2


class CommandError(ValueError):
    """An entry that does not decode (a different version, or damage)."""


_PUT_HEAD: Final = struct.Struct(">BqHI")  # kind, store time, store port, message count
_MESSAGE: Final = struct.Struct(">iiiqHiq")
# queue id, flag, sys flag, born time, born port, reconsume times, prepared transaction offset
_LEN: Final = struct.Struct(">I")
_SHORT: Final = struct.Struct(">H")


@dataclass(frozen=True, slots=True)
class PutCommand:
    messages: list[MessageToStore]
    store_timestamp: int
    store_host: HostAddress


BARRIER: Final = bytes([Kind.BARRIER])


def encode_put(
    messages: Sequence[MessageToStore], store_timestamp: int, store_host: HostAddress
) -> bytes:
    parts = [_PUT_HEAD.pack(Kind.PUT, store_timestamp, store_host[1], len(messages))]
    parts.append(_short_text(store_host[0]))
    for message in messages:
        parts.append(
            _MESSAGE.pack(
                message.queue_id,
                message.flag,
                message.sys_flag,
                message.born_timestamp,
                message.born_host[1],
                message.reconsume_times,
                message.prepared_transaction_offset,
            )
        )
        parts.append(_short_text(message.born_host[0]))
        parts.append(_short_text(message.topic))
        properties = message.properties.encode()
        parts.append(_LEN.pack(len(properties)))
        parts.append(properties)
        parts.append(_LEN.pack(len(message.body)))
        parts.append(message.body)
    return b"".join(parts)


def encode_meta(document: dict[str, Any]) -> bytes:
    return bytes([Kind.META]) + json.dumps(document, separators=(",", ":")).encode()


def kind_of(command: bytes) -> Kind | None:
    """The command's kind; None for the empty entry a new Raft leader appends."""
    if not command:
        return None
    try:
        return Kind(command[0])
    except ValueError:
        raise CommandError(f"unknown command kind {command[0]}") from None


def decode_meta(command: bytes) -> dict[str, Any]:
    try:
        document = json.loads(command[1:])
    except ValueError as exc:
        raise CommandError(f"a metadata command does not parse: {exc}") from None
    if not isinstance(document, dict):
        raise CommandError("a metadata command is not a JSON object")
    return document


def decode_put(command: bytes) -> PutCommand:
    view = memoryview(command)
    try:
        _, store_timestamp, store_port, count = _PUT_HEAD.unpack_from(view, 0)
        pos = _PUT_HEAD.size
        store_ip, pos = _read_short_text(view, pos)
        messages = []
        for _ in range(count):
            queue_id, flag, sys_flag, born_ts, born_port, reconsume, prepared = (
                _MESSAGE.unpack_from(view, pos)
            )
            pos += _MESSAGE.size
            born_ip, pos = _read_short_text(view, pos)
            topic, pos = _read_short_text(view, pos)
            properties, pos = _read_block(view, pos)
            body, pos = _read_block(view, pos)
            messages.append(
                MessageToStore(
                    topic=topic,
                    body=body,
                    properties=properties.decode(),
                    queue_id=queue_id,
                    flag=flag,
                    sys_flag=sys_flag,
                    born_timestamp=born_ts,
                    born_host=(born_ip, born_port),
                    reconsume_times=reconsume,
                    prepared_transaction_offset=prepared,
                )
            )
    except (struct.error, UnicodeDecodeError) as exc:
        raise CommandError(f"a put command does not decode: {exc}") from None
    if pos != len(view):
        raise CommandError(f"a put command has {len(view) - pos} trailing bytes")
    return PutCommand(messages, store_timestamp, (store_ip, store_port))


def _short_text(text: str) -> bytes:
    raw = text.encode()
    return _SHORT.pack(len(raw)) + raw


def _read_short_text(view: memoryview, pos: int) -> tuple[str, int]:
    (length,) = _SHORT.unpack_from(view, pos)
    pos += _SHORT.size
    _check(view, pos + length)
    return bytes(view[pos : pos + length]).decode(), pos + length


def _read_block(view: memoryview, pos: int) -> tuple[bytes, int]:
    (length,) = _LEN.unpack_from(view, pos)
    pos += _LEN.size
    _check(view, pos + length)
    return bytes(view[pos : pos + length]), pos + length


def _check(view: memoryview, end: int) -> None:
    if end > len(view):
        raise struct.error("a field runs past the end of the command")
