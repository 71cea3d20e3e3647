"""The CommitLog lets go of its mapped pages well behind the writer (`release_pages`).

Measured as the kernel counts them: the resident bytes of this process's mappings of the
log's files, from /proc/self/smaps.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.broker.ha.master import HAMaster
from pocketmq.broker.ha.settings import HASettings
from pocketmq.runtime.clock import SystemClock
from pocketmq.store.config import FlushDiskType
from pocketmq.store.mapped_file import RELEASE_STEP_BYTES, MappedFileQueue
from pocketmq.store.message_store import MessageStore
from pocketmq.testing.waiting import async_wait_until

from .conftest import message, small_config

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps").exists(), reason="needs Linux's /proc/self/smaps"
)

MIB = 1 << 20


def resident_bytes(directory: Path) -> int:
    """This process's resident bytes of its mappings of files under `directory`."""
    prefix = str(directory.resolve()) + "/"
    total = 0
    counting = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and fields[0] == "Rss:":
                if counting:
                    total += int(fields[1]) * 1024
            elif fields and "-" in fields[0] and not fields[0].endswith(":"):
                counting = len(fields) >= 6 and fields[5].startswith(prefix)
    return total


def test_release_keeps_only_the_window_behind_the_durable_end(tmp_path: Path) -> None:
    files = MappedFileQueue(tmp_path / "log", 4 * MIB)
    chunk = bytes(range(256)) * 256  # 64 KiB
    written = 40 * MIB
    for _ in range(written // len(chunk)):
        files.last_file_for_write().write(chunk)
    files.flush()
    before = resident_bytes(tmp_path)
    assert before >= written - MIB

    keep = 8 * MIB
    files.release_pages(keep)
    after = resident_bytes(tmp_path)
    assert keep - 64 * 1024 <= after <= keep + 64 * 1024, (before, after)

    # Less than a step more: nothing let go of yet.
    for _ in range(RELEASE_STEP_BYTES // len(chunk) // 2):
        files.last_file_for_write().write(chunk)
    files.flush()
    files.release_pages(keep)
    assert resident_bytes(tmp_path) >= after + RELEASE_STEP_BYTES // 2 - 64 * 1024

    # What was let go of reads back as written (from the page cache), and maps again.
    first = files.files[0]
    assert first.read(0, len(chunk)) == chunk
    assert files.files[5].read(4 * MIB - len(chunk), len(chunk)) == chunk
    files.close()


def test_pages_read_back_are_let_go_of_once_they_add_up_to_a_step(tmp_path: Path) -> None:
    files = MappedFileQueue(tmp_path / "log", 4 * MIB)
    chunk = bytes(64 * 1024)
    for _ in range(40 * MIB // len(chunk)):
        files.last_file_for_write().write(chunk)
    files.flush()
    files.release_pages(8 * MIB)
    released = resident_bytes(tmp_path)

    def read_back(start: int, end: int) -> None:
        for offset in range(start, end, len(chunk)):
            mapped = files.find(offset)
            assert mapped is not None
            mapped.read(offset - mapped.file_from_offset, len(chunk))
        files.note_read_back(start, end)

    read_back(2 * MIB, 6 * MIB)
    files.release_pages(8 * MIB)  # 4 MiB read back: less than a step, kept
    assert resident_bytes(tmp_path) >= released + 4 * MIB - 64 * 1024
    read_back(10 * MIB, 16 * MIB)
    files.release_pages(8 * MIB)  # [2, 16) MiB: let go of
    assert resident_bytes(tmp_path) <= released + 64 * 1024
    files.close()


def test_pages_written_again_after_a_truncation_are_let_go_of(tmp_path: Path) -> None:
    files = MappedFileQueue(tmp_path / "log", 4 * MIB)
    chunk = bytes(64 * 1024)

    def write(size: int) -> None:
        for _ in range(size // len(chunk)):
            files.last_file_for_write().write(chunk)

    write(40 * MIB)
    files.flush()
    files.release_pages(8 * MIB)
    files.truncate(10 * MIB)  # a replica cut back to where its leader's log forks
    write(30 * MIB)
    files.flush()
    files.release_pages(8 * MIB)
    resident = resident_bytes(tmp_path)
    assert 8 * MIB - 64 * 1024 <= resident <= 8 * MIB + 64 * 1024, resident
    files.close()


def test_release_skips_closed_files(tmp_path: Path) -> None:
    files = MappedFileQueue(tmp_path / "log", 4 * MIB)
    for _ in range(4):
        files.last_file_for_write().write(bytes(4 * MIB))
    files.flush()
    files.files[0].close()
    files.release_pages(0)
    assert resident_bytes(tmp_path) <= 64 * 1024
    files.close()


WINDOW = MIB
FILE_SIZE = 4 * MIB
BODY = b"x" * 1000


def filled_store(root: Path, flush: FlushDiskType) -> MessageStore:
    """A store with more than a step beyond its window written, all of it mapped."""
    config = small_config(
        root,
        mapped_file_size_commit_log=FILE_SIZE,
        commit_log_resident_window=WINDOW,
        flush_disk_type=flush,
        flush_interval_commit_log_ms=10,
    )
    store = MessageStore(config)
    store.load()
    for _ in range(130):
        assert store.put_messages_now([message(body=BODY) for _ in range(100)]).ok
    stored = store.commit_log.max_offset
    assert stored > RELEASE_STEP_BYTES + WINDOW + MIB
    assert resident_bytes(store.commit_log.files.directory) >= stored - MIB
    return store


async def released(store: MessageStore) -> int:
    """The log's resident bytes once the flush service let go of what it may (10 s at most)."""
    # A put through the flush service: group commit syncs only for a waiting writer.
    assert (await store.put_message(message(body=BODY))).ok
    directory = store.commit_log.files.directory
    await async_wait_until(
        lambda: resident_bytes(directory) <= WINDOW + FILE_SIZE,
        "the flush service let go of the log's old pages",
        timeout_s=10,
        poll_s=0.02,
        describe=lambda: f"{resident_bytes(directory)} bytes resident",
    )
    return resident_bytes(directory)


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_store_flush_service_releases_pages(tmp_path: Path, flush: FlushDiskType) -> None:
    """The store's CommitLog flush, periodic or group commit, lets go of old pages, and again
    of those a consumer far behind maps back."""
    store = filled_store(tmp_path / "store", flush)

    async def run() -> tuple[int, int, int]:
        await store.start()
        first = await released(store)
        offset = 0
        while (result := store.get_message("TopicTest", 0, offset, 32)).message_count:
            offset = result.next_begin_offset
        read_back = resident_bytes(store.commit_log.files.directory)
        second = await released(store)
        await store.shutdown()
        return first, read_back, second

    first, read_back, second = asyncio.run(run())
    assert first <= WINDOW + FILE_SIZE, first
    assert read_back >= store.commit_log.max_offset - 2 * MIB, read_back
    assert second <= WINDOW + FILE_SIZE, second


def test_pages_a_slave_catching_up_maps_back_are_let_go_of(tmp_path: Path) -> None:
    """The master's reads for a slave far behind count as reads back too."""
    store = filled_store(tmp_path / "store", FlushDiskType.ASYNC_FLUSH)
    master = HAMaster(store, HASettings(), SystemClock())

    async def run() -> tuple[int, int]:
        await store.start()
        await released(store)
        offset = store.commit_log.min_offset
        while offset < store.commit_log.max_offset:
            offset += len(master._read(offset, 32 * 1024))  # what the transfer loop sends
        read_back = resident_bytes(store.commit_log.files.directory)
        second = await released(store)
        await store.shutdown()
        return read_back, second

    read_back, second = asyncio.run(run())
    assert read_back >= store.commit_log.max_offset - 2 * MIB, read_back
    assert second <= WINDOW + FILE_SIZE, second
