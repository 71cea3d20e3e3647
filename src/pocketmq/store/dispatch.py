"""The dispatcher (RocketMQ's reput): follows the CommitLog and builds queues and the index.

Everything derived from the CommitLog (ConsumeQueue entries, index entries, wake-ups of held
pulls) is built here from the records themselves, so a master, a replica copying raw bytes
and a recovery after a crash all take the same path. Both targets ignore entries they already
have, so dispatching a range twice is harmless.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from pocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.java_hash import tags_code
from pocketmq.common.properties import decode_properties
from pocketmq.common.stored_message import (
    MessageDecodeError,
    body_crc,
    parse_layout,
    peek_size_and_magic,
)
from pocketmq.store.commitlog import CommitLog

log = logging.getLogger(__name__)

_HEAD: Final = struct.Struct(">iIiiiqqiq")
_LONG: Final = struct.Struct(">q")
_STORE_TS_GAP: Final = 8  # BORNTIMESTAMP end -> born host -> STORETIMESTAMP


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """What the dispatcher learned from one stored record."""

    topic: str
    queue_id: int
    commit_log_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str
    uniq_key: str | None
    sys_flag: int
    properties: dict[str, str]

    @property
    def goes_to_consume_queue(self) -> bool:
        """Prepared and rolled-back transactional records are not consumable."""
        kind = self.sys_flag & TRANSACTION_TYPE_MASK
        return kind not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


class RecordEnd(Exception):
    """No record starts here: the zeroed space after the last record."""


def parse_dispatch(
    buf: memoryview, pos: int, expected_offset: int, *, check_crc: bool
) -> DispatchRequest | None:
    """Parses the record at `buf[pos:]`; returns None for the end-of-file blank filler.

    Raises:
        RecordEnd: zero bytes, i.e. nothing was ever written here.
        MessageDecodeError: a torn or corrupt record, or one whose PHYSICALOFFSET is not
            `expected_offset` (stale bytes from before a truncation).
    """
    size, magic = peek_size_and_magic(buf, pos)
    if size == 0 and magic == 0:
        raise RecordEnd
    if magic == BLANK_MAGIC_CODE:
        return None
    layout = parse_layout(buf, pos)
    (_, _, crc, queue_id, _, queue_offset, physical_offset, sys_flag, _) = _HEAD.unpack_from(
        buf, pos
    )
    if physical_offset != expected_offset:
        raise MessageDecodeError(
            f"record at {expected_offset} says it was written at {physical_offset}"
        )
    if check_crc:
        body = buf[layout.body_pos : layout.body_pos + layout.body_len]
        if body_crc(body) != crc:
            raise MessageDecodeError(f"record at {expected_offset}: body CRC mismatch")
    born_host_size = 20 if sys_flag & 0x10 else 8
    store_timestamp = _LONG.unpack_from(buf, pos + _HEAD.size + born_host_size)[0]
    try:
        topic = bytes(buf[layout.topic_pos : layout.topic_pos + layout.topic_len]).decode()
        properties_text = bytes(
            buf[layout.properties_pos : layout.properties_pos + layout.properties_len]
        ).decode()
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"record at {expected_offset}: text is not UTF-8") from exc
    properties = decode_properties(properties_text) if properties_text else {}
    tags = properties.get(PROPERTY_TAGS)
    return DispatchRequest(
        topic=topic,
        queue_id=queue_id,
        commit_log_offset=physical_offset,
        size=size,
        tags_code=tags_code(tags) if tags else 0,
        store_timestamp=store_timestamp,
        queue_offset=queue_offset,
        keys=properties.get(PROPERTY_KEYS, ""),
        uniq_key=properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        sys_flag=sys_flag,
        properties=properties,
    )


class DispatchTarget(Protocol):
    """Something built from the CommitLog, record by record."""

    def dispatch(self, request: DispatchRequest) -> None: ...


class Dispatcher:
    """Moves `reput_offset` forward over new CommitLog records and feeds every target."""

    def __init__(self, commit_log: CommitLog, targets: list[DispatchTarget]) -> None:
        self._commit_log = commit_log
        self._targets = targets
        self.reput_offset = 0
        self.last_store_timestamp = 0
        self.on_dispatched: list[Callable[[DispatchRequest], None]] = []

    def dispatch_available(self, max_records: int = 100_000) -> int:
        """Dispatches up to `max_records` new records; returns how many it dispatched.

        A record that fails to parse stops the dispatcher at that offset with an error log: the
        CommitLog only holds what the append path or a replica wrote, so it is a bug or disk
        corruption, and skipping it would silently lose messages.
        """
        commit_log = self._commit_log
        count = 0
        while count < max_records and self.reput_offset < commit_log.max_offset:
            found = commit_log.view_from(self.reput_offset)
            if found is None:
                log.error("dispatch offset %d is outside the commit log", self.reput_offset)
                return count
            view, pos = found
            offset = self.reput_offset
            try:
                while pos < len(view) and count < max_records:
                    request = parse_dispatch(view, pos, offset, check_crc=False)
                    if request is None:
                        offset = commit_log.next_file_offset(offset)
                        break
                    for target in self._targets:
                        target.dispatch(request)
                    for listener in self.on_dispatched:
                        listener(request)
                    self.last_store_timestamp = request.store_timestamp
                    pos += request.size
                    offset += request.size
                    count += 1
                else:
                    if pos >= len(view) and view.nbytes == commit_log.file_size:
                        offset = commit_log.next_file_offset(offset - 1)
            except (MessageDecodeError, RecordEnd) as exc:
                log.error("dispatch stopped at commit log offset %d: %s", offset, exc)
                self.reput_offset = offset
                return count
            finally:
                view.release()
            self.reput_offset = offset
        return count
