"""The sink's chunk plan: a replay sends exactly the rows no earlier attempt stored, whatever
order the rows come in and whatever batch size either attempt used; a replay that lacks a row
its first attempt stored is refused before it sends anything."""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import Future

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.message import Message
from pocketmq.spark.sink_chunks import (
    SINK_PROPERTY,
    ReplayMismatch,
    plan_chunks,
    row_digest,
    stored_digest,
    task_tag,
)

PREFIX = task_tag("sink", "q1", 7, 3)


def rows(count: int, *, duplicates: int = 1) -> list[Message]:
    return [
        Message("T", f"row {n // duplicates}".encode(), keys=f"k{n // duplicates}")
        for n in range(count)
    ]


def stored_from(chunks: list[list[Message]]) -> Counter[str]:
    """What the replay's scan finds for chunks an attempt stored (through their tags)."""
    found: Counter[str] = Counter()
    for chunk in chunks:
        for message in chunk:
            digest = stored_digest(message.properties[SINK_PROPERTY], PREFIX)
            assert digest is not None
            found[digest] += 1
    return found


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 60),
    duplicates=st.integers(1, 3),
    first_size=st.integers(1, 9),
    replay_size=st.integers(1, 9),
    crash_after=st.integers(0, 20),
    seed=st.integers(0, 1000),
)
def test_a_replay_sends_each_row_once_whatever_the_order_and_batch_sizes(
    count: int, duplicates: int, first_size: int, replay_size: int, crash_after: int, seed: int
) -> None:
    messages = rows(count, duplicates=duplicates)
    first_attempt = list(plan_chunks(messages, Counter(), rows_max=first_size, prefix=PREFIX))
    # The crash lets an arbitrary subset of the chunks in flight land.
    chance = random.Random(seed)
    landed = [c for c in first_attempt[:crash_after] if chance.random() < 0.7]
    replayed = rows(count, duplicates=duplicates)
    chance.shuffle(replayed)  # after a shuffle, the order within a partition may change
    replay = list(plan_chunks(replayed, stored_from(landed), rows_max=replay_size, prefix=PREFIX))
    published = [m.body for chunk in landed + replay for m in chunk]
    assert sorted(published) == sorted(m.body for m in messages)
    assert all(len(chunk) <= replay_size for chunk in replay)


def test_chunks_respect_the_byte_limit() -> None:
    big = [Message("T", bytes(400)) for _ in range(10)]
    chunks = list(plan_chunks(big, Counter(), rows_max=100, bytes_max=1000))
    assert [len(c) for c in chunks] == [2, 2, 2, 2, 2]
    assert all(SINK_PROPERTY not in m.properties for m in big), "batch writes tag nothing"


def test_a_replay_that_lacks_a_stored_row_is_refused_before_sending() -> None:
    stored = stored_from(list(plan_chunks(rows(10), Counter(), rows_max=4, prefix=PREFIX)))
    other = rows(10)
    other[3] = Message("T", b"not the same row")
    planned = plan_chunks(other, stored, rows_max=4, prefix=PREFIX)
    with pytest.raises(ReplayMismatch, match="lacks 1 of the rows"):
        next(planned)


def test_the_digest_covers_body_keys_tags_and_properties() -> None:
    base = Message("T", b"x", tags="a", keys="k", properties={"p": "1"})
    variants = [
        Message("U", b"x", tags="a", keys="k", properties={"p": "1"}),
        Message("T", b"y", tags="a", keys="k", properties={"p": "1"}),
        Message("T", b"x", tags="b", keys="k", properties={"p": "1"}),
        Message("T", b"x", tags="a", keys="j", properties={"p": "1"}),
        Message("T", b"x", tags="a", keys="k", properties={"p": "2"}),
    ]
    assert len({row_digest(m) for m in [base, *variants]}) == 6


def test_a_tag_of_another_task_is_not_ours_and_an_old_format_is_refused() -> None:
    (chunk,) = plan_chunks(rows(1), Counter(), rows_max=1, prefix=task_tag("sink", "q1", 7, 4))
    assert stored_digest(chunk[0].properties[SINK_PROPERTY], PREFIX) is None
    with pytest.raises(ReplayMismatch, match="older version"):
        stored_digest(f"{PREFIX}3", PREFIX)


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


def test_the_digest_stays_what_earlier_versions_stored() -> None:
    """A replay compares digests an earlier run stored: the hash may not change."""
    message = Message("T", b"body", tags="t", keys=["a", "b"], properties={"p": "1"})
    message.properties[SINK_PROPERTY] = "ignored"
    assert row_digest(message) == "ce42dbd81604d2965ccb"
