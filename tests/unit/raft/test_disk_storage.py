"""The on-disk Raft state: what is synced survives, a torn or corrupt tail is cut at the first
bad entry, conflicting entries are replaced, snapshots drop the segments they cover."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.raft.disk import DiskStorage
from pocketmq.raft.messages import Entry, HardState, Snapshot


def entries(first: int, last: int, term: int = 1) -> list[Entry]:
    return [Entry(term, i, f"command {i}".encode()) for i in range(first, last + 1)]


def test_entries_and_hard_state_survive_a_restart(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    storage.append(entries(1, 10))
    storage.set_hard_state(HardState(term=3, vote=2, commit=7))
    storage.sync()
    restored = DiskStorage(tmp_path).load()
    assert restored.entries == entries(1, 10)
    assert restored.hard_state == HardState(3, 2, 7)


def test_an_append_replaces_conflicting_entries(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path, segment_bytes=200)  # several segments
    storage.load()
    storage.append(entries(1, 20))
    storage.append(entries(6, 8, term=2))
    storage.sync()
    assert DiskStorage(tmp_path).load().entries == entries(1, 5) + entries(6, 8, term=2)


def test_a_snapshot_drops_covered_segments_and_restarts_from_itself(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path, segment_bytes=200)
    storage.load()
    storage.append(entries(1, 30))
    storage.apply_snapshot(Snapshot(index=20, term=1, data=b"image"))
    storage.append(entries(31, 32))
    storage.sync()
    assert len(list((tmp_path / "log").iterdir())) < 5
    restored = DiskStorage(tmp_path).load()
    assert restored.snapshot == Snapshot(20, 1, b"image")
    assert restored.entries == entries(21, 32)


def test_a_leaders_snapshot_replaces_a_log_that_does_not_hold_it(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    storage.append(entries(1, 5))
    storage.apply_snapshot(Snapshot(index=50, term=4, data=b"leader's image"))
    storage.append(entries(51, 52, term=4))
    storage.sync()
    restored = DiskStorage(tmp_path).load()
    assert restored.snapshot.index == 50
    assert restored.entries == entries(51, 52, term=4)


def test_a_torn_hard_state_write_falls_back_to_the_other_slot(tmp_path: Path) -> None:
    storage = DiskStorage(tmp_path)
    storage.load()
    storage.set_hard_state(HardState(1, 1, 0))
    storage.sync()
    storage.set_hard_state(HardState(2, 3, 0))
    storage.sync()
    raw = bytearray((tmp_path / "hardstate").read_bytes())
    raw[0] ^= 0xFF  # generation 2 lives in slot 0
    (tmp_path / "hardstate").write_bytes(bytes(raw))
    assert DiskStorage(tmp_path).load().hard_state == HardState(1, 1, 0)


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10_000), flip=st.booleans())
def test_recovery_keeps_the_valid_prefix_after_damage_at_any_byte(
    tmp_path_factory: object, cut: int, flip: bool
) -> None:
    directory = tmp_path_factory.mktemp("raft")  # type: ignore[attr-defined]
    storage = DiskStorage(directory)
    storage.load()
    written = entries(1, 200)
    storage.append(written)
    storage.sync()
    storage.close()
    segment = next((directory / "log").iterdir())
    raw = bytearray(segment.read_bytes())
    cut %= len(raw)
    if flip:
        raw[cut] ^= 0x5A
    else:
        del raw[cut:]
    segment.write_bytes(bytes(raw))
    restored = DiskStorage(directory).load()
    assert restored.entries == written[: len(restored.entries)]
    assert len(restored.entries) < len(written)
    # The damaged tail is gone from disk: appending continues the valid prefix.
    again = DiskStorage(directory)
    prefix = again.load().entries
    again.append(entries(len(prefix) + 1, len(prefix) + 3, term=2))
    again.sync()
    assert DiskStorage(directory).load().entries[len(prefix) :] == entries(
        len(prefix) + 1, len(prefix) + 3, term=2
    )
