"""A ConsumeQueue's files are created without a sync and made durable by the next flush: what
a power loss can leave of them, and what the loader does with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.store.mapped_file import MappedFileError, MappedFileQueue
from pocketmq.testing.simulated_disk import SimulatedDisk

ROOT = Path("/disk/store/consumequeue")
SIZE = 4096


def queue_files(disk: SimulatedDisk, topic: str = "T", queue_id: int = 0) -> MappedFileQueue:
    files = MappedFileQueue(ROOT / topic / str(queue_id), SIZE, derived=True, fs=disk)
    files.load()
    return files


def fill(files: MappedFileQueue, count: int) -> None:
    for _ in range(count):
        mapped = files.last_file_for_write()
        mapped.write(b"\x01" * SIZE)


@pytest.mark.parametrize("seed", range(40))
def test_flushed_files_survive_power_loss_and_unflushed_ones_never_stop_the_loader(
    seed: int,
) -> None:
    disk = SimulatedDisk(seed)
    disk.make_dirs(ROOT)
    files = queue_files(disk)
    fill(files, 2)
    files.flush()
    fill(files, 3)  # created after the flush: at the power's mercy
    disk.power_loss()
    disk.reboot()

    again = queue_files(disk)  # never raises: short or missing files are dropped
    assert len(again.files) >= 2
    for mapped in again.files[:2]:
        assert mapped.read(0, SIZE) == b"\x01" * SIZE
    starts = [mapped.file_from_offset for mapped in again.files]
    assert starts == [n * SIZE for n in range(len(starts))]  # no gap survives the load


def test_new_files_are_created_without_a_sync_and_synced_by_the_flush() -> None:
    disk = SimulatedDisk()
    disk.make_dirs(ROOT)
    files = queue_files(disk, "Fresh", 3)
    before = len(disk.synced_paths)
    fill(files, 1)
    assert len(disk.synced_paths) == before  # nothing synced on the writer's path
    files.flush()
    synced = disk.synced_paths[before:]
    assert str(ROOT / "Fresh" / "3" / "00000000000000000000") in synced
    for directory in (ROOT / "Fresh" / "3", ROOT / "Fresh", ROOT):
        assert str(directory) in synced


def test_a_queue_file_of_another_size_still_stops_the_load(tmp_path: Path) -> None:
    # What a changed `mappedFileSizeConsumeQueue` looks like: not a power loss's leftover, so
    # nothing is dropped, and the operator is told.
    directory = tmp_path / "consumequeue" / "T" / "0"
    directory.mkdir(parents=True)
    (directory / "00000000000000000000").write_bytes(b"\x01" * 100)
    with pytest.raises(MappedFileError, match="expected 4096"):
        MappedFileQueue(directory, SIZE, derived=True).load()
    assert (directory / "00000000000000000000").stat().st_size == 100


def vm_flags(path: Path) -> str:
    """The kernel's flags for this process's mapping of `path` (`rr`: no read-ahead)."""
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for index, line in enumerate(lines):
        if line.endswith(str(path)):
            for follow in lines[index + 1 :]:
                if follow.startswith("VmFlags:"):
                    return follow
    raise AssertionError(f"{path} is not mapped")


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="needs Linux's smaps")
def test_a_queue_file_reads_ahead_only_once_full(tmp_path: Path) -> None:
    """Read-ahead on a queue's first entry would read its sparse file's whole window in as
    zeros: milliseconds and megabytes of page cache for each new queue."""
    size = 64 * 1024
    files = MappedFileQueue(tmp_path / "T" / "0", size, derived=True)
    files.load()
    first = files.last_file_for_write()
    first.write(b"\x01" * 20)
    assert " rr" in vm_flags(first.path)
    first.write(b"\x01" * (size - 20))
    second = files.last_file_for_write()
    assert " rr" not in vm_flags(first.path)  # full: read by consumers, read-ahead helps
    assert " rr" in vm_flags(second.path)
    files.close()

    again = MappedFileQueue(tmp_path / "T" / "0", size, derived=True)
    again.load()  # the last file is written on after a restart
    assert " rr" not in vm_flags(again.files[0].path)
    assert " rr" in vm_flags(again.files[1].path)
    again.close()
