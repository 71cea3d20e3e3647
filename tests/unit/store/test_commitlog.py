"""CommitLog: record layout on disk, roll-over with the blank filler, limits, raw appends."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from pocketmq.common.constants import BLANK_MAGIC_CODE
from pocketmq.common.stored_message import decode_record, peek_size_and_magic
from pocketmq.runtime.clock import ManualClock
from pocketmq.store import mapped_file
from pocketmq.store.api import PutStatus
from pocketmq.store.commitlog import CommitLog
from pocketmq.testing.simulated_disk import SimulatedDisk
from tests.unit.store.conftest import message

FILE_SIZE = 4096


def make_log(directory: Path, clock: ManualClock) -> CommitLog:
    commit_log = CommitLog(
        directory,
        file_size=FILE_SIZE,
        clock=clock,
        store_host=("192.168.0.9", 10911),
        max_message_size=1024,
        preallocate=False,
    )
    commit_log.files.load()
    return commit_log


def test_append_writes_rocketmq_record_with_offsets_and_store_fields(
    tmp_path: Path, clock: ManualClock
) -> None:
    commit_log = make_log(tmp_path, clock)
    first = commit_log.append([message(body=b"a" * 10, tags="TagA")])
    second = commit_log.append([message(body=b"b" * 20)])
    assert first.ok
    assert second.ok
    assert first.physical_offsets == [0]
    assert second.physical_offsets == [first.wrote_bytes]
    assert (first.queue_offset, second.queue_offset) == (0, 1)
    record = commit_log.read_record(second.physical_offsets[0])
    assert record is not None
    decoded = decode_record(record)
    assert decoded.body == b"b" * 20
    assert decoded.physical_offset == first.wrote_bytes
    assert decoded.queue_offset == 1
    assert decoded.store_timestamp == clock.now_ms()
    assert decoded.store_host == ("192.168.0.9", 10911)
    assert decoded.born_host == ("10.0.0.1", 5555)


def test_batch_gets_consecutive_queue_offsets(tmp_path: Path, clock: ManualClock) -> None:
    commit_log = make_log(tmp_path, clock)
    batch = [message(body=bytes([i]) * 5, queue_id=3) for i in range(4)]
    result = commit_log.append(batch)
    assert result.queue_offset == 0
    assert [m.queue_offset for m in batch] == [0, 1, 2, 3]
    offsets = result.physical_offsets
    assert offsets == sorted(offsets)
    assert len(set(offsets)) == 4
    assert commit_log.queue_offsets.next_offset("TopicTest", 3) == 4


def test_record_that_does_not_fit_moves_to_next_file_after_blank(
    tmp_path: Path, clock: ManualClock
) -> None:
    commit_log = make_log(tmp_path, clock)
    results = [commit_log.append([message(body=b"x" * 950)]) for _ in range(5)]
    assert all(r.ok for r in results)
    # Records of ~1050 bytes: three fit in 4 KiB, the fourth starts the second file.
    assert results[3].physical_offsets[0] == FILE_SIZE
    first_file = commit_log.files.files[0]
    blank_at = results[2].physical_offsets[0] + results[2].wrote_bytes
    size, magic = peek_size_and_magic(first_file.buffer, blank_at)
    assert magic == BLANK_MAGIC_CODE
    assert blank_at + size == FILE_SIZE
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000000",
        "00000000000000004096",
    ]


def test_oversized_body_is_refused_with_the_limit_named(tmp_path: Path, clock: ManualClock) -> None:
    commit_log = make_log(tmp_path, clock)
    result = commit_log.append([message(body=b"x" * 1025)])
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    assert "maxMessageSize" in result.remark
    assert commit_log.max_offset == 0
    assert commit_log.queue_offsets.next_offset("TopicTest", 0) == 0


def test_oversized_properties_are_refused(tmp_path: Path, clock: ManualClock) -> None:
    commit_log = make_log(tmp_path, clock)
    big = message()
    big.properties = "K\x01" + "v" * 40_000 + "\x02"
    assert commit_log.append([big]).status is PutStatus.PROPERTIES_SIZE_EXCEEDED


def test_append_raw_copies_another_log_byte_for_byte(tmp_path: Path, clock: ManualClock) -> None:
    source = make_log(tmp_path / "a", clock)
    for _ in range(9):
        source.append([message(body=b"y" * 700)])
    replica = make_log(tmp_path / "b", clock)
    offset = 0
    while offset < source.max_offset:
        chunk = source.read(offset, min(1000, source.max_offset - offset))
        if chunk is None:  # the rest of this file
            mapped = source.files.find(offset)
            assert mapped is not None
            chunk = mapped.read(offset - mapped.file_from_offset, mapped.end_offset - offset)
        replica.append_raw(offset, chunk)
        offset += len(chunk)
    assert replica.max_offset == source.max_offset
    for a, b in zip(source.files, replica.files, strict=True):
        assert a.read(0, a.wrote_position) == b.read(0, b.wrote_position)


def test_append_raw_refuses_a_gap(tmp_path: Path, clock: ManualClock) -> None:
    commit_log = make_log(tmp_path, clock)
    commit_log.append([message()])
    with pytest.raises(ValueError, match="does not continue"):
        commit_log.append_raw(commit_log.max_offset + 5, b"zzz")


def test_truncate_zeroes_cut_bytes_and_later_files(tmp_path: Path, clock: ManualClock) -> None:
    commit_log = make_log(tmp_path, clock)
    results = [commit_log.append([message(body=b"z" * 900)]) for _ in range(6)]
    cut = results[1].physical_offsets[0]
    commit_log.truncate(cut)
    assert commit_log.max_offset == cut
    assert len(commit_log.files.files) == 1
    mapped = commit_log.files.files[0]
    assert mapped.read(cut, FILE_SIZE - cut) == bytes(FILE_SIZE - cut)
    again = commit_log.append([message(body=b"n")])
    assert again.physical_offsets == [cut]


def test_empty_batch_is_refused(tmp_path: Path, clock: ManualClock) -> None:
    commit_log = make_log(tmp_path, clock)
    assert commit_log.append([]).status is PutStatus.MESSAGE_ILLEGAL
    assert commit_log.max_offset == 0


def test_the_pages_ahead_of_the_writer_are_read_in_and_the_next_file_from_its_start(
    clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends never wait on a page fault that makes a page: the pages after the write
    position are read in ahead (on a thread), half a window before the writer needs them."""
    monkeypatch.setattr(mapped_file, "WARM_AHEAD_BYTES", 2048)
    disk = SimulatedDisk()
    commit_log = CommitLog(
        Path("/store/commitlog"),
        file_size=FILE_SIZE,
        clock=clock,
        store_host=("192.168.0.9", 10911),
        max_message_size=1024,
        preallocate=True,
        fs=disk,
    )
    commit_log.files.load()
    for _ in range(16):  # records of about 300 bytes: the log rolls into its second file
        assert commit_log.append([message(body=b"x" * 200)]).ok
    commit_log.files.close()  # waits for the reads in flight
    by_file: dict[str, list[tuple[int, int]]] = {}
    for path, start, end in disk.warmed:
        by_file.setdefault(path.name, []).append((start, end))
    assert sorted(by_file) == ["00000000000000000000", "00000000000000004096"]
    for ranges in by_file.values():
        assert ranges[0][0] == 0, "a file is read in from where its writer starts"
        for (_, end), (start, _) in itertools.pairwise(ranges):
            assert start == end, "each read continues the last: nothing twice, no gap"
        assert all(0 <= s < e <= FILE_SIZE for s, e in ranges)
    first = by_file["00000000000000000000"]
    assert first[-1][1] == FILE_SIZE, "read in up to the end of the file the writer filled"
