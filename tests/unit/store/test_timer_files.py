"""The timer store's files on their own: log entries, wheel slots, checkpoint copies."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.store.timer.checkpoint import TimerCheckpoint, TimerProgress
from pocketmq.store.timer.log import (
    ENTRY_SIZE,
    FLAG_DELETE,
    FLAG_ROLL,
    TimerEntry,
    TimerLog,
    decode_entry,
    encode_entry,
)
from pocketmq.store.timer.recovery import collect_chain, rebuild_wheel
from pocketmq.store.timer.wheel import NO_POSITION, TimerWheel, WheelGeometryError

longs = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)


def entry(
    time_ms: int = 5_000, *, prev: int = -1, queue_offset: int = 0, flags: int = 0
) -> TimerEntry:
    return TimerEntry(
        flags=flags,
        prev_pos=prev,
        time_ms=time_ms,
        commit_offset=1000 + queue_offset,
        commit_size=200,
        queue_offset=queue_offset,
        key_hash=queue_offset * 7,
    )


def queue_offsets(timer_log: TimerLog, positions: Iterable[int]) -> list[int]:
    """The queue offsets of the entries at `positions`, each of which must be readable."""
    found = []
    for position in positions:
        read = timer_log.read(position)
        assert read is not None, position
        found.append(read.queue_offset)
    return found


# -- log entries ---------------------------------------------------------------------------
@given(
    flags=st.integers(0, 7),
    prev=longs,
    time_ms=longs,
    commit_offset=longs,
    commit_size=st.integers(-(1 << 31), (1 << 31) - 1),
    queue_offset=longs,
    key_hash=st.integers(0, (1 << 32) - 1),
)
def test_an_entry_decodes_to_what_was_encoded(
    flags: int,
    prev: int,
    time_ms: int,
    commit_offset: int,
    commit_size: int,
    queue_offset: int,
    key_hash: int,
) -> None:
    original = TimerEntry(flags, prev, time_ms, commit_offset, commit_size, queue_offset, key_hash)
    data = encode_entry(original)
    assert len(data) == ENTRY_SIZE
    assert decode_entry(data) == original


@pytest.mark.parametrize("index", range(ENTRY_SIZE))
def test_an_entry_with_any_changed_byte_does_not_decode(index: int) -> None:
    data = bytearray(encode_entry(entry()))
    data[index] ^= 0x01
    assert decode_entry(bytes(data)) is None


def test_zero_bytes_are_no_entry() -> None:
    assert decode_entry(bytes(ENTRY_SIZE)) is None


def test_entries_never_span_files_and_read_back_by_position(tmp_path: Path) -> None:
    # 3 entries fit a 160-byte file; its last 16 bytes stay unused.
    timer_log = TimerLog(tmp_path / "log", 160)
    timer_log.load()
    positions = [timer_log.append(entry(queue_offset=i)) for i in range(7)]
    assert positions == [0, 48, 96, 160, 208, 256, 320]
    assert queue_offsets(timer_log, positions) == list(range(7))
    assert timer_log.read(144) is None  # the unused tail
    assert timer_log.read(368) is None  # past the end
    assert timer_log.file_count() == 3
    timer_log.close()


def test_a_torn_last_entry_is_cut_and_later_stale_entries_are_zeroed(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    timer_log = TimerLog(directory, 48 * 10)
    timer_log.load()
    for i in range(5):
        timer_log.append(entry(queue_offset=i))
    mapped = timer_log.files.files[0]
    mapped.buffer[2 * ENTRY_SIZE + 5] ^= 0xFF  # entry 2 torn; 3 and 4 are stale after it
    timer_log.close()

    reopened = TimerLog(directory, 48 * 10)
    reopened.load()
    assert reopened.recover_end() == 2 * ENTRY_SIZE
    assert [e.queue_offset for _, e in reopened.scan(0)] == [0, 1]
    assert reopened.append(entry(queue_offset=9)) == 2 * ENTRY_SIZE
    reopened.close()
    again = TimerLog(directory, 48 * 10)
    again.load()
    # Were entries 3 and 4 still there, a scan would take them as following the new one.
    assert again.recover_end() == 3 * ENTRY_SIZE
    assert [e.queue_offset for _, e in again.scan(0)] == [0, 1, 9]
    again.close()


def test_the_end_recorded_at_a_clean_stop_is_taken_without_a_scan(tmp_path: Path) -> None:
    timer_log = TimerLog(tmp_path / "log", 160)
    timer_log.load()
    for i in range(4):
        timer_log.append(entry(queue_offset=i))
    end = timer_log.end_position
    timer_log.close()
    reopened = TimerLog(tmp_path / "log", 160)
    reopened.load()
    assert not reopened.set_end(end + 1)
    assert reopened.set_end(end)
    assert reopened.append(entry(queue_offset=4)) == end
    reopened.close()


# -- wheel ---------------------------------------------------------------------------------
def test_a_slot_reads_back_and_an_older_turn_of_the_wheel_reads_as_empty(tmp_path: Path) -> None:
    wheel = TimerWheel(tmp_path / "wheel", slot_count=10, precision_ms=1000)
    assert wheel.created
    wheel.put(7_000, 48, 96, 2)
    slot = wheel.get(7_000)
    assert (slot.first_pos, slot.last_pos, slot.count, slot.empty) == (48, 96, 2, False)
    later_turn = wheel.get(17_000)  # same index, another time
    assert later_turn.empty
    assert later_turn.last_pos == NO_POSITION
    assert wheel.raw_time(17_000) == 7_000
    assert wheel.slot_time(7_999) == 7_000
    wheel.close()
    reopened = TimerWheel(tmp_path / "wheel", slot_count=10, precision_ms=1000)
    assert not reopened.created
    assert reopened.get(7_000).last_pos == 96
    reopened.close()


def test_a_wheel_file_of_another_size_is_refused_and_recreate_empties_it(tmp_path: Path) -> None:
    wheel = TimerWheel(tmp_path / "wheel", slot_count=10, precision_ms=1000)
    wheel.put(3_000, 0, 0, 1)
    wheel.close()
    with pytest.raises(WheelGeometryError, match="320 bytes, expected 640"):
        TimerWheel(tmp_path / "wheel", slot_count=20, precision_ms=1000)
    fresh = TimerWheel.recreate(tmp_path / "wheel", slot_count=20, precision_ms=1000)
    assert fresh.get(3_000).empty
    fresh.close()


# -- chains and rebuild --------------------------------------------------------------------
def _linked_log(tmp_path: Path, times: list[int]) -> tuple[TimerLog, TimerWheel]:
    timer_log = TimerLog(tmp_path / "log", 48 * 100)
    timer_log.load()
    wheel = TimerWheel(tmp_path / "wheel", slot_count=100, precision_ms=1000)
    for queue_offset, time_ms in enumerate(times):
        slot = wheel.get(time_ms)
        position = timer_log.append(entry(time_ms, prev=slot.last_pos, queue_offset=queue_offset))
        wheel.link(slot, position, delete_marker=False)
    return timer_log, wheel


def test_a_chain_lists_its_slots_entries_in_log_order(tmp_path: Path) -> None:
    timer_log, wheel = _linked_log(tmp_path, [5_000, 6_000, 5_000, 5_000, 6_000])
    chain = collect_chain(timer_log, wheel.get(5_000))
    assert queue_offsets(timer_log, chain.positions) == [0, 2, 3]
    assert wheel.get(5_000).count == 3
    timer_log.close()
    wheel.close()


def test_a_chain_stops_at_an_entry_of_another_slot(tmp_path: Path) -> None:
    timer_log, wheel = _linked_log(tmp_path, [5_000, 6_000, 5_000])
    second = timer_log.read(96)
    assert second is not None
    timer_log.rewrite(96, TimerEntry(0, 48, 5_000, 1, 1, 2, 0))  # points into slot 6_000
    chain = collect_chain(timer_log, wheel.get(5_000))
    assert list(chain.positions) == [96]
    timer_log.close()
    wheel.close()


def test_a_rebuild_links_undelivered_entries_and_repairs_wrong_pointers(tmp_path: Path) -> None:
    timer_log, wheel = _linked_log(tmp_path, [4_000, 5_000, 6_000, 5_000, 5_000])
    # Damage: entry 3 claims no predecessor, the wheel is lost.
    third = timer_log.read(3 * ENTRY_SIZE)
    assert third is not None
    timer_log.rewrite(3 * ENTRY_SIZE, TimerEntry(0, -1, 5_000, 1003, 200, 3, 21))
    wheel.close()
    fresh = TimerWheel.recreate(tmp_path / "wheel", slot_count=100, precision_ms=1000)
    result = rebuild_wheel(timer_log, fresh, read_time_ms=5_000)
    assert (result.entries, result.linked, result.pending) == (5, 4, 4)
    assert result.relinked == 1
    assert result.max_queue_offset == 4
    chain = collect_chain(timer_log, fresh.get(5_000))
    assert queue_offsets(timer_log, chain.positions) == [1, 3, 4]
    assert fresh.get(4_000).empty  # delivered before the stop
    timer_log.close()
    fresh.close()


def test_a_rebuild_rolls_entries_beyond_a_smaller_wheel(tmp_path: Path) -> None:
    timer_log, wheel = _linked_log(tmp_path, [5_000, 90_000])
    wheel.close()
    small = TimerWheel.recreate(tmp_path / "wheel", slot_count=10, precision_ms=1000)
    result = rebuild_wheel(timer_log, small, read_time_ms=5_000)
    assert result.rerolled == 1
    moved = timer_log.read(ENTRY_SIZE)
    assert moved is not None
    assert (moved.time_ms, bool(moved.flags & FLAG_ROLL)) == (14_000, True)
    assert small.get(14_000).last_pos == ENTRY_SIZE
    timer_log.close()
    small.close()


def test_delete_markers_are_collected_by_key_hash(tmp_path: Path) -> None:
    timer_log = TimerLog(tmp_path / "log", 48 * 100)
    timer_log.load()
    wheel = TimerWheel(tmp_path / "wheel", slot_count=100, precision_ms=1000)
    for queue_offset, flags in enumerate([0, FLAG_DELETE]):
        slot = wheel.get(5_000)
        marker = TimerEntry(flags, slot.last_pos, 5_000, 700 + queue_offset, 90, queue_offset, 42)
        wheel.link(slot, timer_log.append(marker), delete_marker=bool(flags))
    chain = collect_chain(timer_log, wheel.get(5_000))
    assert chain.deletes == {42: [701]}
    assert wheel.get(5_000).count == 0  # one timer, one marker
    timer_log.close()
    wheel.close()


# -- checkpoint ----------------------------------------------------------------------------
def test_a_new_checkpoint_has_nothing_and_a_saved_one_reads_back(tmp_path: Path) -> None:
    checkpoint = TimerCheckpoint(tmp_path / "checkpoint")
    assert not checkpoint.found
    progress = TimerProgress(7, 9_000, 2, 480, 11, 1000, 360, clean=True)
    checkpoint.save(progress)
    checkpoint.update(enqueue_offset=8)
    checkpoint.close()
    reopened = TimerCheckpoint(tmp_path / "checkpoint")
    assert reopened.found
    assert reopened.progress == TimerProgress(8, 9_000, 2, 480, 11, 1000, 360, clean=True)
    reopened.close()


def test_a_torn_save_leaves_the_previous_copy(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    checkpoint = TimerCheckpoint(path)
    checkpoint.save(TimerProgress(enqueue_offset=1))
    checkpoint.save(TimerProgress(enqueue_offset=2))  # the second copy, at byte 128
    checkpoint.close()
    data = bytearray(path.read_bytes())
    data[128 + 20] ^= 0xFF
    path.write_bytes(bytes(data))
    reopened = TimerCheckpoint(path)
    assert reopened.progress.enqueue_offset == 1
    reopened.save(TimerProgress(enqueue_offset=3))  # overwrites the torn copy
    reopened.close()
    last = TimerCheckpoint(path)
    assert last.progress.enqueue_offset == 3
    last.close()
