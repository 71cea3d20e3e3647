"""JournaledJsonFile: changes appended beside a JSON file survive a crash and a power loss at
any call, torn tails are ignored, and saves fold the journal into the file.

The rounds test runs a random history of appends and saves (some saving a change the journal
never saw, as the broker's whole saves do) on a simulated disk that keeps only what was synced,
cutting each round at a random call by a power loss or a process crash; every load must give
the document as the last completed call left it, or with the change in flight. Each mutant
(an unsynced segment, an unsynced new segment's name, a load that trusts the page cache, appends
after a torn tail, a load that replays changes the file holds) must fail it.
"""

from __future__ import annotations

import copy
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.runtime.json_journal import MIN_JOURNAL_BYTES, JournaledJsonFile
from pocketmq.testing import simulated_disk
from pocketmq.testing.simulated_disk import PowerLost, SimulatedDisk

PATH = Path("/store/config/topics.json")
KEYS = [f"Topic{i}" for i in range(6)]
MUTANT_SEEDS = 200


def segments(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".journal." in p.name)


def test_changes_and_saves_read_back(tmp_path: Path) -> None:
    file = JournaledJsonFile(tmp_path / "topics.json", "table")
    assert file.load() is None
    file.append({"version": 1, "table": {"A": {"q": 8}, "B": {"q": 4}}})
    file.append({"version": 2, "table": {"B": None}})
    assert JournaledJsonFile(file.path, "table").load() == {"version": 2, "table": {"A": {"q": 8}}}
    assert segments(tmp_path) == ["topics.json.journal.1"]

    file.save({"version": 2, "table": {"A": {"q": 8}}})
    assert segments(tmp_path) == []
    file.append({"version": 3, "table": {"C": {"q": 1}}})
    assert segments(tmp_path) == ["topics.json.journal.3"]
    assert JournaledJsonFile(file.path, "table").load() == {
        "version": 3,
        "table": {"A": {"q": 8}, "C": {"q": 1}},
    }


def test_a_change_the_file_holds_is_not_applied_again(tmp_path: Path) -> None:
    """A segment that outlived the save that made it redundant (its removal was not synced)
    must not undo a change the save held but the journal never saw."""
    file = JournaledJsonFile(tmp_path / "topics.json", "table")
    file.append({"table": {"A": {"q": 8}}})
    kept = (tmp_path / "topics.json.journal.1").read_bytes()
    file.save({"table": {"A": {"q": 16}}})
    (tmp_path / "topics.json.journal.1").write_bytes(kept)
    assert JournaledJsonFile(file.path, "table").load() == {"table": {"A": {"q": 16}}}


