"""Queue files that a killed process created reach the next start through the page cache only.

A ConsumeQueue file is created without a sync (the flush thread syncs its name later), so after
a SIGKILL the next start may find a file whose directory entry never reached the disk. Recovery
trusts its entries, and the checkpoints written after that vouch for them: if the file's name
is still not durable when the power goes, those entries are lost behind recovery's safe point
and the queue has a hole. The store must sync the names of the queue files it loaded after an
unclean stop. This test builds that sequence step by step, deterministically; the mutant shows
it fails when the store does not.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from pocketmq.common.stored_message import MessageDecodeError
from pocketmq.runtime.clock import ManualClock
from pocketmq.store import consume_queue_table
from pocketmq.store.api import PutStatus
from pocketmq.store.message_store import MessageStore
from pocketmq.testing.simulated_disk import SimulatedDisk
from tests.fault.store_checks import check_store
from tests.fault.store_writer import QUEUES, config, expected_message

pytestmark = pytest.mark.fault
ROOT = Path("/recovered-queue-files/store")
# Queue files of 20 entries, so that the second batch opens a new file in every queue; small
# CommitLog files, so that recovery's safe point can fall after the first; the periodic flush of
# queues never runs (only the explicit flushes below).
STORE_CONFIG = dataclasses.replace(
    config(str(ROOT)),
    mapped_file_size_commit_log=64 * 1024,
    mapped_file_size_consume_queue=20 * 20,
    flush_interval_consume_queue_ms=3_600_000,
)


async def put(store: MessageStore, seqs: range, acked: dict[int, int]) -> None:
    for seq in seqs:
        result = await store.put_message(expected_message(seq))
        assert result.status is PutStatus.PUT_OK
        acked[seq] = result.physical_offsets[0]


async def killed_after_new_queue_files(disk: SimulatedDisk, clock: ManualClock) -> dict[int, int]:
    """A first process: a checkpoint, then new queue files (their names not synced), SIGKILL."""
    acked: dict[int, int] = {}
    store = MessageStore(STORE_CONFIG, fs=disk, disk_usage=lambda: 0.0, clock=clock)
    store.load()
    await store.start()
    await put(store, range(10 * QUEUES), acked)
    store._flush_derived()  # a periodic flush of queues and index, and its checkpoint
    clock.advance(1)
    await put(store, range(10 * QUEUES, 30 * QUEUES), acked)  # every queue opens a second file
    disk.crash_process()
    store.close()
    disk.reboot()
    return acked


async def restarted_then_power_lost(
    disk: SimulatedDisk, clock: ManualClock, acked: dict[int, int]
) -> None:
    """The next process: recovery, writes and a checkpoint far past the first process's
    messages, then the power goes and every directory change not synced is lost."""
    store = MessageStore(STORE_CONFIG, fs=disk, disk_usage=lambda: 0.0, clock=clock)
    store.load()
    await store.start()
    clock.advance(60)
    await put(store, range(30 * QUEUES, 31 * QUEUES), acked)
    store._flush_derived()  # the checkpoint now vouches for everything stored before
    disk.power_loss(unsynced_names_kept=False)
    store.close()
    disk.reboot()


def run_scenario() -> None:
    disk, clock = SimulatedDisk(0), ManualClock()
    acked = asyncio.run(killed_after_new_queue_files(disk, clock))
    asyncio.run(restarted_then_power_lost(disk, clock, acked))
    check_store(ROOT, acked, disk, STORE_CONFIG)


def test_queue_files_found_after_a_crash_keep_their_entries_through_a_power_loss() -> None:
    run_scenario()


def test_the_scenario_fails_when_recovery_trusts_the_names_of_queue_files(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        consume_queue_table.ConsumeQueueTable, "distrust_loaded_files", lambda table: None
    )
    with pytest.raises((AssertionError, MessageDecodeError)):
        run_scenario()
