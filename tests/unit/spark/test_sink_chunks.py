"""The sink's chunk plan: a replay sends exactly the rows no earlier attempt stored, whatever
batch size either used; a replay with other rows or another order is refused."""

from __future__ import annotations

import random
import threading
from concurrent.futures import Future

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.message import Message
from pocketmq.spark.sink_chunks import (
    ReplayMismatch,
    StoredChunk,
    chunk_digest,
    chunk_tag,
    parse_chunk_tag,
    plan_chunks,
    task_tag,
)

PREFIX = task_tag("sink", "q1", 7, 3)


def rows(count: int) -> list[Message]:
    return [Message("T", f"row {n}".encode(), keys=f"k{n}") for n in range(count)]


def stored_from(chunks: list[tuple[int, list[Message]]]) -> dict[int, StoredChunk]:
    """What the replay's scan finds for chunks an attempt stored (through their tags)."""
    found = {}
    for first, chunk in chunks:
        stored = parse_chunk_tag(chunk_tag(PREFIX, first, chunk), PREFIX)
        assert stored is not None
        found[stored.first] = stored
    return found


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 60),
    first_size=st.integers(1, 9),
    replay_size=st.integers(1, 9),
    crash_after=st.integers(0, 20),
    seed=st.integers(0, 1000),
)
def test_a_replay_sends_each_row_once_whatever_the_batch_sizes(
    count: int, first_size: int, replay_size: int, crash_after: int, seed: int
) -> None:
    messages = rows(count)
    first_attempt = list(plan_chunks(messages, {}, rows_max=first_size))
    # The crash lets an arbitrary subset of the in-flight chunks land.
    landed = [c for c in first_attempt[:crash_after] if random.Random(seed + c[0]).random() < 0.7]
    replay = list(plan_chunks(rows(count), stored_from(landed), rows_max=replay_size))
    published = [m.body for _, chunk in landed + replay for m in chunk]
    assert sorted(published) == sorted(m.body for m in messages)
    assert all(len(chunk) <= replay_size for _, chunk in replay)


def test_chunks_respect_the_byte_limit() -> None:
    big = [Message("T", bytes(400)) for _ in range(10)]
    chunks = list(plan_chunks(big, {}, rows_max=100, bytes_max=1000))
    assert [len(c) for _, c in chunks] == [2, 2, 2, 2, 2]


def test_a_replay_with_rows_in_another_order_is_refused() -> None:
    messages = rows(10)
    stored = stored_from(list(plan_chunks(messages, {}, rows_max=4))[:1])
    shuffled = messages[:]
    shuffled[0], shuffled[5] = shuffled[5], shuffled[0]
    with pytest.raises(ReplayMismatch, match="sortWithinPartitions"):
        list(plan_chunks(shuffled, stored, rows_max=4))


def test_a_replay_with_fewer_rows_than_stored_is_refused() -> None:
    stored = stored_from(list(plan_chunks(rows(10), {}, rows_max=4)))
    with pytest.raises(ReplayMismatch):
        list(plan_chunks(rows(6), stored, rows_max=4))


def test_the_digest_covers_body_keys_tags_and_properties() -> None:
    base = Message("T", b"x", tags="a", keys="k", properties={"p": "1"})
    variants = [
        Message("T", b"y", tags="a", keys="k", properties={"p": "1"}),
        Message("T", b"x", tags="b", keys="k", properties={"p": "1"}),
        Message("T", b"x", tags="a", keys="j", properties={"p": "1"}),
        Message("T", b"x", tags="a", keys="k", properties={"p": "2"}),
    ]
    assert len({chunk_digest([m]) for m in [base, *variants]}) == 5


def test_a_tag_of_another_task_is_not_ours_and_an_old_format_is_refused() -> None:
    other = chunk_tag(task_tag("sink", "q1", 7, 4), 0, rows(1))
    assert parse_chunk_tag(other, PREFIX) is None
    with pytest.raises(ReplayMismatch, match="older version"):
        parse_chunk_tag(f"{PREFIX}3", PREFIX)


def test_a_failed_send_waits_for_the_others_in_flight() -> None:
    """A send that lands after the task failed would escape the next attempt's scan."""
    pytest.importorskip("pyspark")
    from pocketmq.spark.writer import _Sender

    futures: list[Future[tuple[object, int]]] = []

    class FakeCluster:
        def submit_send(self, messages: list[Message], queue: object) -> Future[tuple[object, int]]:
            future: Future[tuple[object, int]] = Future()
            futures.append(future)
            if len(futures) == 3:
                future.set_result((object(), 1))
            return future

    sender = _Sender(FakeCluster(), "T", window=3)  # type: ignore[arg-type]
    sender.send(rows(1))
    sender.send(rows(1))
    futures[0].set_exception(ConnectionError("broker gone"))
    late = threading.Timer(0.3, lambda: futures[1].set_result((object(), 1)))
    late.start()
    with pytest.raises(RuntimeError, match="broker gone"):
        sender.send(rows(1))  # the window is full: the failed one lands first
    late.join()
    assert futures[1].done(), "raised before the send in flight settled"
