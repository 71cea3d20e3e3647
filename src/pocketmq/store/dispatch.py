"""The dispatcher (RocketMQ's reput): follows the CommitLog and builds queues and the index.

Everything derived from the CommitLog (ConsumeQueue entries, index entries, wake-ups of held
pulls) is built here from the records themselves, so a master, a replica copying raw bytes
and a recovery after a crash all take the same path. Both targets ignore entries they already
have, so dispatching a range twice is harmless. One shortcut: a put hands over what it just
wrote (`Dispatcher.expect`), and dispatch takes that instead of parsing the same records back;
both kinds of request are made alike (`describe_record`, and `describe_appended` for an
append's records at once), and tests hold them equal.

Entries of SCHEDULE_TOPIC_XXXX (delayed messages waiting in queue level-1) carry their delivery
time instead of a tag hash as tag code, as RocketMQ's CommitLog computes it: store time plus the
level's delay (`messageDelayLevel`, given as `schedule_delays_ms`). The delivery side reads due
times from the queue alone, and a store written by RocketMQ reads the same.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple, Protocol

from pocketmq.common import stored_layout as layout
from pocketmq.common.checksum import crc32
from pocketmq.common.constants import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V1,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_SEPARATOR,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.java_hash import tags_code
from pocketmq.common.kernels import compiled
from pocketmq.common.properties import decode_properties, find_property
from pocketmq.common.property_kernel import index_properties
from pocketmq.common.stored_layout import (
    PROPERTIES_LENGTH_SIZE,
    SYS_FLAG_POS,
    TOPIC_LENGTH_SIZE_V1,
    V6_FLAGS,
    store_timestamp_pos,
)
from pocketmq.common.stored_message import (
    MessageDecodeError,
    parse_layout,
    peek_size_and_magic,
)
from pocketmq.common.topic_names import SCHEDULE_TOPIC
from pocketmq.store import dispatch_kernel
from pocketmq.store.commitlog import AppendedRecord, CommitLog
from pocketmq.store.index import IndexService

log = logging.getLogger(__name__)

# Bound by assignment, not by import: CPython 3.11 compiles `name.method(...)` on a name bound by
# an import without its method-call fast path, and every record pays for it (measured ~3%).
_HEAD: Final = layout.HEAD
_LONG: Final = layout.LONG
_INT: Final = layout.INT
_UNSIGNED_SHORT: Final = layout.UNSIGNED_SHORT
_FIXED_V4: Final = layout.FIXED_V4
# Bytes after the body of the smallest V1 record: a topic length and a properties length.
_V1_TAIL_MIN: Final = TOPIC_LENGTH_SIZE_V1 + PROPERTIES_LENGTH_SIZE
UNKNOWN_LEVEL_DELAY_MS: Final = 1000
"""Delay RocketMQ assumes for a level missing from its table (`computeDeliverTimestamp`)."""


NOT_CONSUMABLE: Final = frozenset((TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE))
"""Transaction types whose records take no queue entry: prepared and rolled back."""


class DispatchRequest(NamedTuple):
    """What the dispatcher learned from one stored record (a tuple: built once per message)."""

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
    properties_text: str

    @property
    def goes_to_consume_queue(self) -> bool:
        """Prepared and rolled-back transactional records are not consumable."""
        return self.sys_flag & TRANSACTION_TYPE_MASK not in NOT_CONSUMABLE

    def properties(self) -> dict[str, str]:
        return decode_properties(self.properties_text)


def deliver_timestamp_ms(delays_ms: Sequence[int], level: int, store_timestamp: int) -> int:
    """When a message stored at `store_timestamp` with delay `level` is due (RocketMQ's
    `computeDeliverTimestamp`); levels past the last count as the last, as the send path
    clamps them.

    Args:
        delays_ms: The delay of each level, level 1 first.
        level: The message's DELAY level, 1 or more.
        store_timestamp: The schedule record's store time in ms.
    """
    if not delays_ms or level <= 0:
        return store_timestamp + UNKNOWN_LEVEL_DELAY_MS
    return store_timestamp + delays_ms[min(level, len(delays_ms)) - 1]


def with_deliver_timestamp(request: DispatchRequest, delays_ms: Sequence[int]) -> DispatchRequest:
    """A SCHEDULE_TOPIC_XXXX entry with its delivery time as tag code; others as they are.

    A schedule record without a usable DELAY level keeps its tag hash (RocketMQ does the same);
    the delivery side then treats it as due.
    """
    if request.topic != SCHEDULE_TOPIC or not delays_ms:
        return request
    text = find_property(request.properties_text, PROPERTY_DELAY_TIME_LEVEL)
    if text is None or not text.isascii() or not text.isdigit() or int(text) <= 0:
        return request
    return request._replace(
        tags_code=deliver_timestamp_ms(delays_ms, int(text), request.store_timestamp)
    )


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
    available = len(buf) - pos
    size, magic = peek_size_and_magic(buf, pos)
    if size == 0 and magic == 0:
        raise RecordEnd
    if magic == BLANK_MAGIC_CODE:
        return None
    if magic == MESSAGE_MAGIC_CODE_V1 and _FIXED_V4.size <= size <= available:
        (
            _,
            _,
            crc,
            queue_id,
            _,
            queue_offset,
            physical_offset,
            sys_flag,
            _,
            _,
            store_timestamp,
            _,
            _,
            _,
            body_len,
        ) = _FIXED_V4.unpack_from(buf, pos)
    else:
        sys_flag = -1  # not the common layout: take the general path below
    if sys_flag & V6_FLAGS or sys_flag < 0:
        return _parse_general(buf, pos, expected_offset, check_crc=check_crc)
    # The V1 tail (`stored_layout`): a 1-byte topic length, the topic, a 2-byte properties
    # length, the properties; inline because this runs once per message.
    end = pos + size
    body_pos = pos + _FIXED_V4.size
    topic_len_pos = body_pos + body_len
    if body_len < 0 or topic_len_pos + _V1_TAIL_MIN > end:
        raise MessageDecodeError(f"record at {expected_offset}: body overruns the record")
    topic_pos = topic_len_pos + TOPIC_LENGTH_SIZE_V1
    properties_len_pos = topic_pos + buf[topic_len_pos]
    if properties_len_pos + PROPERTIES_LENGTH_SIZE > end:
        raise MessageDecodeError(f"record at {expected_offset}: topic overruns the record")
    properties_pos = properties_len_pos + PROPERTIES_LENGTH_SIZE
    if properties_pos + _UNSIGNED_SHORT.unpack_from(buf, properties_len_pos)[0] != end:
        raise MessageDecodeError(
            f"record at {expected_offset}: field lengths do not add up to TOTALSIZE {size}"
        )
    return _request(
        buf, expected_offset, check_crc, crc, queue_id, queue_offset, physical_offset, sys_flag,
        store_timestamp, size, body_pos, body_len, topic_pos, properties_len_pos - topic_pos,
        properties_pos, end - properties_pos,
    )  # fmt: skip


def _parse_general(
    buf: memoryview, pos: int, expected_offset: int, *, check_crc: bool
) -> DispatchRequest:
    layout = parse_layout(buf, pos)
    (_, _, crc, queue_id, _, queue_offset, physical_offset, sys_flag, _) = _HEAD.unpack_from(
        buf, pos
    )
    store_timestamp = _LONG.unpack_from(buf, pos + store_timestamp_pos(sys_flag))[0]
    return _request(
        buf, expected_offset, check_crc, crc, queue_id, queue_offset, physical_offset, sys_flag,
        store_timestamp, layout.size, layout.body_pos, layout.body_len, layout.topic_pos,
        layout.topic_len, layout.properties_pos, layout.properties_len,
    )  # fmt: skip


def _request(
    buf: memoryview, expected_offset: int, check_crc: bool, crc: int, queue_id: int,
    queue_offset: int, physical_offset: int, sys_flag: int, store_timestamp: int, size: int,
    body_pos: int, body_len: int, topic_pos: int, topic_len: int, properties_pos: int,
    properties_len: int,
) -> DispatchRequest:  # fmt: skip
    if physical_offset != expected_offset:
        raise MessageDecodeError(
            f"record at {expected_offset} says it was written at {physical_offset}"
        )
    try:
        topic = str(buf[topic_pos : topic_pos + topic_len], "utf-8")
        properties = str(buf[properties_pos : properties_pos + properties_len], "utf-8")
    except UnicodeDecodeError as exc:
        raise MessageDecodeError(f"record at {expected_offset}: text is not UTF-8") from exc
    if check_crc:
        if crc32(buf[body_pos : body_pos + body_len]) & 0x7FFFFFFF != crc:
            raise MessageDecodeError(f"record at {expected_offset}: body CRC mismatch")
        # The body CRC does not cover topic and properties. The append path guarantees a NUL-free
        # topic and a properties string ending in its separator, so a tail that a torn write
        # left zeroed is caught here too.
        if "\0" in topic or (properties and properties[-1] != PROPERTY_SEPARATOR):
            raise MessageDecodeError(f"record at {expected_offset}: torn topic or properties")
    return describe_record(
        topic, queue_id, physical_offset, size, store_timestamp, queue_offset, sys_flag,
        properties,
    )  # fmt: skip


_new_request: Final = tuple.__new__


def describe_record(
    topic: str,
    queue_id: int,
    commit_log_offset: int,
    size: int,
    store_timestamp: int,
    queue_offset: int,
    sys_flag: int,
    properties: str,
) -> DispatchRequest:
    """The request for a record whose fields are known: parsed back from the CommitLog, or
    handed over by the append that wrote them (`Dispatcher.expect`); both go through here."""
    tags, keys, uniq_key = index_properties(properties)
    # `tuple.__new__` straight: a named tuple's own `__new__` is a Python function, which
    # doubled this once-per-record construction.
    return _new_request(
        DispatchRequest,
        (
            topic,
            queue_id,
            commit_log_offset,
            size,
            tags_code(tags) if tags else 0,
            store_timestamp,
            queue_offset,
            keys,
            uniq_key,
            sys_flag,
            properties,
        ),
    )


def describe_appended(
    topic: str, store_timestamp: int, records: Sequence[AppendedRecord]
) -> list[DispatchRequest]:
    """`describe_record` for each record one append wrote (`CommitLog.append`'s `appended`):
    the same requests, made in one loop without a call a record."""
    requests: list[DispatchRequest] = []
    add = requests.append
    for offset, size, queue_id, queue_offset, sys_flag, properties in records:
        tags, keys, uniq_key = index_properties(properties)
        add(
            _new_request(
                DispatchRequest,
                (
                    topic, queue_id, offset, size, tags_code(tags) if tags else 0,
                    store_timestamp, queue_offset, keys, uniq_key, sys_flag, properties,
                ),
            )
        )  # fmt: skip
    return requests


class DispatchTarget(Protocol):
    """Something built from the CommitLog, in runs of records."""

    def dispatch_many(self, requests: Sequence[DispatchRequest]) -> None:
        """Takes a run of records in CommitLog order."""


_RUN: Final = 256
"""Records parsed before the targets take them: per-run work (headers, lookups) is paid once per
run, and the run is short enough that held pulls hear of new messages without delay."""
_KERNEL_CHUNK: Final = 256 * 1024
"""Bytes copied for `dispatch_kernel` to parse at once (it reads `bytes`, not the mapping): a
few hundred usual records; a record larger than this is parsed by `parse_dispatch`."""
KERNEL_COMPILED: Final = compiled(dispatch_kernel)
"""Whether records of the usual layout are parsed by `dispatch_kernel` compiled by mypyc."""
KNOWN_MAX: Final = 8_192
"""Records handed over by appends and not yet dispatched, at most (a few MiB): past it (dispatch
stopped, or puts ran without a turn of the event loop between them) appends hand nothing over,
and dispatch parses those records instead."""


class Dispatcher:
    """Moves `reput_offset` forward over new CommitLog records and feeds every target.

    `schedule_delays_ms` (the delay of each `messageDelayLevel`, level 1 first) must be set
    before the first dispatch, recovery included, for schedule entries to get their delivery
    time as tag code; left empty they keep their tag hash.
    """

    def __init__(
        self,
        commit_log: CommitLog,
        targets: list[DispatchTarget],
        *,
        schedule_delays_ms: Sequence[int] = (),
    ) -> None:
        self._commit_log = commit_log
        self._targets = targets
        self.schedule_delays_ms: tuple[int, ...] = tuple(schedule_delays_ms)
        self.reput_offset = 0
        self.last_store_timestamp = 0
        # Called with each run of dispatched records, once its queue entries and index are built.
        self.on_dispatched: list[Callable[[Sequence[DispatchRequest]], None]] = []
        # Requests for records the append path just wrote, a list an append, in CommitLog
        # order: dispatch takes them instead of parsing those records back (about 40 % of its
        # work a record), an append's list at once where it can.
        self._known: deque[list[DispatchRequest]] = deque()
        self._known_records = 0

    def expect(self, topic: str, store_timestamp: int, records: Sequence[AppendedRecord]) -> None:
        """Takes what an append wrote (`CommitLog.append`'s `appended`), so that dispatch does
        not parse those records back. Recovery, replicas and anything appended otherwise are
        parsed; a record is taken from here only at exactly the offset dispatch reaches."""
        if not self.takes_expected:  # dispatch is far behind: it parses these records
            return
        requests = describe_appended(topic, store_timestamp, records)
        if topic == SCHEDULE_TOPIC:
            delays = self.schedule_delays_ms
            requests = [with_deliver_timestamp(request, delays) for request in requests]
        self._known.append(requests)
        self._known_records += len(requests)

    @property
    def takes_expected(self) -> bool:
        """Whether `expect` would take records now (fewer than `KNOWN_MAX` wait)."""
        return self._known_records < KNOWN_MAX

    def forget_expected(self) -> None:
        """Drops what appends handed over: the CommitLog was cut back, so the offsets may name
        other records by now."""
        self._known.clear()
        self._known_records = 0

    def _dispatch_known(self, max_records: int) -> int:
        """Hands over the expected records that continue `reput_offset`, in runs of up to
        `_RUN` (an append's list as it is, or several appends' joined); returns how many."""
        known = self._known
        offset = self.reput_offset
        count = 0
        run: list[DispatchRequest] = []
        if known[0][0].commit_log_offset < offset:
            self._drop_overtaken()
        while known and count < max_records:
            requests = known[0]
            if requests[0].commit_log_offset != offset:
                break
            take = len(requests)
            if take <= max_records - count and len(run) + take <= _RUN:  # the usual case
                known.popleft()  # the list is the run's now: joined into, never shared
            else:
                take = min(take, max_records - count, _RUN - len(run))
                known[0] = requests[take:]
                requests = requests[:take]
            if run:
                run += requests
            else:
                run = requests
            self._known_records -= take
            count += take
            last = requests[-1]
            offset = last.commit_log_offset + last.size
            if len(run) == _RUN:
                self._hand_over(run)
                self.reput_offset = offset
                run = []
        self._hand_over(run)
        self.reput_offset = offset
        return count

    def _drop_overtaken(self) -> None:
        """Forgets the expected records that dispatch parsed meanwhile (it parses on from a
        record that was not handed over into those that were)."""
        known = self._known
        offset = self.reput_offset
        while known and known[0][0].commit_log_offset < offset:
            requests = known[0]
            if requests[-1].commit_log_offset < offset:
                known.popleft()
                self._known_records -= len(requests)
            else:
                rest = [r for r in requests if r.commit_log_offset >= offset]
                self._known_records -= len(requests) - len(rest)
                known[0] = rest

    def dispatch_available(self, max_records: int = 100_000) -> int:
        """Dispatches up to `max_records` new records; returns how many it dispatched.

        Records are parsed in runs of up to `_RUN` and each run goes to every target at once;
        `reput_offset` only moves past records that were handed over.

        A record that fails to parse stops the dispatcher at that offset with an error log: the
        CommitLog only holds what the append path or a replica wrote, so it is a bug or disk
        corruption, and skipping it would silently lose messages.
        """
        commit_log = self._commit_log
        count = 0
        while count < max_records and self.reput_offset < commit_log.max_offset:
            if self._known:
                taken = self._dispatch_known(max_records - count)
                if taken:
                    count += taken
                    continue
            found = commit_log.view_from(self.reput_offset)
            if found is None:
                log.error("dispatch offset %d is outside the commit log", self.reput_offset)
                return count
            view, pos = found
            offset = self.reput_offset
            run: list[DispatchRequest] = []
            try:
                growing = view.nbytes < commit_log.file_size
                while pos < len(view) and count < max_records:
                    if KERNEL_COMPILED:
                        parsed, consumed = self._parse_usual(
                            view, pos, offset, min(_RUN, max_records - count)
                        )
                        if parsed:
                            run.extend(parsed)
                            pos += consumed
                            offset += consumed
                            count += len(parsed)
                            if len(run) >= _RUN:
                                self._hand_over(run)
                                run = []
                            continue
                    try:
                        request = parse_dispatch(view, pos, offset, check_crc=False)
                    except (MessageDecodeError, RecordEnd):
                        if not (growing and _ends_inside_record(view, pos)):
                            raise
                        # A replica's log can end inside a record: the rest is on its way.
                        self._hand_over(run)
                        self.reput_offset = offset
                        return count
                    if request is None:
                        offset = commit_log.next_file_offset(offset)
                        break
                    if request.topic == SCHEDULE_TOPIC:
                        request = with_deliver_timestamp(request, self.schedule_delays_ms)
                    run.append(request)
                    pos += request.size
                    offset += request.size
                    count += 1
                    if len(run) == _RUN:
                        self._hand_over(run)
                        run = []
                else:
                    if pos >= len(view) and view.nbytes == commit_log.file_size:
                        offset = commit_log.next_file_offset(offset - 1)
                self._hand_over(run)
            except (MessageDecodeError, RecordEnd) as exc:
                self._hand_over(run)  # the records before the bad one are good
                log.error("dispatch stopped at commit log offset %d: %s", offset, exc)
                self.reput_offset = offset
                return count
            finally:
                view.release()
            self.reput_offset = offset
        if self._known:
            self._drop_overtaken()
        return count

    def _parse_usual(
        self, view: memoryview, pos: int, offset: int, limit: int
    ) -> tuple[list[DispatchRequest], int]:
        """Up to `limit` records of the usual layout from `view[pos:]` (at CommitLog `offset`)
        by `dispatch_kernel`, and the bytes they take; none where the next record is of
        another kind, which `parse_dispatch` then takes (or refuses)."""
        if not _kernel_parses(view, pos):
            return [], 0
        found: list[dispatch_kernel.Fields] = []
        consumed = dispatch_kernel.parse_records(
            bytes(view[pos : pos + _KERNEL_CHUNK]), offset, limit, found
        )
        requests = [describe_record(*fields) for fields in found]
        delays = self.schedule_delays_ms
        for i, request in enumerate(requests):
            if request.topic == SCHEDULE_TOPIC:
                requests[i] = with_deliver_timestamp(request, delays)
        return requests, consumed

    def _hand_over(self, run: list[DispatchRequest]) -> None:
        if not run:
            return
        for target in self._targets:
            target.dispatch_many(run)
        for listener in self.on_dispatched:
            listener(run)
        self.last_store_timestamp = run[-1].store_timestamp


def _kernel_parses(view: memoryview, pos: int) -> bool:
    """Whether the record at `pos` looks like one `dispatch_kernel` parses, checked before a
    chunk is copied for it: a run of other records (IPv6 hosts, records larger than the
    chunk) must not pay a copy a record."""
    if len(view) - pos < _FIXED_V4.size:
        return False
    size, magic = peek_size_and_magic(view, pos)
    if magic != MESSAGE_MAGIC_CODE_V1 or size > _KERNEL_CHUNK:
        return False
    return not _INT.unpack_from(view, pos + SYS_FLAG_POS)[0] & V6_FLAGS


def _ends_inside_record(view: memoryview, pos: int) -> bool:
    """Whether the written bytes stop before the end of the record at `pos`."""
    remaining = len(view) - pos
    if remaining < 8:
        return True
    size, magic = peek_size_and_magic(view, pos)
    return magic != BLANK_MAGIC_CODE and size > remaining


class IndexTarget:
    """Feeds the key index from dispatched records."""

    def __init__(self, index: IndexService) -> None:
        self.index = index

    def dispatch_many(self, requests: Sequence[DispatchRequest]) -> None:
        self.index.build_index_many(requests)
