"""The batch writer's encoder from Arrow columns: for every batch it takes, it sends the bytes
the general path (`to_messages`, `plan_chunks`, `prepare_batch`) sends, ids included; every
batch it leaves (None) goes the general path, which words what is wrong."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.errors import MessageError
from pocketmq.client.message import UniqueIdGenerator
from pocketmq.client.producer.wire import PreparedSend, prepare_batch
from pocketmq.spark import batch_bodies
from pocketmq.spark.batch_bodies import encode_rows
from pocketmq.spark.rows import to_messages
from pocketmq.spark.sink_chunks import plan_chunks, task_tag

NOW_MS = 1_764_000_000_000
SINK_TAG = task_tag("sink-1", "0123456789ab", 7, 3)
PROPERTIES = pa.map_(pa.string(), pa.string())


def generator() -> UniqueIdGenerator:
    return UniqueIdGenerator("10.1.2.3", 0x5EED)


def general(
    batch: pa.RecordBatch, topic: str | None, *, rows_max: int, bytes_max: int, prefix: str = ""
) -> list[PreparedSend]:
    ids = generator()
    messages = to_messages(batch, topic)
    chunks = plan_chunks(messages, Counter(), rows_max=rows_max, bytes_max=bytes_max, prefix=prefix)
    return [prepare_batch(chunk, ids, NOW_MS) for chunk in chunks]


def encoded(
    batch: pa.RecordBatch, topic: str | None, *, rows_max: int, bytes_max: int, prefix: str = ""
) -> list[PreparedSend] | None:
    sends = encode_rows(
        batch, topic, generator(), NOW_MS, rows_max=rows_max, bytes_max=bytes_max,
        sink_prefix=prefix,
    )  # fmt: skip
    return None if sends is None else list(sends)


texts = st.one_of(
    st.none(),
    st.just(""),
    st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"])),
)


@st.composite
def batches(draw: st.DrawFn) -> tuple[pa.RecordBatch, str | None, str | None]:
    """A batch, the sink's topic option, and the topic its rows go to (None: no topic)."""
    count = draw(st.integers(1, 40))
    bodies = draw(st.lists(st.binary(min_size=1, max_size=3000), min_size=count, max_size=count))
    body_type = draw(st.sampled_from([pa.binary(), pa.large_binary(), pa.string()]))
    if body_type == pa.string():
        bodies = [body.hex().encode() for body in bodies]
        values: list[object] = [body.decode() for body in bodies]
    else:
        values = list(bodies)
    columns = {"body": pa.array(values, body_type)}
    for name in ("keys", "tags"):
        if draw(st.booleans()):
            text_type = draw(st.sampled_from([pa.string(), pa.large_string()]))
            columns[name] = pa.array(
                draw(st.lists(texts, min_size=count, max_size=count)), text_type
            )
    default = draw(st.sampled_from(["Orders", None]))
    topic_column = draw(st.sampled_from(["none", "same", "nulls", "empty"]))
    goes_to = "Written" if topic_column == "same" else default
    if topic_column == "same":
        columns["topic"] = pa.array(["Written"] * count)
    elif topic_column == "nulls":
        columns["topic"] = pa.array([None] * count, pa.string())
    elif topic_column == "empty":
        columns["topic"] = pa.array([""] * count)
    if draw(st.booleans()):
        columns["properties"] = pa.array(
            draw(st.lists(st.sampled_from([None, []]), min_size=count, max_size=count)),
            PROPERTIES,
        )
    batch = pa.record_batch(list(columns.values()), names=list(columns))
    start = draw(st.integers(0, count - 1))
    return batch.slice(start), default, goes_to


