"""Records the append path hands to dispatch (`Dispatcher.expect`) are what parsing them back
from the CommitLog gives: dispatch takes them instead of parsing, so the two must never differ."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.common.constants import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from pocketmq.common.java_hash import tags_code
from pocketmq.common.topic_names import SCHEDULE_TOPIC
from pocketmq.store import dispatch, dispatch_kernel
from pocketmq.store.api import MessageToStore
from pocketmq.store.dispatch import Dispatcher, DispatchRequest
from pocketmq.store.message_store import MessageStore
from tests.unit.common.kernel_source import interpreted
from tests.unit.store.conftest import small_config

DELAYS_MS = (1_000, 5_000, 10_000)
PROPERTY_PIECES = st.sampled_from(
    [
        "TAGS\x01TagA\x02",
        "TAGS\x01\x02",
        "KEYS\x01k1 k2\x02",
        "KEYS\x01 \x02",
        "UNIQ_KEY\x01C0A8000A00002A9F\x02",
        "DELAY\x012\x02",
        "DELAY\x01x\x02",
        "WAIT\x01true\x02",
        "é\x01ü\x02",
    ]
)
MESSAGES = st.builds(
    lambda topic, pieces, separator, flag, host, queue_id, body: MessageToStore(
        topic=topic,
        body=body,
        # Without its last separator the append adds it, and the record holds the added one.
        properties="".join(pieces)[: None if separator else -1] if pieces else "",
        queue_id=queue_id,
        sys_flag=flag,
        born_timestamp=1_700_000_000_000,
        born_host=host,
    ),
    st.sampled_from(["TopicA", "T" * 200, SCHEDULE_TOPIC]),
    st.lists(PROPERTY_PIECES, max_size=4),
    st.booleans(),
    st.sampled_from(
        [0, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE]
    ),
    st.sampled_from([("10.0.0.1", 5555), ("::1", 7777)]),
    st.integers(0, 3),
    st.binary(max_size=3_000),
)
# Puts of one topic and queue each, as the broker makes them: a batch takes the first's.
PUTS = st.lists(
    st.lists(MESSAGES, min_size=1, max_size=5).map(
        lambda batch: [replace(m, topic=batch[0].topic, queue_id=batch[0].queue_id) for m in batch]
    ),
    min_size=1,
    max_size=80,
)


_INTERPRETED_KERNEL = interpreted(dispatch_kernel)
PARSERS = [("compiled", None), ("compiled", 700), ("kernel source", None), ("interpreted", None)]
"""How dispatch parses, and what it copies for the kernel at once (None: the usual): the kernel
as imported (compiled where the build could), in chunks that cut most records, its source run
by the interpreter, and the interpreted parser alone."""


@contextmanager
def parsing_with(build: str, chunk: int | None) -> Iterator[None]:
    """Dispatch parses with `build` (one of `PARSERS`) within the block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dispatch, "KERNEL_COMPILED", build != "interpreted")
        if build == "kernel source":
            patch.setattr(dispatch, "dispatch_kernel", _INTERPRETED_KERNEL)
        if chunk is not None:
            patch.setattr(dispatch, "_KERNEL_CHUNK", chunk)
        yield


