"""The message index: RocketMQ's IndexFile layout, queries, roll-over, truncation, retention.

Layout facts are from rocketmq-wire.md section 5.2 (IndexFile, IndexHeader, IndexService).
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import pocketmq.store.index as index_module
import pocketmq.store.index_file as index_file_module
from pocketmq.common.java_hash import java_string_hash
from pocketmq.runtime.clock import ManualClock
from pocketmq.store import index_kernel
from pocketmq.store.index import IndexService, KeyedRecord
from pocketmq.store.index_file import (
    ENTRY_SIZE,
    HEADER_SIZE,
    SLOT_SIZE,
    IndexFile,
    IndexFileError,
    key_hash,
)
from tests.unit.common.kernel_source import interpreted

T0 = 1_700_000_000_000  # ManualClock's default: 2023-11-14 22:13:20.000 UTC
T0_NAME = "20231114221320000"
FOREVER = 1 << 62
HEADER = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")


def make_index(
    directory: Path, clock: ManualClock | None = None, *, slots: int = 16, max_index: int = 8
) -> IndexService:
    index = IndexService(
        directory, max_hash_slot_num=slots, max_index_num=max_index, clock=clock or ManualClock()
    )
    index.load()
    return index


def header_of(path: Path) -> tuple[int, ...]:
    return HEADER.unpack_from(path.read_bytes(), 0)


def query_all(index: IndexService, key: str, topic: str = "T") -> list[int]:
    return index.query(topic, key, 1000, 0, FOREVER)


# -- layout ----------------------------------------------------------------------------------


def test_key_hash_is_abs_java_hash_code_with_min_value_mapped_to_zero() -> None:
    assert key_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(1 << 31)
    assert key_hash("polygenelubricants") == 0
    assert key_hash("T#k") == abs(java_string_hash("T#k"))


def test_new_file_is_sparse_and_named_by_creation_time_in_utc(tmp_path: Path) -> None:
    index = make_index(tmp_path, slots=1000, max_index=10_000)
    index.build_index("T", "k", None, 0, T0)
    index.close()
    path = tmp_path / T0_NAME
    assert [p.name for p in tmp_path.iterdir()] == [T0_NAME]
    size = 40 + 1000 * 4 + 10_000 * 20
    stat = path.stat()
    assert stat.st_size == size
    assert stat.st_blocks * 512 < size  # ftruncate leaves the untouched pages as holes


def test_entries_slots_and_header_are_laid_out_like_rocketmq(tmp_path: Path) -> None:
    slots, max_index = 7, 6
    index = make_index(tmp_path, slots=slots, max_index=max_index)
    index.build_index("T", "a b", "U1", 1000, T0 + 2500)
    index.build_index("T", "a", None, 1200, T0 + 7000)
    index.close()
    raw = (tmp_path / T0_NAME).read_bytes()
    assert len(raw) == HEADER_SIZE + slots * SLOT_SIZE + max_index * ENTRY_SIZE
    # beginTimestamp, endTimestamp, beginPhyOffset, endPhyOffset, hashSlotCount, indexCount
    h_u1, h_a, h_b = (key_hash(k) for k in ("T#U1", "T#a", "T#b"))
    used_slots = len({h_u1 % slots, h_a % slots, h_b % slots})
    assert HEADER.unpack_from(raw, 0) == (T0 + 2500, T0 + 7000, 1000, 1200, used_slots, 5)

    def entry(number: int) -> tuple[int, ...]:
        return ENTRY.unpack_from(raw, HEADER_SIZE + slots * SLOT_SIZE + number * ENTRY_SIZE)

    def slot(h: int) -> int:
        return int(struct.unpack_from(">i", raw, HEADER_SIZE + (h % slots) * SLOT_SIZE)[0])

    assert entry(0) == (0, 0, 0, 0)  # entry 0 is never used
    assert entry(1) == (h_u1, 1000, 0, 0)  # uniq key first, time diff in whole seconds
    assert entry(2)[:3] == (h_a, 1000, 0)
    assert entry(3)[:3] == (h_b, 1000, 0)
    assert entry(4) == (h_a, 1200, 4, 2)  # 4.5 s after the first entry; chains back to #2
    assert slot(h_a) == 4
    assert slot(h_b) in (3, 4)  # 4 only if b and a share a slot


def test_index_file_put_key_reports_full_and_keeps_header_fields(tmp_path: Path) -> None:
    index_file = IndexFile.create(tmp_path / "f", slots=4, max_index=3)
    assert index_file.is_empty
    assert index_file.put_key("T#a", 10, T0)
    assert index_file.put_key("T#b", 20, T0 + 1000)
    assert index_file.is_full
    assert not index_file.put_key("T#c", 30, T0 + 2000)
    assert (index_file.begin_timestamp, index_file.end_timestamp) == (T0, T0 + 1000)
    assert (index_file.begin_phy_offset, index_file.end_phy_offset) == (10, 20)
    assert index_file.index_count == 3
    assert index_file.select("T#b", 10, 0, FOREVER) == [20]
    assert index_file.select("T#c", 10, 0, FOREVER) == []
    index_file.destroy()
    assert not (tmp_path / "f").exists()


# -- queries ---------------------------------------------------------------------------------


def test_put_then_query_finds_each_key_and_unique_id(tmp_path: Path) -> None:
    index = make_index(tmp_path, slots=64, max_index=64)
    index.build_index("T", "order-1 user-7", "UNIQ1", 0, T0)
    index.build_index("T", "order-2  user-7 ", "UNIQ2", 100, T0 + 10)  # empty keys skipped
    index.build_index("Other", "order-1", None, 200, T0 + 20)
    assert query_all(index, "order-1") == [0]
    assert query_all(index, "order-2") == [100]
    assert query_all(index, "user-7") == [100, 0]  # newest first
    assert query_all(index, "UNIQ2") == [100]
    assert query_all(index, "order-1", topic="Other") == [200]
    assert query_all(index, "") == []
    assert index.query("T", "user-7", 1, 0, FOREVER) == [100]
    assert index.query("T", "user-7", 0, 0, FOREVER) == []
    assert index.files[-1].index_count == 1 + 3 + 3 + 1
    index.close()


def test_message_without_keys_or_unique_id_is_not_indexed(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    index.build_index("T", "", None, 0, T0)
    index.build_index("T", "  ", "", 10, T0)
    assert index.files == []
    assert index.max_phy_offset == 0


def test_hash_collisions_return_every_candidate(tmp_path: Path) -> None:
    # One slot: every key shares one chain. "Aa" and "BB" have the same Java hash code.
    assert key_hash("T#Aa") == key_hash("T#BB")
    index = make_index(tmp_path, slots=1, max_index=32)
    for offset, key in enumerate(["Aa", "x", "BB", "y", "Aa", "z"]):
        index.build_index("T", key, None, offset * 10, T0)
    assert query_all(index, "Aa") == [40, 20, 0]
    assert query_all(index, "BB") == [40, 20, 0]
    assert query_all(index, "x") == [10]
    assert query_all(index, "y") == [30]
    assert query_all(index, "missing") == []
    index.close()


def test_query_returns_only_entries_inside_the_time_range(tmp_path: Path) -> None:
    index = make_index(tmp_path, max_index=32)
    for second in range(5):
        index.build_index("T", "k", None, second * 100, T0 + second * 1000)
    assert index.query("T", "k", 10, T0 + 1000, T0 + 3000) == [300, 200, 100]
    assert index.query("T", "k", 10, T0 + 3500, FOREVER) == [400, 300]  # 300's second overlaps
    assert index.query("T", "k", 10, 0, T0 - 1) == []
    assert index.query("T", "k", 10, T0 + 5000, FOREVER) == []
    assert index.query("T", "k", 2, 0, FOREVER) == [400, 300]
    index.close()


def test_entry_inside_the_range_is_found_although_its_time_is_stored_in_seconds(
    tmp_path: Path,
) -> None:
    index = make_index(tmp_path)
    index.build_index("T", "first", None, 0, T0)
    index.build_index("T", "k", None, 100, T0 + 1500)  # recorded as second 1: T0+1000..T0+1999
    index.build_index("T", "last", None, 200, T0 + 5000)
    assert index.query("T", "k", 10, T0 + 1400, T0 + 1600) == [100]
    # Within its recorded second the index cannot tell: the caller checks the real time.
    assert index.query("T", "k", 10, T0 + 1600, T0 + 1700) == [100]
    assert index.query("T", "k", 10, T0 + 2000, FOREVER) == []
    assert index.query("T", "k", 10, 0, T0 + 999) == []
    index.close()


def test_files_outside_the_time_range_are_skipped(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    index = make_index(tmp_path, clock, max_index=3)  # two entries a file
    for i in range(6):
        index.build_index("T", "k", None, i * 100, T0 + i * 60_000)
        clock.advance(60)
    assert len(index.files) == 3
    assert index.query("T", "k", 10, T0 + 120_000, T0 + 180_000) == [300, 200]
    assert query_all(index, "k") == [500, 400, 300, 200, 100, 0]
    index.close()


# -- roll-over, reload -----------------------------------------------------------------------


def test_full_file_rolls_over_to_a_new_file_named_after_it(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    index = make_index(tmp_path, clock, max_index=4)  # three entries a file
    for i in range(7):
        index.build_index("T", f"k{i}", None, i * 10, T0 + i)
    # A message whose keys do not all fit continues in the next file.
    index.build_index("T", "a b c d", "U", 70, T0 + 8)
    names = sorted(p.name for p in tmp_path.iterdir())
    # The clock did not move: later files take the next free millisecond, keeping the order.
    assert names == [T0_NAME, "20231114221320001", "20231114221320002", "20231114221320003"]
    assert [f.index_count - 1 for f in index.files] == [3, 3, 3, 3]
    assert [header_of(tmp_path / n)[2:4] for n in names] == [(0, 20), (30, 50), (60, 70), (70, 70)]
    for i in range(7):
        assert query_all(index, f"k{i}") == [i * 10]
    for key in ("a", "b", "c", "d", "U"):
        assert query_all(index, key) == [70]
    index.close()


def test_new_file_name_sorts_after_the_last_even_when_the_clock_steps_back(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0 + 60_000)
    index = make_index(tmp_path, clock, max_index=2)
    index.build_index("T", "a", None, 0, T0)
    index.close()
    index = make_index(tmp_path, ManualClock(T0), max_index=2)  # a minute earlier
    index.build_index("T", "b", None, 10, T0)
    assert [f.path.name for f in index.files] == ["20231114221420000", "20231114221420001"]
    index.close()


def test_load_after_close_restores_files_queries_and_max_offset(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    index = make_index(tmp_path, clock, max_index=4)
    for i in range(8):
        index.build_index("T", "k", f"U{i}", i * 10, T0 + i * 1000)
        clock.advance(1)
    before = query_all(index, "k")
    index.flush()
    index.close()
    reopened = make_index(tmp_path, clock, max_index=4)
    assert [f.path.name for f in reopened.files] == sorted(p.name for p in tmp_path.iterdir())
    assert query_all(reopened, "k") == before == [i * 10 for i in reversed(range(8))]
    assert query_all(reopened, "U3") == [30]
    assert reopened.max_phy_offset == 70
    reopened.build_index("T", "k", None, 80, T0 + 8000)
    assert query_all(reopened, "k")[:2] == [80, 70]
    reopened.close()


def test_max_phy_offset_is_zero_without_files(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    assert index.max_phy_offset == 0
    index.build_index("T", "k", None, 0, T0)
    assert index.max_phy_offset == 0
    index.build_index("T", "k", None, 64, T0)
    assert index.max_phy_offset == 64
    index.close()


# -- replay ----------------------------------------------------------------------------------


def test_replayed_messages_are_ignored(tmp_path: Path) -> None:
    index = make_index(tmp_path, max_index=32)
    for i in range(5):
        index.build_index("T", "k", "U", i * 10, T0)
    count = index.files[-1].index_count
    for i in range(5):  # the dispatcher re-runs from an earlier safe point
        index.build_index("T", "k", "U", i * 10, T0)
    assert index.files[-1].index_count == count
    assert query_all(index, "k") == [40, 30, 20, 10, 0]
    index.close()
    reopened = make_index(tmp_path, max_index=32)
    for i in range(6):
        reopened.build_index("T", "k", "U", i * 10, T0)
    assert query_all(reopened, "k") == [50, 40, 30, 20, 10, 0]
    reopened.close()


# -- truncation ------------------------------------------------------------------------------


def test_truncate_drops_entries_at_and_after_the_offset_and_repairs_chains(
    tmp_path: Path,
) -> None:
    index = make_index(tmp_path, slots=1, max_index=32)  # one chain through every entry
    for i in range(10):
        index.build_index("T", f"k{i % 3} all", None, i * 10, T0 + i * 1000)
    index.truncate(55)
    assert index.max_phy_offset == 50
    assert query_all(index, "all") == [50, 40, 30, 20, 10, 0]
    assert query_all(index, "k0") == [30, 0]
    assert query_all(index, "k2") == [50, 20]
    file_header = index.files[0]
    assert (file_header.index_count, file_header.end_phy_offset) == (13, 50)
    assert file_header.end_timestamp == T0 + 5999  # the kept entry's second, at most
    index.build_index("T", "k0", None, 55, T0 + 9000)
    assert query_all(index, "k0") == [55, 30, 0]
    assert query_all(index, "all") == [50, 40, 30, 20, 10, 0]
    index.close()
    reopened = make_index(tmp_path, slots=1, max_index=32)
    assert query_all(reopened, "k0") == [55, 30, 0]
    assert query_all(reopened, "k1") == [40, 10]
    reopened.close()


def test_truncate_deletes_later_files_and_keeps_earlier_ones(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    index = make_index(tmp_path, clock, max_index=3)  # two entries a file
    for i in range(7):
        index.build_index("T", "k", None, i * 10, T0)
        clock.advance(1)
    assert len(index.files) == 4
    index.truncate(30)  # the second file starts at 20: it keeps one entry
    assert len(index.files) == 2
    assert len(list(tmp_path.iterdir())) == 2
    assert query_all(index, "k") == [20, 10, 0]
    assert index.max_phy_offset == 20
    index.build_index("T", "k", None, 30, T0)
    index.build_index("T", "k", None, 40, T0)
    assert query_all(index, "k") == [40, 30, 20, 10, 0]
    index.truncate(0)
    assert index.files == []
    assert list(tmp_path.iterdir()) == []
    assert index.max_phy_offset == 0
    index.build_index("T", "k", None, 0, T0)
    assert query_all(index, "k") == [0]
    index.close()


def test_truncate_past_the_end_changes_nothing(tmp_path: Path) -> None:
    index = make_index(tmp_path)
    index.build_index("T", "k", None, 10, T0)
    before = (tmp_path / T0_NAME).read_bytes()
    index.truncate(11)
    assert (tmp_path / T0_NAME).read_bytes() == before
    assert query_all(index, "k") == [10]
    index.close()


# -- retention -------------------------------------------------------------------------------


def test_delete_expired_removes_files_ending_below_the_min_offset_but_never_the_last(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0)
    index = make_index(tmp_path, clock, max_index=3)  # two entries a file
    for i in range(6):
        index.build_index("T", "k", None, i * 10, T0)
        clock.advance(1)
    assert [(f.begin_phy_offset, f.end_phy_offset) for f in index.files] == [
        (0, 10),
        (20, 30),
        (40, 50),
    ]
    assert index.delete_expired(10) == 0
    assert index.delete_expired(11) == 1
    assert query_all(index, "k") == [50, 40, 30, 20]
    assert index.delete_expired(1 << 40) == 1
    assert len(index.files) == 1
    assert len(list(tmp_path.iterdir())) == 1
    assert query_all(index, "k") == [50, 40]
    assert index.max_phy_offset == 50
    index.close()


# -- durability ------------------------------------------------------------------------------


def test_flush_syncs_only_files_written_since_the_last_flush(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    monkeypatch.setattr(os, "fdatasync", synced.append)
    clock = ManualClock(T0)
    index = make_index(tmp_path, clock, max_index=3)
    for i in range(3):
        index.build_index("T", "k", None, i, T0)
    assert len(synced) == 2  # each new file is synced (empty) before its name is
    synced.clear()
    index.flush()
    assert len(synced) == 2  # two files written
    index.flush()
    assert len(synced) == 2
    index.build_index("T", "k", None, 3, T0)
    index.flush()
    assert len(synced) == 3
    index.close()
    index.flush()  # closed files are skipped
    assert len(synced) == 3


def test_flush_of_a_file_closed_meanwhile_is_harmless(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_file = IndexFile.create(tmp_path / "f", slots=4, max_index=4)

    def closed_under_us(fd: int) -> None:
        index_file.close()  # the event loop deleted the file while the flush thread ran
        raise OSError(errno.EBADF, "Bad file descriptor")

    monkeypatch.setattr(os, "fdatasync", closed_under_us)
    index_file.flush()
    index_file.flush()  # closed now: nothing to do


def test_flush_error_on_an_open_file_is_raised_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index_file = IndexFile.create(tmp_path / "f", slots=4, max_index=4)

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="I/O error"):
        index_file.flush()
    synced: list[int] = []
    monkeypatch.setattr(os, "fdatasync", synced.append)
    index_file.flush()
    assert len(synced) == 1
    index_file.close()


# -- bad files -------------------------------------------------------------------------------


def _write_file(path: Path, *, slots: int, max_index: int, header: tuple[int, ...]) -> None:
    raw = bytearray(40 + slots * 4 + max_index * 20)
    HEADER.pack_into(raw, 0, *header)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize(
    ("header", "size_delta"),
    [
        pytest.param((0, 0, 0, 0, 0, 0), 0, id="index-count-zero"),
        pytest.param((0, 0, 0, 0, 0, 9), 0, id="index-count-past-max"),
        pytest.param((T0, T0, 50, 10, 1, 3), 0, id="offsets-backwards"),
        pytest.param((T0, T0, 0, 0, 1, 2), -7, id="truncated-file"),
    ],
)
def test_bad_file_at_load_is_set_aside_and_the_rest_load(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    header: tuple[int, ...],
    size_delta: int,
) -> None:
    good = make_index(tmp_path, max_index=8)
    good.build_index("T", "k", None, 10, T0)
    good.close()
    bad = tmp_path / "20991231235959999"
    _write_file(bad, slots=16, max_index=8, header=header)
    if size_delta:
        with bad.open("r+b") as handle:
            handle.truncate(bad.stat().st_size + size_delta)
    with pytest.raises(IndexFileError):
        IndexFile.open(bad, slots=16, max_index=8)
    with caplog.at_level(logging.WARNING, logger="pocketmq.store.index"):
        index = make_index(tmp_path, max_index=8)
    assert "20991231235959999" in caplog.text
    assert not bad.exists()
    assert index.corrupt_files == [tmp_path / "20991231235959999.corrupt"]
    assert index.corrupt_files[0].exists()
    assert [f.path.name for f in index.files] == [T0_NAME]
    assert index.max_phy_offset == 10  # rebuilding resumes after the good file
    assert query_all(index, "k") == [10]
    index.close()


def test_index_file_error_is_a_value_error() -> None:
    assert issubclass(IndexFileError, ValueError)


def test_load_removes_unfinished_creations_and_ignores_other_names(tmp_path: Path) -> None:
    (tmp_path / "20231114221320000.tmp").write_bytes(b"\0" * 5)
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "20231114221319000.corrupt").write_bytes(b"junk")
    index = make_index(tmp_path)
    assert index.files == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "20231114221319000.corrupt",
        "notes.txt",
    ]
    index.close()


def test_corrupt_links_and_slots_end_the_chain_instead_of_looping(tmp_path: Path) -> None:
    slots, max_index = 1, 8
    index = make_index(tmp_path, slots=slots, max_index=max_index)
    for i in range(4):
        index.build_index("T", "k", None, i * 10, T0)
    index.close()
    path = tmp_path / T0_NAME
    raw = bytearray(path.read_bytes())
    entries = HEADER_SIZE + slots * SLOT_SIZE
    # Entry 3 links forward to 4 (a cycle 4 -> 3 -> 4 in a careless reader).
    struct.pack_into(">i", raw, entries + 3 * ENTRY_SIZE + 16, 4)
    path.write_bytes(bytes(raw))
    index = make_index(tmp_path, slots=slots, max_index=max_index)
    assert query_all(index, "k") == [30, 20]
    index.close()
    struct.pack_into(">i", raw, HEADER_SIZE, 999)  # the slot points past indexCount
    path.write_bytes(bytes(raw))
    index = make_index(tmp_path, slots=slots, max_index=max_index)
    assert query_all(index, "k") == []
    index.truncate(25)  # repairs the bad slot and the bad link
    index.build_index("T", "k", None, 25, T0)
    assert query_all(index, "k") == [25]
    index.close()


def test_slot_and_entry_counts_the_format_cannot_hold_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="maxHashSlotNum"):
        IndexService(tmp_path, max_hash_slot_num=0, max_index_num=8, clock=ManualClock())
    with pytest.raises(ValueError, match="maxIndexNum"):
        IndexService(tmp_path, max_hash_slot_num=8, max_index_num=1, clock=ManualClock())
    with pytest.raises(ValueError, match="maxIndexNum"):
        IndexService(tmp_path, max_hash_slot_num=8, max_index_num=1 << 31, clock=ManualClock())


# -- model-based -----------------------------------------------------------------------------

TOPICS = ("T", "U")
KEYS = ("a", "b", "c", "Aa", "BB")  # "Aa" and "BB" collide in Java's hash


@dataclass(frozen=True)
class ModelEntry:
    topic: str
    key: str
    offset: int
    timestamp_ms: int


@dataclass(frozen=True)
class ModelMessage:
    topic: str
    keys: str
    uniq_key: str | None
    offset: int
    timestamp_ms: int


MESSAGES = st.tuples(
    st.sampled_from(TOPICS),
    st.lists(st.sampled_from((*KEYS, "")), max_size=4),
    st.booleans(),  # with a unique id
    st.integers(1, 50),  # offset gap
    st.integers(0, 3),  # seconds since the previous message
)


class IndexMachine(RuleBasedStateMachine):
    """The index against a list of every entry it should hold, in CommitLog order.

    Times are whole seconds, so the second-granularity candidates are exactly the model's
    matches; a query then must return the newest `max_num` entries with a matching hash.
    """

    SLOTS = 3
    MAX_INDEX = 5

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.directory = directory
        self.clock = ManualClock(T0)
        self.index = self._open()
        self.entries: list[ModelEntry] = []
        self.messages: list[ModelMessage] = []
        self.next_offset = 0
        self.min_offset = 0  # the CommitLog's, after retention: nothing below is replayed
        self.now_ms = T0

    def _open(self) -> IndexService:
        return make_index(self.directory, self.clock, slots=self.SLOTS, max_index=self.MAX_INDEX)

    def _expected(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> list[int]:
        h = key_hash(f"{topic}#{key}")
        return [
            e.offset
            for e in reversed(self.entries)
            if key_hash(f"{e.topic}#{e.key}") == h and begin_ms <= e.timestamp_ms <= end_ms
        ][:max_num]

    @initialize()
    def start_empty(self) -> None:
        assert self.index.files == []

    @rule(batch=st.lists(MESSAGES, min_size=1, max_size=8))
    def put(self, batch: list[tuple[str, list[str], bool, int, int]]) -> None:
        for topic, keys, has_uniq_key, gap, seconds in batch:
            offset = self.next_offset + gap - 1
            self.next_offset = offset + 1
            self.now_ms += seconds * 1000
            self.clock.advance(seconds)
            uniq_key = f"ID{offset}" if has_uniq_key else None
            message = ModelMessage(topic, " ".join(keys), uniq_key, offset, self.now_ms)
            self.index.build_index(topic, message.keys, uniq_key, offset, self.now_ms)
            indexed = [k for k in (uniq_key, *keys) if k]
            self.entries.extend(ModelEntry(topic, k, offset, self.now_ms) for k in indexed)
            if indexed:
                self.messages.append(message)

    @precondition(lambda self: any(m.offset >= self.min_offset for m in self.messages))
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        message = data.draw(
            st.sampled_from([m for m in self.messages if m.offset >= self.min_offset])
        )
        self.index.build_index(
            message.topic, message.keys, message.uniq_key, message.offset, message.timestamp_ms
        )

    @rule(
        topic=st.sampled_from(TOPICS),
        key=st.sampled_from((*KEYS, "ID0", "ID7")),
        max_num=st.integers(1, 6),
        begin_s=st.integers(-1, 60),
        span_s=st.integers(0, 90),
    )
    def query_any_key(self, topic: str, key: str, max_num: int, begin_s: int, span_s: int) -> None:
        begin_ms = T0 + begin_s * 1000
        end_ms = begin_ms + span_s * 1000
        expected = self._expected(topic, key, max_num, begin_ms, end_ms)
        assert self.index.query(topic, key, max_num, begin_ms, end_ms) == expected

    @precondition(lambda self: self.entries)
    @rule(
        data=st.data(),
        max_num=st.integers(1, 4),
        before_s=st.integers(0, 4),
        after_s=st.integers(0, 4),
    )
    def query_around_an_entry(
        self, data: st.DataObject, max_num: int, before_s: int, after_s: int
    ) -> None:
        entry = data.draw(st.sampled_from(self.entries))
        begin_ms = entry.timestamp_ms - before_s * 1000
        end_ms = entry.timestamp_ms + after_s * 1000
        expected = self._expected(entry.topic, entry.key, max_num, begin_ms, end_ms)
        assert expected
        assert self.index.query(entry.topic, entry.key, max_num, begin_ms, end_ms) == expected

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(self.min_offset, self.next_offset + 5))
        self.index.truncate(offset)
        self.entries = [e for e in self.entries if e.offset < offset]
        self.messages = [m for m in self.messages if m.offset < offset]
        self.next_offset = min(self.next_offset, offset)

    @rule(data=st.data())
    def delete_expired(self, data: st.DataObject) -> None:
        min_offset = data.draw(st.integers(self.min_offset, self.next_offset))
        self.min_offset = min_offset
        files = self.index.files
        doomed = list(itertools.takewhile(lambda f: f.end_phy_offset < min_offset, files[:-1]))
        dropped = sum(f.index_count - 1 for f in doomed)
        assert self.index.delete_expired(min_offset) == len(doomed)
        assert all(e.offset < min_offset for e in self.entries[:dropped])
        self.entries = self.entries[dropped:]

    @rule()
    def reopen(self) -> None:
        self.index.flush()
        self.index.close()
        self.index = self._open()

    @invariant()
    def every_key_finds_all_its_entries_over_all_time(self) -> None:
        for topic, key in itertools.product(TOPICS, KEYS):
            expected = self._expected(topic, key, 1000, 0, FOREVER)
            assert query_all(self.index, key, topic) == expected

    @invariant()
    def counts_and_max_offset_match_the_model(self) -> None:
        assert sum(f.index_count - 1 for f in self.index.files) == len(self.entries)
        assert self.index.max_phy_offset == (self.entries[-1].offset if self.entries else 0)
        names = [f.path.name for f in self.index.files]
        assert names == sorted(names)

    def teardown(self) -> None:
        self.index.close()
        shutil.rmtree(self.directory, ignore_errors=True)


def test_index_agrees_with_a_naive_model(tmp_path: Path) -> None:
    runs = itertools.count()

    class Machine(IndexMachine):
        def __init__(self) -> None:
            super().__init__(tmp_path / f"run{next(runs)}")

    run_state_machine_as_test(
        Machine, settings=settings(max_examples=150, stateful_step_count=40, deadline=None)
    )


_MESSAGES = st.lists(
    st.tuples(
        st.sampled_from(["T", "Topic-B", "中文"]),
        st.lists(st.sampled_from(["a", "b", "user-7", "k" * 300, "ключ", ""]), max_size=3).map(
            " ".join
        ),
        st.one_of(st.none(), st.just(""), st.text("0123456789ABCDEF", min_size=32, max_size=32)),
        st.integers(0, 5_000),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(messages=_MESSAGES, run=st.integers(1, 9))
def test_bulk_building_writes_the_bytes_one_by_one_writes(
    tmp_path_factory: pytest.TempPathFactory,
    messages: list[tuple[str, str, str | None, int]],
    run: int,
) -> None:
    """The dispatcher's runs (`build_index_many`) and message-by-message `build_index` leave
    byte-identical files, rolling over and sharing slots (16 slots, 8 entries a file)."""
    rows = [
        (topic, keys, uniq, 100 * (i + 1), T0 + delay_ms)
        for i, (topic, keys, uniq, delay_ms) in enumerate(messages)
    ]
    single = make_index(tmp_path_factory.mktemp("single"))
    for row in rows:
        single.build_index(*row)
    bulk = make_index(tmp_path_factory.mktemp("bulk"))
    for start in range(0, len(rows), run):
        bulk.build_index_many(KeyedRecord(*row) for row in rows[start : start + run])
    assert bulk.max_phy_offset == single.max_phy_offset
    assert [f.path.read_bytes() for f in bulk.files] == [f.path.read_bytes() for f in single.files]
    single.close()
    bulk.close()


_INTERPRETED_KERNEL = interpreted(index_kernel)


def _build_with(
    build: str, directory: Path, rows: list[tuple[str, str, str | None, int, int]], run: int
) -> list[bytes]:
    """The files `build_index_many` leaves in runs of `run`, with the index's loops `build`:
    "compiled" (the kernel as imported, compiled where the build could), "kernel source" (the
    kernel run by the interpreter) or "interpreted" (the index's own loops)."""
    with pytest.MonkeyPatch.context() as patch:
        uses_kernel = build != "interpreted"
        kernel = _INTERPRETED_KERNEL if build == "kernel source" else index_kernel
        for module in (index_module, index_file_module):
            patch.setattr(module, "KERNEL_COMPILED", uses_kernel)
            patch.setattr(module, "index_kernel", kernel)
        built = make_index(directory)
        for start in range(0, len(rows), run):
            built.build_index_many(KeyedRecord(*row) for row in rows[start : start + run])
        files = [f.path.read_bytes() for f in built.files]
        built.close()
    return files


@settings(max_examples=60, deadline=None)
@given(messages=_MESSAGES, run=st.integers(1, 9))
def test_the_kernel_and_the_interpreted_loops_write_the_same_bytes(
    tmp_path_factory: pytest.TempPathFactory,
    messages: list[tuple[str, str, str | None, int]],
    run: int,
) -> None:
    """`index_kernel` (compiled where the build could, and its source interpreted) links runs
    into slot chains byte for byte as the index's interpreted loops do: shared and reused
    slots (16 slots, 8 entries a file), roll-over, times before the file's first."""
    rows = [
        (topic, keys, uniq, 100 * (i + 1), T0 + delay_ms)
        for i, (topic, keys, uniq, delay_ms) in enumerate(messages)
    ]
    expected = _build_with("interpreted", tmp_path_factory.mktemp("interpreted"), rows, run)
    for build in ("compiled", "kernel source"):
        assert _build_with(build, tmp_path_factory.mktemp("k"), rows, run) == expected, build


def test_the_kernel_reads_a_slot_the_file_already_holds_in_the_files_byte_order(
    tmp_path: Path,
) -> None:
    """A key whose slot an earlier run filled chains to that entry: the slot word is read
    from the file's big-endian int, whatever the machine's byte order."""
    one = IndexFile.create(tmp_path / "f", slots=4, max_index=1000)
    h = 0x01020304 * 4 + 1  # slot 1; entry numbers past 255 show a byte-order mistake
    for number in range(1, 300):
        assert one.put_hash(h, number * 10, T0) == (number < 1000)
    assert one.select_hash(h, 1000, T0, T0) == [n * 10 for n in range(299, 0, -1)]
    one.close()
