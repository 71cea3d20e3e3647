"""The connector's offset rules (`pocketmq.spark.offsets`), without Spark or a broker: what the
user's startingOffsets/endingOffsets mean, how they become per-queue offsets, that an offset
always serializes to the same JSON (Spark compares offsets by their text), and how a micro-batch
is cut under maxMessagesPerTrigger."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client.message import MessageQueue
from pocketmq.spark.offsets import (
    EARLIEST,
    LATEST,
    OptionError,
    StartSpec,
    admit,
    canonical,
    parse_queue_key,
    parse_spec,
    queue_key,
    resolve,
)

# -- parse_spec ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("earliest", "earliest"),
        ("latest", "latest"),
        (" LATEST ", "latest"),
        ("Earliest", "earliest"),
    ],
)
def test_parse_spec_reads_earliest_and_latest_in_any_case(text: str, kind: str) -> None:
    assert parse_spec("startingOffsets", text, "latest") == StartSpec(kind)


def test_parse_spec_takes_the_default_when_the_option_is_absent() -> None:
    assert parse_spec("startingOffsets", None, "earliest") == StartSpec("earliest")
    assert parse_spec("endingOffsets", "", "latest") == StartSpec("latest")


def test_parse_spec_reads_digits_as_a_timestamp_in_ms() -> None:
    assert parse_spec("startingOffsets", "1700000000000", "latest") == StartSpec(
        "timestamp", timestamp_ms=1_700_000_000_000
    )


def test_parse_spec_reads_json_per_queue_offsets_as_queue_keys() -> None:
    spec = parse_spec(
        "startingOffsets",
        '{"orders": {"broker-a:0": 42, "broker-a:1": -2}, "pay/ments": {"broker-b:3": -1}}',
        "latest",
    )
    assert spec.kind == "json"
    assert spec.per_queue == {
        "orders/broker-a/0": 42,
        "orders/broker-a/1": EARLIEST,
        "pay/ments/broker-b/3": LATEST,
    }


def test_parse_spec_splits_the_broker_name_at_its_last_colon() -> None:
    spec = parse_spec("startingOffsets", '{"t": {"host:broker:7": 5}}', "latest")
    assert spec.per_queue == {"t/host:broker/7": 5}


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"orders": {"broker-a:0": 42}', "is not earliest, latest, a timestamp in ms, or JSON"),
        ("yesterday", "is not earliest, latest, a timestamp in ms, or JSON"),
        ("-5", "the JSON must be an object of topics"),
        ('["orders"]', "must be an object of topics"),
        ('{"orders": 42}', "'orders' must map 'broker:queueId' to an offset"),
        ('{"orders": {"broker-a": 42}}', "orders/broker-a=42: expected 'broker:queueId'"),
        ('{"orders": {"broker-a:x": 42}}', "expected 'broker:queueId'"),
        ('{"orders": {"broker-a:0": "42"}}', "expected 'broker:queueId'"),
        ('{"orders": {"broker-a:0": 4.5}}', "expected 'broker:queueId'"),
        ('{"orders": {"broker-a:0": true}}', "expected 'broker:queueId'"),
        ('{"orders": {"broker-a:0": -3}}', "-2 (earliest), -1 (latest) or >= 0"),
    ],
)
def test_parse_spec_rejects_what_it_cannot_use_naming_the_option(text: str, says: str) -> None:
    with pytest.raises(OptionError) as caught:
        parse_spec("startingOffsets", text, "latest")
    assert str(caught.value).startswith("startingOffsets: ")
    assert says in str(caught.value)


def test_queue_key_round_trips_topics_with_slashes() -> None:
    queue = MessageQueue("a/b/c", "broker-a", 12)
    assert queue_key(queue) == "a/b/c/broker-a/12"
    assert parse_queue_key(queue_key(queue)) == queue


# -- resolve -------------------------------------------------------------------------------------

Q0, Q1, Q2 = (MessageQueue("orders", "broker-a", n) for n in range(3))
BOUNDS = [(Q0, 10, 100), (Q1, 0, 50), (Q2, 5, 5)]


def _no_timestamps(queue: MessageQueue, timestamp_ms: int) -> int:
    raise AssertionError("only a timestamp spec looks offsets up by time")


def test_resolve_earliest_and_latest_take_each_queues_bounds() -> None:
    earliest = resolve(StartSpec("earliest"), BOUNDS, _no_timestamps, unnamed="latest")
    latest = resolve(StartSpec("latest"), BOUNDS, _no_timestamps, unnamed="earliest")
    assert earliest == {"orders/broker-a/0": 10, "orders/broker-a/1": 0, "orders/broker-a/2": 5}
    assert latest == {"orders/broker-a/0": 100, "orders/broker-a/1": 50, "orders/broker-a/2": 5}


@pytest.mark.parametrize(("unnamed", "q1", "q2"), [("earliest", 0, 5), ("latest", 50, 5)])
def test_resolve_json_gives_queues_it_does_not_name_the_unnamed_default(
    unnamed: str, q1: int, q2: int
) -> None:
    spec = parse_spec("startingOffsets", '{"orders": {"broker-a:0": 42}}', "latest")
    resolved = resolve(spec, BOUNDS, _no_timestamps, unnamed=unnamed)
    assert resolved == {"orders/broker-a/0": 42, "orders/broker-a/1": q1, "orders/broker-a/2": q2}


def test_resolve_json_minus_two_and_minus_one_mean_earliest_and_latest() -> None:
    spec = parse_spec(
        "startingOffsets", '{"orders": {"broker-a:0": -2, "broker-a:1": -1}}', "latest"
    )
    resolved = resolve(spec, BOUNDS, _no_timestamps, unnamed="earliest")
    assert resolved == {"orders/broker-a/0": 10, "orders/broker-a/1": 50, "orders/broker-a/2": 5}


def test_resolve_json_ignores_queues_that_do_not_exist() -> None:
    spec = parse_spec("startingOffsets", '{"orders": {"broker-z:9": 3}}', "latest")
    resolved = resolve(spec, BOUNDS, _no_timestamps, unnamed="earliest")
    assert "orders/broker-z/9" not in resolved


def test_resolve_timestamp_clamps_the_brokers_answer_into_the_queues_bounds() -> None:
    answers = {Q0: 3, Q1: 20, Q2: 900}  # below min, inside, beyond max
    asked: list[tuple[MessageQueue, int]] = []

    def offset_at(queue: MessageQueue, timestamp_ms: int) -> int:
        asked.append((queue, timestamp_ms))
        return answers[queue]

    resolved = resolve(StartSpec("timestamp", timestamp_ms=1234), BOUNDS, offset_at, unnamed="x")
    assert resolved == {"orders/broker-a/0": 10, "orders/broker-a/1": 20, "orders/broker-a/2": 5}
    assert asked == [(Q0, 1234), (Q1, 1234), (Q2, 1234)]


def test_resolve_returns_keys_in_sorted_order_whatever_order_the_queues_come_in() -> None:
    resolved = resolve(StartSpec("latest"), list(reversed(BOUNDS)), _no_timestamps, unnamed="x")
    assert list(resolved) == sorted(resolved)


# -- canonical -----------------------------------------------------------------------------------

offset_maps = st.dictionaries(
    st.text(alphabet="ab/-:01", min_size=1, max_size=8), st.integers(0, 2**63 - 1), max_size=12
)


@given(offset_maps, st.randoms(use_true_random=False))
def test_canonical_serializes_equal_offsets_identically_in_any_insertion_order(
    offsets: dict[str, int], rng: random.Random
) -> None:
    items = list(offsets.items())
    rng.shuffle(items)
    shuffled = dict(items)
    assert json.dumps(canonical(shuffled)) == json.dumps(canonical(offsets))
    assert canonical(shuffled) == offsets
    assert list(canonical(shuffled)) == sorted(offsets)


def test_canonical_survives_a_json_round_trip_as_spark_stores_it() -> None:
    offsets = canonical({"t/b/10": 7, "t/b/2": 3, "t/b/1": 0})
    assert json.dumps(canonical(json.loads(json.dumps(offsets)))) == json.dumps(offsets)


# -- admit ---------------------------------------------------------------------------------------

KEYS = [f"t/broker-a/{n}" for n in range(5)] + ["u/broker-b/0"]
positions = st.dictionaries(st.sampled_from(KEYS), st.integers(0, 400), max_size=len(KEYS))
limits = st.none() | st.integers(1, 1500)


def _taken(start: dict[str, int], end: dict[str, int]) -> dict[str, int]:
    return {key: end[key] - start.get(key, 0) for key in end}


@given(positions, positions, limits)
def test_admit_never_exceeds_max_rows_in_total(
    start: dict[str, int], latest: dict[str, int], max_rows: int | None
) -> None:
    end = admit(start, latest, max_rows)
    if max_rows is not None:
        assert sum(_taken(start, end).values()) <= max_rows


@given(positions, positions, limits)
def test_admit_never_goes_backwards_and_keeps_unlisted_queues(
    start: dict[str, int], latest: dict[str, int], max_rows: int | None
) -> None:
    end = admit(start, latest, max_rows)
    for key, offset in start.items():
        assert end[key] >= offset
        if key not in latest:
            assert end[key] == offset, "a queue no longer listed keeps its position"


@given(positions, positions, limits)
def test_admit_never_goes_beyond_latest(
    start: dict[str, int], latest: dict[str, int], max_rows: int | None
) -> None:
    end = admit(start, latest, max_rows)
    for key, offset in latest.items():
        assert end[key] <= max(offset, start.get(key, 0))
    assert set(end) == set(start) | set(latest)


@given(positions, positions)
def test_admit_takes_everything_without_a_limit(
    start: dict[str, int], latest: dict[str, int]
) -> None:
    end = admit(start, latest, None)
    for key, offset in latest.items():
        assert end[key] == max(offset, start.get(key, 0))


@given(positions, st.integers(1, 400), limits)
def test_admit_reads_a_new_queue_from_offset_zero(
    start: dict[str, int], new_max: int, max_rows: int | None
) -> None:
    start = {k: v for k, v in start.items() if k != "u/broker-b/0"}
    latest = {**start, "u/broker-b/0": new_max}  # the only queue with anything new
    end = admit(start, latest, max_rows)
    assert end["u/broker-b/0"] == (new_max if max_rows is None else min(new_max, max_rows))
    assert _taken(start, end)["u/broker-b/0"] == end["u/broker-b/0"], "counted from 0"


@given(positions, positions, st.integers(1, 1500))
def test_admit_shares_fairly_and_wastes_no_budget(
    start: dict[str, int], latest: dict[str, int], max_rows: int
) -> None:
    end = admit(start, latest, max_rows)
    available = {
        key: offset - start.get(key, 0)
        for key, offset in latest.items()
        if offset > start.get(key, 0)
    }
    taken = _taken(start, end)
    if available:
        fair = max_rows // len(available)
        for key, has in available.items():
            assert taken[key] >= min(has, fair), f"{key} got less than an equal share"
    assert sum(taken.values()) == min(max_rows, sum(available.values())), "budget left unused"


@given(positions, positions, limits)
def test_admit_returns_canonical_offsets(
    start: dict[str, int], latest: dict[str, int], max_rows: int | None
) -> None:
    end = admit(start, latest, max_rows)
    assert list(end) == sorted(end)
    assert json.dumps(end) == json.dumps(admit(dict(reversed(start.items())), latest, max_rows))


def test_admit_splits_an_uneven_backlog() -> None:
    start = {"t/b/0": 0, "t/b/1": 0, "t/b/2": 0}
    latest = {"t/b/0": 1000, "t/b/1": 10, "t/b/2": 1000}
    assert admit(start, latest, 100) == {"t/b/0": 45, "t/b/1": 10, "t/b/2": 45}
    assert admit(start, latest, 2) == {"t/b/0": 1, "t/b/1": 1, "t/b/2": 0}


def test_admit_at_latest_returns_start_so_available_now_ends() -> None:
    start = {"t/b/0": 7, "t/b/1": 3}
    assert admit(start, dict(start), 10) == start
    assert json.dumps(admit(start, dict(reversed(start.items())), None)) == json.dumps(start)
