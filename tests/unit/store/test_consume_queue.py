"""ConsumeQueue: 20-byte entries across files, idempotent puts, recovery, truncation, retention."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pocketmq.store.consume_queue import ConsumeQueue, _written_length

FILE_SIZE = 20 * 4  # four entries a file


def make_queue(directory: Path) -> ConsumeQueue:
    queue = ConsumeQueue(directory, "T", 0, file_size=FILE_SIZE)
    queue.load()
    queue.recover()
    return queue


def fill(queue: ConsumeQueue, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        queue.put(i, 1000 + i * 100, 100, i * 7)


def test_entries_are_rocketmq_20_byte_records_spread_over_files(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 10)
    assert (queue.min_offset, queue.max_offset) == (0, 10)
    assert len(queue.files.files) == 3
    raw = (tmp_path / "00000000000000000080").read_bytes()
    assert struct.unpack(">qiq", raw[:20]) == (1000 + 4 * 100, 100, 28)
    assert queue.entry(9) == (1900, 100, 63)
    assert queue.entry(10) is None
    got = []
    offset = 3
    while offset < queue.max_offset:
        chunk = list(queue.entries(offset, 100))
        got.extend(chunk)
        offset = chunk[-1][0] + 1
    assert [e[0] for e in got] == list(range(3, 10))


def test_put_of_existing_entry_is_a_no_op(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 5)
    queue.put(2, 999_999, 1, 1)
    assert queue.entry(2) == (1200, 100, 14)
    assert queue.max_offset == 5


def test_gap_is_filled_with_blank_entries(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 2)
    queue.put(5, 5000, 10, 0)
    assert queue.max_offset == 6
    assert queue.entry(3) == (0, 0, 0)
    assert queue.entry(5) == (5000, 10, 0)


def test_recover_finds_the_last_entry_after_reopen(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 6)
    queue.close()
    reopened = make_queue(tmp_path)
    assert reopened.max_offset == 6
    assert reopened.max_physical_end == 1000 + 5 * 100 + 100
    reopened.put(6, 1600, 100, 0)
    assert reopened.max_offset == 7


def test_recover_of_exactly_full_files(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 8)
    queue.close()
    reopened = make_queue(tmp_path)
    assert reopened.max_offset == 8
    assert reopened.max_physical_end == 1800


def test_truncate_to_physical_drops_entries_past_the_commit_log(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 10)
    queue.truncate_to_physical(1000 + 6 * 100 + 50)  # entry 6 ends at 1700 > 1650
    assert queue.max_offset == 6
    assert queue.max_physical_end == 1600
    fill(queue, 2, start=6)
    assert queue.entry(7) == (1700, 100, 49)


def test_delete_expired_moves_min_offset_to_first_backed_entry(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    fill(queue, 10)
    deleted = queue.delete_expired(commit_log_min_offset=1000 + 5 * 100)
    assert deleted == 1  # entries 0-3 all point below 1500
    assert queue.min_offset == 5
    assert queue.max_offset == 10


def test_queue_starting_mid_stream(tmp_path: Path) -> None:
    queue = make_queue(tmp_path)
    queue.put(6, 6000, 10, 0)
    assert (queue.min_offset, queue.max_offset) == (6, 7)  # the blanks before 6 are not entries


@pytest.mark.parametrize(
    "written",
    [
        [],
        [(0, 1)],
        [(5, 1)],
        [(64 * 1024 - 1, 1)],
        [(64 * 1024, 1)],
        [(0, 20), (200_000, 20)],  # a gap of zeros wider than a chunk before the last entry
        [(300_000 - 1, 1)],
        [(0, 300_000)],
    ],
)
def test_the_written_length_is_just_past_the_last_byte_that_is_not_zero(
    written: list[tuple[int, int]],
) -> None:
    buffer = bytearray(300_000)
    for start, size in written:
        buffer[start : start + size] = b"\x07" * size
    assert _written_length(buffer) == len(bytes(buffer).rstrip(b"\0"))