def parsed_back(
    store: MessageStore, build: str = "compiled", chunk: int | None = None
) -> list[DispatchRequest]:
    """Every record of the store's CommitLog, as a dispatcher that was handed nothing parses
    them (with `parsing_with(build, chunk)`)."""
    seen: list[DispatchRequest] = []
    parser = Dispatcher(store.commit_log, [], schedule_delays_ms=DELAYS_MS)
    parser.reput_offset = store.commit_log.min_offset
    parser.on_dispatched.append(seen.extend)
    with parsing_with(build, chunk):
        parser.dispatch_available(max_records=1 << 30)
    return seen


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PUTS, st.integers(1, 300))
def test_the_records_appends_hand_over_are_the_records_parsed_back(
    tmp_path_factory: object, puts: list[list[MessageToStore]], slice_records: int
) -> None:
    """Puts of every layout (IPv4 and IPv6 born hosts, topics past 127 bytes, transaction
    types, schedule entries with and without a usable DELAY, properties with and without their
    last separator) across CommitLog files that roll over, dispatched in slices of any size:
    dispatch takes what the appends handed over, and that is what parsing gives, with the
    kernel (compiled and its source interpreted) and without it."""
    root = Path(tmp_path_factory.mktemp("store"))  # type: ignore[attr-defined]
    store = MessageStore(small_config(root))
    store.load()
    store.dispatcher.schedule_delays_ms = DELAYS_MS
    try:
        taken: list[DispatchRequest] = []
        store.dispatcher.on_dispatched.append(taken.extend)
        for batch in puts:  # appended and handed over, as puts are, dispatched afterwards
            assert store._append(batch).ok
        while store.dispatcher.dispatch_available(max_records=slice_records):
            pass
        assert store.dispatcher.reput_offset == store.commit_log.max_offset
        for build, chunk in PARSERS:
            assert taken == parsed_back(store, build, chunk), (build, chunk)
    finally:
        store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(1, 40), st.booleans(), st.integers(0, 50)), max_size=30))
def test_dispatch_between_puts_takes_each_record_once(
    tmp_path_factory: object, steps: list[tuple[int, bool, int]]
) -> None:
    """Puts of batches, some handed over and some written straight to the CommitLog, with
    dispatches of any size between them: parsing the records that were not handed over runs
    on into batches that were (all of one or part of it), and what dispatch hands its targets
    is every record once, in CommitLog order, as parsing gives it."""
    root = Path(tmp_path_factory.mktemp("store"))  # type: ignore[attr-defined]
    store = MessageStore(small_config(root))
    store.load()
    try:
        taken: list[DispatchRequest] = []
        store.dispatcher.on_dispatched.append(taken.extend)
        for number, (size, handed_over, dispatched) in enumerate(steps):
            batch = [
                MessageToStore(
                    topic="TopicA", body=b"x" * i, properties=f"KEYS\x01k{number}-{i}\x02"
                )
                for i in range(size)
            ]
            append = store._append if handed_over else store.commit_log.append
            assert append(batch).ok
            if dispatched:
                store.dispatcher.dispatch_available(max_records=dispatched)
        store.dispatch_now()
        assert taken == parsed_back(store)
        # What parsing overtook is forgotten, so appends hand over again.
        assert not store.dispatcher._known  # type: ignore[attr-defined]
        assert store.dispatcher._known_records == 0  # type: ignore[attr-defined]
    finally:
        store.close()


def test_dispatch_takes_the_handed_over_records_without_parsing_them(
    open_store: Callable[..., MessageStore],
) -> None:
    """A record handed over is taken as handed over; one that was not is parsed. Shown by
    changing a tag in the mapping after the append: only parsing sees the change."""
    store = open_store()

    def put(handed_over: bool) -> int:
        batch = [MessageToStore(topic="TopicA", body=b"x", properties="TAGS\x01a\x02")]
        if handed_over:
            offset = store._append(batch).physical_offsets[0]  # what puts do, without dispatch
        else:
            offset = store.commit_log.append(batch).physical_offsets[0]
        mapped = store.commit_log.files.find(offset)
        assert mapped is not None
        position = offset - mapped.file_from_offset
        record = bytes(mapped.buffer[position : mapped.wrote_position])
        at = position + record.index(b"TAGS\x01a") + 5
        mapped.buffer[at : at + 1] = b"b"
        return offset

    put(handed_over=False)
    put(handed_over=True)  # parsed too: dispatch reaches it by parsing the record before it
    store.dispatch_now()
    put(handed_over=True)  # taken as handed over, past the one parsed meanwhile
    store.dispatch_now()
    queue = store.consume_queues.find("TopicA", 0)
    assert queue is not None
    tag_codes = [entry[2] for entry in map(queue.entry, range(3)) if entry is not None]
    assert tag_codes == [tags_code("b"), tags_code("b"), tags_code("a")]
    # What was handed over is forgotten when the CommitLog is cut back: the offsets may name
    # other records by then.
    put(handed_over=True)
    store.truncate(store.commit_log.min_offset)
    assert not store.dispatcher._known  # type: ignore[attr-defined]


