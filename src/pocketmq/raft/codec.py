"""Raft messages as bytes, for the remoting transport: several messages per frame body."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from pocketmq.raft.messages import Entry, EntryKind, Message, MessageType, Snapshot

_HEAD = struct.Struct(
    ">BIIQQQQBQQHI"
)  # type src dst term index log_term commit reject hint hint_term ctx n
_ENTRY = struct.Struct(">QQBI")
_SNAP = struct.Struct(">QQI")
_LENGTH = struct.Struct(">I")


class RaftCodecError(ValueError):
    """The peer sent bytes that are not a Raft message."""


def encode_messages(messages: Iterable[Message]) -> bytes:
    parts: list[bytes] = []
    for message in messages:
        body = _encode(message)
        parts.append(_LENGTH.pack(len(body)))
        parts.append(body)
    return b"".join(parts)


def decode_messages(data: bytes) -> list[Message]:
    view = memoryview(data)
    offset, messages = 0, []
    while offset < len(view):
        if len(view) - offset < _LENGTH.size:
            raise RaftCodecError("truncated length prefix")
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        if length > len(view) - offset:
            raise RaftCodecError(f"message of {length} bytes, {len(view) - offset} left")
        messages.append(_decode(view[offset : offset + length]))
        offset += length
    return messages


def _encode(m: Message) -> bytes:
    parts = [
        _HEAD.pack(
            m.type,
            m.src,
            m.dst,
            m.term,
            m.index,
            m.log_term,
            m.commit,
            m.reject,
            m.reject_hint,
            m.hint_term,
            len(m.context),
            len(m.entries),
        ),
        m.context,
    ]
    for entry in m.entries:
        parts.append(_ENTRY.pack(entry.term, entry.index, entry.kind, len(entry.data)))
        parts.append(entry.data)
    if m.snapshot is not None:
        snapshot = m.snapshot
        parts.append(b"\x01" + _SNAP.pack(snapshot.index, snapshot.term, len(snapshot.data)))
        parts.append(snapshot.data)
    else:
        parts.append(b"\x00")
    return b"".join(parts)


def _decode(view: memoryview) -> Message:
    try:
        (kind, src, dst, term, index, log_term, commit, reject, hint, hint_term, ctx_len, count) = (
            _HEAD.unpack_from(view, 0)
        )
        offset = _HEAD.size
        context = bytes(view[offset : offset + ctx_len])
        offset += ctx_len
        entries = []
        for _ in range(count):
            e_term, e_index, e_kind, size = _ENTRY.unpack_from(view, offset)
            offset += _ENTRY.size
            if offset + size > len(view):
                raise RaftCodecError("entry runs past the message")
            entries.append(
                Entry(e_term, e_index, bytes(view[offset : offset + size]), EntryKind(e_kind))
            )
            offset += size
        snapshot = None
        if view[offset] == 1:
            s_index, s_term, size = _SNAP.unpack_from(view, offset + 1)
            offset += 1 + _SNAP.size
            snapshot = Snapshot(s_index, s_term, bytes(view[offset : offset + size]))
            offset += size
        else:
            offset += 1
        if offset != len(view):
            raise RaftCodecError(f"{len(view) - offset} bytes after the message")
        return Message(
            MessageType(kind),
            src,
            dst,
            term,
            index=index,
            log_term=log_term,
            entries=tuple(entries),
            commit=commit,
            reject=bool(reject),
            reject_hint=hint,
            hint_term=hint_term,
            context=context,
            snapshot=snapshot,
        )
    except (struct.error, IndexError, ValueError) as exc:
        if isinstance(exc, RaftCodecError):
            raise
        raise RaftCodecError(f"malformed raft message: {exc}") from exc
