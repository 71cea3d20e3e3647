"""Queue entries written in runs (`ConsumeQueue.put_run`, what dispatch does) are the entries
written one by one: across file ends, gaps, replays of entries already there, records that
take no entry (prepared and rolled-back transactions) and several queues."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pocketmq.common.constants import TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE
from pocketmq.store.consume_queue import UNIT
from pocketmq.store.consume_queue_table import ConsumeQueueTable
from pocketmq.store.dispatch import DispatchRequest, describe_record

FILE_ENTRIES = 7
STORED_MS = 1_700_000_000_000

# Each step: (queue, how far its next offset moves: 1 the usual, 0 a replay, 2+ a gap, -3 a
# replay further back), and the record's transaction type.
STEPS = st.lists(
    st.tuples(
        st.sampled_from([("TopicA", 0), ("TopicA", 1), ("TopicB", 0)]),
        st.sampled_from([1, 1, 1, 1, 1, 0, 2, 5, -3]),
        st.sampled_from([0, 0, 0, 0, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE]),
    ),
    min_size=1,
    max_size=120,
)


def requests_of(steps: list[tuple[tuple[str, int], int, int]]) -> list[DispatchRequest]:
    next_offset: dict[tuple[str, int], int] = {}
    made = []
    for number, ((topic, queue_id), move, sys_flag) in enumerate(steps):
        offset = max(0, next_offset.get((topic, queue_id), 0) + move - 1)
        next_offset[(topic, queue_id)] = offset + 1
        size, tags = 90 + number % 7, f"TAGS\x01t{number % 3}\x02"
        physical = number * 100
        made.append(
            describe_record(topic, queue_id, physical, size, STORED_MS, offset, sys_flag, tags)
        )
    return made


def contents(table: ConsumeQueueTable) -> dict[tuple[str, int], object]:
    found: dict[tuple[str, int], object] = {}
    for key, queue in sorted(table.queues.items()):
        entries = [queue.entry(n) for n in range(queue.min_offset, queue.max_offset)]
        found[key] = (queue.min_offset, queue.max_offset, queue.max_physical_end, entries)
    return found


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS, st.integers(1, 40))
def test_runs_write_what_single_puts_write(
    tmp_path_factory: object, steps: list[tuple[tuple[str, int], int, int]], slice_size: int
) -> None:
    root = Path(tmp_path_factory.mktemp("queues"))  # type: ignore[attr-defined]
    in_runs = ConsumeQueueTable(root / "runs", FILE_ENTRIES * UNIT)
    one_by_one = ConsumeQueueTable(root / "single", FILE_ENTRIES * UNIT)
    try:
        requests = requests_of(steps)
        for start in range(0, len(requests), slice_size):
            in_runs.dispatch_many(requests[start : start + slice_size])
        for request in requests:
            one_by_one.dispatch(request)
        assert contents(in_runs) == contents(one_by_one)
    finally:
        in_runs.close()
        one_by_one.close()