def test_a_torn_tail_at_any_length_loses_only_the_torn_change(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = JournaledJsonFile(tmp_path / "topics.json", "table")
    states = [None]
    for n in range(3):
        file.append({"version": n, "table": {f"T{n}": {"q": n}}})
        states.append(JournaledJsonFile(file.path, "table").load())
    segment = tmp_path / "topics.json.journal.1"
    content = segment.read_bytes()
    ends = [i + 1 for i, byte in enumerate(content) if byte == ord("\n")]
    for length in range(len(content) + 1):
        segment.write_bytes(content[:length])
        whole = sum(1 for end in ends if end <= length)
        with caplog.at_level(logging.WARNING):
            caplog.clear()
            assert JournaledJsonFile(file.path, "table").load() == states[whole], length
        assert ("torn" in caplog.text) == (length not in [0, *ends]), length


def test_a_change_with_a_bad_checksum_ends_the_segment(tmp_path: Path) -> None:
    file = JournaledJsonFile(tmp_path / "topics.json", "table")
    file.append({"table": {"A": {"q": 1}}})
    file.append({"table": {"A": {"q": 2}}})
    segment = tmp_path / "topics.json.journal.1"
    first, second, _ = segment.read_bytes().split(b"\n")
    segment.write_bytes(first + b"\n" + second.replace(b'"q":2', b'"q":3') + b"\n")
    assert JournaledJsonFile(file.path, "table").load() == {"table": {"A": {"q": 1}}}


def test_appends_after_a_start_go_to_a_new_segment(tmp_path: Path) -> None:
    """Never after a tail that may be torn: a change appended there would be lost with it."""
    file = JournaledJsonFile(tmp_path / "topics.json", "table")
    file.append({"table": {"A": {"q": 1}}})
    segment = tmp_path / "topics.json.journal.1"
    segment.write_bytes(segment.read_bytes() + b"0000")
    again = JournaledJsonFile(file.path, "table")
    again.load()
    again.append({"table": {"B": {"q": 2}}})
    assert segments(tmp_path) == ["topics.json.journal.1", "topics.json.journal.2"]
    assert JournaledJsonFile(file.path, "table").load() == {"table": {"A": {"q": 1}, "B": {"q": 2}}}


def test_after_a_failed_append_the_next_starts_a_segment() -> None:
    disk = SimulatedDisk()
    file = JournaledJsonFile(PATH, "table", disk)
    file.append({"table": {"A": {"q": 1}}})
    disk.fail("sync", path_part=".journal.")
    with pytest.raises(OSError, match="Input/output error"):
        file.append({"table": {"B": {"q": 2}}})
    file.append({"table": {"C": {"q": 3}}})
    assert disk.list_dir(PATH.parent) == ["topics.json.journal.1", "topics.json.journal.3"]
    assert JournaledJsonFile(PATH, "table", disk).load() == {
        "table": {"A": {"q": 1}, "B": {"q": 2}, "C": {"q": 3}}
    }


def test_the_journal_asks_for_a_save_once_it_outgrows_the_file(tmp_path: Path) -> None:
    file = JournaledJsonFile(tmp_path / "topics.json", "table")
    file.save({"table": {f"T{n}": {"pad": "x" * 200} for n in range(1000)}})
    size = file.path.stat().st_size
    assert size > MIN_JOURNAL_BYTES
    appended = 0
    while not file.wants_save:
        file.append({"table": {"T0": {"pad": "y" * 200}}})
        appended = sum(p.stat().st_size for p in tmp_path.glob("*.journal.*"))
        assert appended <= size + 1000
    assert appended > size
    file.save({"table": {}})
    assert not file.wants_save


def test_a_save_refuses_what_is_not_an_object(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="JSON object"):
        JournaledJsonFile(tmp_path / "topics.json", "table").save([1, 2])  # type: ignore[arg-type]


# -- power loss and crashes at any call ----------------------------------------------------


def _applied(document: dict[str, Any] | None, change: dict[str, Any]) -> dict[str, Any]:
    """The test's own model of a change: fields replace, table entries replace or go."""
    result = copy.deepcopy(document) if document is not None else {}
    table = result.setdefault("table", {})
    for key, entry in change.get("table", {}).items():
        if entry is None:
            table.pop(key, None)
        else:
            table[key] = entry
    result.update({k: v for k, v in change.items() if k != "table"})
    return result


def run_rounds(seed: int, rounds: int) -> None:
    """Rounds of random appends and saves, each cut by a power loss or a process crash."""
    rng = random.Random(seed)
    disk = SimulatedDisk(seed)
    expected: dict[str, Any] | None = None
    in_flight: dict[str, Any] | None = None
    counter = 0
    for round_number in range(rounds):
        file = JournaledJsonFile(PATH, "table", disk)
        loaded = file.load()
        assert loaded in (expected, in_flight), f"seed {seed}, round {round_number}"
        expected, in_flight = loaded, None  # the broker now acts on it: it must not go back
        disk.lose_power_at(rng.randint(1, 60), process_only=rng.random() < 0.3)
        try:
            for _ in range(rng.randint(1, 30)):
                counter += 1
                change = {
                    "version": counter,
                    "table": {k: rng.choice([None, {"q": counter}]) for k in rng.sample(KEYS, 2)},
                }
                chance = rng.random()
                if chance < 0.1:
                    in_flight = expected if expected is not None else {}
                    file.save(in_flight)
                    expected, in_flight = in_flight, None
                elif chance < 0.2:  # a change the journal never sees, saved whole
                    in_flight = _applied(expected, change)
                    file.save(in_flight)
                    expected, in_flight = in_flight, None
                else:
                    in_flight = _applied(expected, change)
                    file.append(change)
                    expected, in_flight = in_flight, None
            disk.power_loss()
        except PowerLost:
            pass
        disk.reboot()


@pytest.mark.parametrize("seed", range(12))
def test_every_returned_change_survives_power_loss_and_crashes(seed: int) -> None:
    run_rounds(seed, 40)


def _skip_segment_syncs(monkeypatch: pytest.MonkeyPatch) -> None:
    real = simulated_disk._SimulatedFile.sync

    def sync(self: Any) -> None:
        if ".journal." not in str(self._path):
            real(self)

    monkeypatch.setattr(simulated_disk._SimulatedFile, "sync", sync)


def _skip_directory_sync_of_new_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    real = JournaledJsonFile.append

    def append(self: JournaledJsonFile, change: dict[str, Any]) -> None:
        with monkeypatch.context() as patch:
            patch.setattr(self._fs, "sync_directory", lambda path: None)
            real(self, change)

    monkeypatch.setattr(JournaledJsonFile, "append", append)


def _trust_the_page_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    real = JournaledJsonFile._read_journal

    def read_journal(self: JournaledJsonFile) -> list[dict[str, Any]]:
        with monkeypatch.context() as patch:
            patch.setattr(simulated_disk._SimulatedFile, "sync", lambda handle: None)
            patch.setattr(self._fs, "sync_directory", lambda path: None)
            return real(self)

    monkeypatch.setattr(JournaledJsonFile, "_read_journal", read_journal)


def _append_after_the_last_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    real = JournaledJsonFile._open_segment

    def open_segment(self: JournaledJsonFile, seq: int) -> None:
        found = self._segments()
        if not found:
            real(self, seq)
            return
        self._segment = self._fs.open(self.path.parent / found[-1][1])
        self._segment_end = self._segment.size()

    monkeypatch.setattr(JournaledJsonFile, "_open_segment", open_segment)


def _replay_what_the_file_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    real = JournaledJsonFile._read_journal

    def read_journal(self: JournaledJsonFile) -> list[dict[str, Any]]:
        # Numbered after the file's last, every change is applied again.
        return [{**c, "seq": self._last_seq + 1 + i} for i, c in enumerate(real(self))]

    monkeypatch.setattr(JournaledJsonFile, "_read_journal", read_journal)


MUTANTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "skip_segment_syncs": _skip_segment_syncs,
    "skip_directory_sync_of_new_segments": _skip_directory_sync_of_new_segments,
    "trust_the_page_cache": _trust_the_page_cache,
    "append_after_the_last_tail": _append_after_the_last_tail,
    "replay_what_the_file_holds": _replay_what_the_file_holds,
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_the_rounds_catch_mutant(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    MUTANTS[mutant](monkeypatch)
    for seed in range(MUTANT_SEEDS):
        try:
            run_rounds(seed, 40)
        except AssertionError:
            return
    pytest.fail(f"mutant {mutant} survived {MUTANT_SEEDS} seeds of 40 rounds")
