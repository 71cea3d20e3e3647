"""JournaledSaves over a simulated disk: appends shared by callers waiting together, a failed
append's entries kept for the next, whole saves when the journal outgrows the file; and the
group table's journal entries."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.groups import SubscriptionGroupConfig, SubscriptionGroupTable
from pocketmq.broker.persistence import JournaledSaves
from pocketmq.runtime.json_journal import JournaledJsonFile
from pocketmq.testing.simulated_disk import SimulatedDisk

PATH = Path("/store/config/table.json")


class Table:
    def __init__(self) -> None:
        self.entries: dict[str, Any] = {}

    def snapshot(self) -> dict[str, Any]:
        return {"table": dict(self.entries)}

    def changes(self, names: list[str]) -> dict[str, Any]:
        return {"table": {n: self.entries.get(n) for n in names}}


def saves(disk: SimulatedDisk, table: Table) -> tuple[JournaledJsonFile, JournaledSaves]:
    file = JournaledJsonFile(PATH, "table", disk)
    return file, JournaledSaves(file, table.snapshot, table.changes)


def test_callers_waiting_together_share_an_append() -> None:
    disk = SimulatedDisk()
    table = Table()
    _, journaled = saves(disk, table)

    async def run() -> None:
        async def create(name: str) -> None:
            table.entries[name] = {"n": name}
            await journaled.save_now([name])

        await asyncio.gather(*(create(f"G{i}") for i in range(20)))

    asyncio.run(run())
    lines = disk.read_bytes(PATH.parent / "table.json.journal.1").count(b"\n")
    assert lines < 20  # the first alone, the others together
    assert JournaledJsonFile(PATH, "table", disk).load() == table.snapshot()


def test_a_failed_append_leaves_its_entries_to_the_next() -> None:
    disk = SimulatedDisk()
    table = Table()
    _, journaled = saves(disk, table)

    async def run() -> None:
        table.entries["A"] = {"n": 1}
        disk.fail("sync", path_part=".journal.")
        with pytest.raises(OSError, match="Input/output error"):
            await journaled.save_now(["A"])
        disk.clear_faults()
        table.entries["B"] = {"n": 2}
        await journaled.save_now(["B"])

    asyncio.run(run())
    # A's bytes may be on the disk of its failed segment; the next append carried it again.
    disk.power_loss(unsynced_names_kept=False)
    disk.reboot()
    assert JournaledJsonFile(PATH, "table", disk).load() == {
        "table": {"A": {"n": 1}, "B": {"n": 2}}
    }


def test_a_journal_grown_past_the_file_asks_for_a_whole_save() -> None:
    disk = SimulatedDisk()
    table = Table()
    file, journaled = saves(disk, table)

    async def run() -> None:
        runner = asyncio.create_task(journaled.run())
        for i in range(400):
            table.entries[f"G{i}"] = {"pad": "x" * 300}
            await journaled.save_now([f"G{i}"])
        for _ in range(100):  # the whole save runs in the background
            if not file.wants_save and file.path.name in disk.list_dir(PATH.parent):
                break
            await asyncio.sleep(0.01)
        runner.cancel()

    asyncio.run(run())
    assert file.path.name in disk.list_dir(PATH.parent)
    assert JournaledJsonFile(PATH, "table", disk).load() == table.snapshot()


def test_group_changes_hold_the_named_groups_or_none_for_a_deleted_one() -> None:
    groups = SubscriptionGroupTable()
    groups.update(SubscriptionGroupConfig("kept", retry_max_times=3), 1)
    groups.update(SubscriptionGroupConfig("gone"), 2)
    groups.delete("gone", 3)
    assert groups.changes(["kept", "gone"]) == {
        "dataVersion": groups.data_version.to_json(),
        "forbiddenTable": {},
        "subscriptionGroupTable": {
            "kept": groups.snapshot()["subscriptionGroupTable"]["kept"],
            "gone": None,
        },
    }


def test_a_failed_whole_save_leaves_the_loop_running(caplog: pytest.LogCaptureFixture) -> None:
    disk = SimulatedDisk()
    table = Table()
    file, journaled = saves(disk, table)

    async def run() -> None:
        runner = asyncio.create_task(journaled.run())
        disk.fail("rename", path_part="table.json")
        table.entries["A"] = {"n": 1}
        journaled.changed()
        for _ in range(100):
            if "could not save" in caplog.text:
                break
            await asyncio.sleep(0.01)
        table.entries["B"] = {"n": 2}
        journaled.changed()
        for _ in range(100):
            if file.path.name in disk.list_dir(PATH.parent):
                break
            await asyncio.sleep(0.01)
        runner.cancel()

    asyncio.run(run())
    assert "could not save /store/config/table.json" in caplog.text
    assert JournaledJsonFile(PATH, "table", disk).load() == table.snapshot()