@settings(max_examples=300, deadline=None)
@given(
    batches(),
    st.integers(1, 50),
    st.integers(1, 20_000),
    st.sampled_from(["", SINK_TAG]),
    st.sampled_from([None, 1, 5_000]),
)
def test_what_it_encodes_is_what_the_general_path_sends(
    drawn: tuple[pa.RecordBatch, str | None, str | None],
    rows_max: int,
    bytes_max: int,
    prefix: str,
    group_bytes: int | None,
) -> None:
    """For the batch writer, and for the streaming sink (each row tagged with its digest),
    with the entries made for all the rows at once or a few chunks at a time."""
    batch, topic, goes_to = drawn
    with pytest.MonkeyPatch.context() as patch:
        if group_bytes is not None:
            patch.setattr(batch_bodies, "_GROUP_BYTES", group_bytes)
        sends = encoded(batch, topic, rows_max=rows_max, bytes_max=bytes_max, prefix=prefix)
    if sends is None:
        # Left to the general path only for no topic, or a body longer than a chunk.
        longest = max(len(body) for body in batch.column("body").cast(pa.binary()).to_pylist())
        assert goes_to is None or longest > bytes_max
        return
    assert sends == general(batch, topic, rows_max=rows_max, bytes_max=bytes_max, prefix=prefix)
    assert sum(len(send.msg_ids) for send in sends) == batch.num_rows


def one(column: str, values: list[object], kind: pa.DataType | None = None) -> pa.RecordBatch:
    names = ["body", column] if column != "body" else ["body"]
    arrays = [pa.array([b"x"] * len(values))] if column != "body" else []
    return pa.record_batch([*arrays, pa.array(values, kind)], names=names)


@pytest.mark.parametrize(
    ("batch", "topic", "why"),
    [
        (one("body", [b"a", None]), "T", "null body"),
        (one("body", [b"a", b""]), "T", "empty body"),
        (one("body", [b"a", b"x" * 5_000]), "T", "a body over a chunk"),
        (one("keys", ["a", "b\x02c"]), "T", "a separator in keys"),
        (one("tags", ["a\x01b", None]), "T", "a separator in tags"),
        (one("keys", ["k" * 40_000]), "T", "keys over the properties limit"),
        (one("properties", [[("color", "red")]], PROPERTIES), "T", "user properties"),
        (one("topic", ["A", "B"]), "T", "two topics"),
        (one("topic", ["A", None]), "T", "a topic for some rows only"),
        (one("keys", ["a"]), None, "no topic"),
        (one("keys", ["a"]), "bad topic!", "a name RocketMQ refuses"),
        (one("keys", [1, 2], pa.int64()), "T", "keys not text"),
    ],
)
def test_anything_else_is_left_to_the_general_path(
    batch: pa.RecordBatch, topic: str | None, why: str
) -> None:
    assert encoded(batch, topic, rows_max=10, bytes_max=4096) is None, why


def test_the_general_path_words_what_the_encoder_leaves() -> None:
    with pytest.raises(ValueError, match="null body"):
        general(one("body", [b"a", None]), "T", rows_max=10, bytes_max=4096)
    with pytest.raises(MessageError, match="body is empty"):
        general(one("body", [b"a", b""]), "T", rows_max=10, bytes_max=4096)
    with pytest.raises(ValueError, match="no topic"):
        general(one("keys", ["a"]), None, rows_max=10, bytes_max=4096)


def test_an_oversized_batch_is_refused_as_the_general_path_refuses_it() -> None:
    batch = one("keys", ["k"] * 200)
    with pytest.raises(MessageError, match="over the 4000-byte limit"):
        list(
            encode_rows(  # type: ignore[union-attr]
                batch, "T", generator(), NOW_MS, rows_max=200, bytes_max=4096,
                max_message_bytes=4000,
            )
        )  # fmt: skip


def test_ids_continue_across_chunks_and_calls() -> None:
    ids = generator()
    batch = one("keys", ["a"] * 5)
    first = encode_rows(batch, "T", ids, NOW_MS, rows_max=2, bytes_max=4096)
    second = encode_rows(batch, "T", ids, NOW_MS, rows_max=5, bytes_max=4096)
    assert first is not None
    assert second is not None
    taken = [i for send in [*first, *second] for i in send.msg_ids]
    expected = generator()
    assert taken == [expected.next(NOW_MS) for _ in range(10)]