def test_past_known_max_appends_hand_nothing_over(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dispatch far behind: what appends write past `KNOWN_MAX` waiting is parsed instead."""
    monkeypatch.setattr(dispatch, "KNOWN_MAX", 2)
    store = open_store()
    batch = [MessageToStore(topic="TopicA", body=b"x", properties="TAGS\x01a\x02")]
    offsets = [store._append(batch).physical_offsets[0] for _ in range(3)]
    known = store.dispatcher._known  # type: ignore[attr-defined]
    assert [request.commit_log_offset for run in known for request in run] == offsets[:2]
    assert store.dispatch_now() == 3
    queue = store.consume_queues.find("TopicA", 0)
    assert queue is not None
    assert [entry[0] for entry in map(queue.entry, range(3)) if entry is not None] == offsets
    assert not known


@pytest.mark.parametrize(("build", "chunk"), PARSERS)
@pytest.mark.parametrize(
    ("field", "value"),
    [(4, b"\x00\x00\x00\x01"), (28, b"\x00" * 8), (36, b"\x00\x00\x00\x30")],
    ids=["magic", "physical offset", "v6 flags unwritten"],
)
def test_dispatch_stops_at_a_bad_record_after_the_good_ones_before_it(
    open_store: Callable[..., MessageStore],
    caplog: pytest.LogCaptureFixture,
    build: str,
    chunk: int | None,
    field: int,
    value: bytes,
) -> None:
    """A record whose magic, CommitLog offset or host flags cannot be right (its hosts are
    IPv4, so flags saying IPv6 make its lengths wrong) stops dispatch just before it, with
    every record before it dispatched, however it parses."""
    store = open_store()
    batch = [MessageToStore(topic="TopicA", body=b"x" * 300, properties="TAGS\x01a\x02")]
    offsets = [store.commit_log.append(batch).physical_offsets[0] for _ in range(5)]
    mapped = store.commit_log.files.find(offsets[3])
    assert mapped is not None
    at = offsets[3] - mapped.file_from_offset + field
    mapped.buffer[at : at + len(value)] = value
    seen: list[DispatchRequest] = []
    store.dispatcher.on_dispatched.append(seen.extend)
    with parsing_with(build, chunk), caplog.at_level(logging.ERROR):
        assert store.dispatcher.dispatch_available() == 3
    assert [request.commit_log_offset for request in seen] == offsets[:3]
    assert store.dispatcher.reput_offset == offsets[3]
    assert f"dispatch stopped at commit log offset {offsets[3]}" in caplog.text


def test_records_the_kernel_does_not_parse_cost_no_copy_each(
    open_store: Callable[..., MessageStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records of another layout (IPv6 hosts) or larger than the kernel's chunk go to the
    interpreted parser without a chunk copied for the kernel first; usual records around them
    still go to the kernel."""
    store = open_store()
    calls: list[int] = []

    def counted(data: bytes, offset: int, limit: int, out: list[dispatch_kernel.Fields]) -> int:
        calls.append(offset)
        return dispatch_kernel.parse_records(data, offset, limit, out)

    kernel = SimpleNamespace(parse_records=counted, Fields=dispatch_kernel.Fields)
    monkeypatch.setattr(dispatch, "dispatch_kernel", kernel)
    monkeypatch.setattr(dispatch, "KERNEL_COMPILED", True)
    monkeypatch.setattr(dispatch, "_KERNEL_CHUNK", 4_000)
    v6 = MessageToStore(topic="TopicA", body=b"x", born_host=("::1", 7777))
    large = MessageToStore(topic="TopicA", body=b"x" * 5_000)
    usual = MessageToStore(topic="TopicA", body=b"x")
    for batch in ([v6] * 20, [large] * 3, [usual] * 5):
        store.commit_log.append(batch)
    assert store.dispatch_now() == 28
    assert len(calls) == 1  # the five usual records, at once
