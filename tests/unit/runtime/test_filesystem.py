"""The machine's file system as the store uses it: mapped files and what they hold open."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pocketmq.runtime.filesystem import _PAGE_MAKER, OS_FILE_SYSTEM, create_sized_file


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_a_mapped_file_holds_one_descriptor_and_syncs_what_was_written(tmp_path: Path) -> None:
    # A broker maps one ConsumeQueue file per written queue: at two descriptors a file, a
    # 10,000-queue topic would need 20,000 open files.
    paths = [tmp_path / f"{n:020d}" for n in range(10)]
    for path in paths:
        create_sized_file(OS_FILE_SYSTEM, path, 4096)
    before = open_descriptors()
    regions = [OS_FILE_SYSTEM.map(path, 4096) for path in paths]
    assert open_descriptors() - before == len(paths)
    regions[0].buffer[0:5] = b"hello"
    regions[0].sync()
    assert paths[0].read_bytes()[:5] == b"hello"
    for region in regions:
        region.close()
        region.close()
        region.sync()  # after close: nothing to do, no error
    assert open_descriptors() == before


def test_reading_a_file_in_ahead_keeps_its_bytes_and_survives_its_deletion(tmp_path: Path) -> None:
    path = tmp_path / f"{0:020d}"
    create_sized_file(OS_FILE_SYSTEM, path, 1 << 20)
    region = OS_FILE_SYSTEM.map(path, 1 << 20)
    region.buffer[100:105] = b"hello"
    region.warm(0, 1 << 20)  # written and unwritten pages alike
    region.buffer[4096:4101] = b"world"
    region.sync()
    data = path.read_bytes()
    assert data[100:105] == b"hello"
    assert data[4096:4101] == b"world"
    assert data.count(0) == (1 << 20) - 10
    path.unlink()
    region.warm(0, 1 << 20)  # a file deleted meanwhile (retention): nothing to read, no error
    region.close()


def test_pages_made_ahead_keep_their_bytes_and_a_closed_region_is_left_alone(
    tmp_path: Path,
) -> None:
    """`warm` faults pages in writable (`MADV_POPULATE_WRITE`) where the kernel can: from an
    unaligned start, over written and unwritten pages, it changes no byte, and after the
    region closes it touches nothing."""
    path = tmp_path / f"{0:020d}"
    create_sized_file(OS_FILE_SYSTEM, path, 1 << 20)
    region = OS_FILE_SYSTEM.map(path, 1 << 20)
    region.buffer[5000:5005] = b"hello"
    release = tuple(int(part) for part in os.uname().release.split("-")[0].split(".")[:2])
    if os.uname().sysname == "Linux" and release >= (5, 14):
        assert _PAGE_MAKER.populate(region._address, 4096)  # type: ignore[attr-defined]
    region.warm(4100, 1 << 20)
    region.buffer[8192:8197] = b"world"
    region.sync()
    data = path.read_bytes()
    assert (data[5000:5005], data[8192:8197]) == (b"hello", b"world")
    assert data.count(0) == (1 << 20) - 10
    region.close()
    region.warm(0, 1 << 20)  # unmapped by now: not populated, no error
