"""A batch send written straight from its body (`CommitLog.append_batch`) leaves the same bytes,
offsets, receipts and records for dispatch as the same messages appended one object each."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.common.batch import encode_batch_body, scan_batch_body
from pocketmq.common.constants import END_FILE_MIN_BLANK_LENGTH
from pocketmq.common.stored_message import HostAddress, fixed_part, topic_field
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import BatchToStore, PutResult, PutStatus
from pocketmq.store.commitlog import AppendedRecord, CommitLog
from tests.unit.store.test_commitlog import FILE_SIZE, make_log

MAX_BODY = 1024  # `make_log`'s maxMessageSize

TEXT = st.text(
    st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=12
)
PROPERTIES = st.one_of(
    st.just(""),
    st.lists(st.tuples(TEXT.filter(bool), TEXT), max_size=3).map(
        lambda pairs: "".join(f"{name}\x01{value}\x02" for name, value in pairs)
    ),
    # A client may leave off the last separator; the store adds it back.
    TEXT.map(lambda value: f"KEYS\x01{value}"),
    # The most a batch entry holds, without its last separator: with it, one byte over the
    # limit, and the batch is refused as a whole.
    st.just("K\x01" + "x" * 32_765),
)
BODY = st.one_of(
    st.binary(max_size=64),
    # About the largest body the store takes: one byte over it refuses the whole batch.
    st.integers(MAX_BODY - 2, MAX_BODY + 1).map(lambda size: b"b" * size),
)
ENTRY = st.tuples(st.integers(-(2**31), 2**31 - 1), BODY, PROPERTIES)
HOSTS: list[HostAddress] = [("10.0.0.1", 5555), ("::1", 40000)]


def receipt(result: PutResult) -> tuple[object, ...]:
    return (
        result.status,
        result.remark,
        result.physical_offsets,
        result.queue_offset,
        result.wrote_bytes,
        result.store_timestamp,
    )


def written(commit_log: CommitLog) -> list[bytes]:
    return [bytes(mapped.buffer[: mapped.wrote_position]) for mapped in commit_log.files.files]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(
            st.lists(ENTRY, min_size=1, max_size=4),
            st.sampled_from(["Orders", "T" * 130]),  # a V1 and a V2 topic
            st.integers(0, 3),
            st.integers(0, 0xFFFF),
            st.sampled_from(HOSTS),
            st.integers(0, 16),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_a_batch_from_its_body_equals_its_messages(
    batches: list[tuple[list[tuple[int, bytes, str]], str, int, int, HostAddress, int]],
) -> None:
    clock = ManualClock(1_700_000_000_000)
    with tempfile.TemporaryDirectory() as work:
        by_object = make_log(Path(work) / "objects", clock)
        by_body = make_log(Path(work) / "body", clock)
        for entries, topic, queue_id, sys_flag, host, reconsume in batches:
            body = encode_batch_body(entries)
            batch = BatchToStore(
                topic=topic,
                queue_id=queue_id,
                body=body,
                spans=scan_batch_body(body),
                sys_flag=sys_flag,
                born_timestamp=1_699_999_999_000,
                born_host=host,
                reconsume_times=reconsume,
            )
            expected: list[AppendedRecord] = []
            got: list[AppendedRecord] = []
            want = by_object.append(batch.messages(), appended=expected)
            have = by_body.append_batch(batch, appended=got)
            assert receipt(have) == receipt(want)
            assert got == expected
            clock.advance(7)
        assert written(by_body) == written(by_object)
        assert by_body.max_offset == by_object.max_offset
        by_object.close()
        by_body.close()


@pytest.mark.parametrize("over", [0, 1])
def test_a_batch_at_the_size_a_file_holds(tmp_path: Path, over: int) -> None:
    """A batch that fills a file but for the end filler is stored; one byte more is refused,
    both ways alike."""
    clock = ManualClock()
    record_overhead = fixed_part(8, 8).size + len(topic_field(b"Orders")) + 2
    last = FILE_SIZE - END_FILE_MIN_BLANK_LENGTH - 4 * record_overhead - 3 * MAX_BODY + over
    assert 0 <= last <= MAX_BODY
    body = encode_batch_body([(0, b"b" * MAX_BODY, "")] * 3 + [(0, b"l" * last, "")])
    batch = BatchToStore("Orders", 0, body, scan_batch_body(body), born_host=HOSTS[0])
    want = make_log(tmp_path / "objects", clock).append(batch.messages())
    have = make_log(tmp_path / "body", clock).append_batch(batch)
    assert receipt(have) == receipt(want)
    assert have.status is (PutStatus.MESSAGE_ILLEGAL if over else PutStatus.PUT_OK)
