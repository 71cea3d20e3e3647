"""Retention with tiny files and an injected clock: expiry, deleteWhen, disk pressure."""

from __future__ import annotations

import os
from pathlib import Path

from pocketmq.common.stored_message import decode_record
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetStatus
from pocketmq.store.message_store import MessageStore
from pocketmq.store.retention import RetentionPolicy, parse_delete_when
from tests.unit.store.conftest import message, small_config

HOUR_MS = 3_600_000


def age_files(store: MessageStore, now_ms: int) -> None:
    """Sets every CommitLog file's mtime to `now_ms`, as if written then."""
    for mapped in store.commit_log.files.files:
        os.utime(mapped.path, ns=(now_ms * 1_000_000, now_ms * 1_000_000))


def make_store(
    tmp_path: Path, clock: ManualClock, disk: list[float], hour: list[int]
) -> MessageStore:
    store = MessageStore(
        small_config(tmp_path, file_reserved_time_hours=48, delete_when="04;05"),
        clock=clock,
        disk_usage=lambda: disk[0],
    )
    store.retention = RetentionPolicy(
        clock=clock,
        file_reserved_time_hours=48,
        delete_when="04;05",
        disk_max_used_space_ratio=75,
        disk_usage=lambda: disk[0],
        local_hour=lambda _now: hour[0],
    )
    store.load()
    return store


def fill(store: MessageStore, count: int) -> None:
    for i in range(count):
        assert store.put_messages_now([message(body=i.to_bytes(4, "big") * 250)]).ok


def test_expired_files_go_only_at_delete_when_hours(tmp_path: Path) -> None:
    clock = ManualClock(now_ms=1_800_000_000_000)
    disk, hour = [10.0], [12]
    store = make_store(tmp_path, clock, disk, hour)
    fill(store, 200)
    files_before = len(store.commit_log.files.files)
    assert files_before >= 4
    age_files(store, clock.now_ms())
    clock.advance(49 * 3600)
    assert store.clean_expired_files() is None  # 12:00 is not a deleteWhen hour
    hour[0] = 4
    result = store.clean_expired_files()
    assert result is not None
    assert result.commit_log_files == files_before - 1  # never the last file
    assert len(store.commit_log.files.files) == 1
    store.close()


def test_young_files_stay_at_delete_when_hours(tmp_path: Path) -> None:
    clock = ManualClock(now_ms=1_800_000_000_000)
    store = make_store(tmp_path, clock, [10.0], [4])
    fill(store, 200)
    age_files(store, clock.now_ms())
    clock.advance(47 * 3600)
    result = store.clean_expired_files()
    assert result is not None
    assert result.commit_log_files == 0
    store.close()


def test_queue_and_offsets_follow_the_commit_log_min_offset(tmp_path: Path) -> None:
    clock = ManualClock(now_ms=1_800_000_000_000)
    store = make_store(tmp_path, clock, [10.0], [4])
    fill(store, 200)
    max_before = store.get_max_offset_in_queue("TopicTest", 0)
    age_files(store, clock.now_ms())
    clock.advance(49 * 3600)
    store.clean_expired_files()
    min_offset = store.get_min_offset_in_queue("TopicTest", 0)
    assert min_offset > 0
    assert store.get_max_offset_in_queue("TopicTest", 0) == max_before
    too_small = store.get_message("TopicTest", 0, 0, 10)
    assert too_small.status is GetStatus.OFFSET_TOO_SMALL
    assert too_small.next_begin_offset == min_offset
    first = store.get_message("TopicTest", 0, min_offset, 1)
    assert first.status is GetStatus.FOUND
    assert decode_record(first.buffers[0]).queue_offset == min_offset
    assert store.commit_log.min_offset <= decode_record(first.buffers[0]).physical_offset
    # Offsets survive a restart after retention.
    store.close()
    reopened = make_store(tmp_path, clock, [10.0], [12])
    assert reopened.get_min_offset_in_queue("TopicTest", 0) == min_offset
    assert reopened.get_max_offset_in_queue("TopicTest", 0) == max_before
    assert reopened.put_messages_now([message()]).queue_offset == max_before
    reopened.close()


def test_disk_pressure_deletes_at_any_hour_and_force_ratio_ignores_age(tmp_path: Path) -> None:
    clock = ManualClock(now_ms=1_800_000_000_000)
    disk, hour = [80.0], [12]
    store = make_store(tmp_path, clock, disk, hour)
    fill(store, 200)
    age_files(store, clock.now_ms())
    clock.advance(49 * 3600)
    result = store.clean_expired_files()
    assert result is not None
    assert result.commit_log_files > 0
    fill(store, 100)
    age_files(store, clock.now_ms())  # young files
    disk[0] = 90.0
    before = store.commit_log.min_offset
    result = store.clean_expired_files()
    assert result is not None
    assert result.commit_log_files == 1
    assert store.commit_log.min_offset > before
    store.close()


def test_parse_delete_when() -> None:
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("04;05; 23") == {4, 5, 23}
    assert parse_delete_when("4x;25;") == set()
