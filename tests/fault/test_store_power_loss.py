"""A FLUSHED receipt survives a power loss: the store on a simulated disk that keeps only what
was synced.

SIGKILL cannot prove an fsync (the page cache outlives the process), so these rounds run the
store on `SimulatedDisk`. Each round recovers the store the last round left, appends with
SYNC_FLUSH from several writers, and then either loses power at a random call to the disk
(unsynced pages come back old, new or torn; unsynced directory changes partly) or crashes the
process only (the page cache survives, unsynced). The next round checks, as the store's next
start sees it, that every message answered FLUSHED reads back with its exact bytes, that every
stored record is a correct message, and that queues and index agree with the CommitLog
(`store_checks.check_store`). The store's clock runs ahead of the wall clock
(`HurriedClock`), so that a round spans seconds of store time and recovery starts inside the
log, as after a broker's longer run.

Mutants (a skipped fdatasync, a directory left unsynced, recovery trusting the page cache) must
each fail the same check within the CI rounds: otherwise the check proves nothing.
`POCKETMQ_POWER_LOSS_ROUNDS` sets the round count (CI default 40), `POCKETMQ_POWER_LOSS_SEED`
replays one run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pocketmq.common.stored_message import MessageDecodeError
from pocketmq.runtime import filesystem
from pocketmq.runtime.clock import SystemClock
from pocketmq.store import mapped_file, message_store
from pocketmq.store.api import Durability, PutStatus
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.testing.simulated_disk import SimulatedDisk
from tests.fault.store_checks import check_store
from tests.fault.store_writer import WRITERS, config, expected_message

ROUNDS = int(os.environ.get("POCKETMQ_POWER_LOSS_ROUNDS", "40"))
SEED = int(os.environ.get("POCKETMQ_POWER_LOSS_SEED", str(random.randrange(1 << 30))))
# Mutants run on a fixed seed (the CI's), until caught: a fresh seed each run would make the
# suite's verdict a matter of luck. Measured over 21 seeds, each is caught within 22 rounds;
# but a round's crash point also depends on thread timing, and on seed 1 trust_recovered_bytes
# was caught after 19, 62 and 68 rounds in three runs and survived 100 once: the budget is 300
# (the loop ends at the first catch, so it costs nothing while the checks hold).
MUTANT_SEED = int(os.environ.get("POCKETMQ_POWER_LOSS_SEED", "1"))
MUTANT_ROUNDS = max(ROUNDS, 300)
# A round takes about half a second on two busy cores: long runs get the time they need.
pytestmark = [pytest.mark.fault, pytest.mark.timeout(max(300, 3 * MUTANT_ROUNDS))]
ROOT = Path("/power-loss/store")
PUTS_PER_ROUND_MAX = 400
# Small files: a round rolls over several, so unsynced bytes end up in files that are no
# longer the last (where a flush of the last file would not reach them).
STORE_CONFIG = dataclasses.replace(config(str(ROOT)), mapped_file_size_commit_log=64 * 1024)
# Queues and index flushed every 10 ms: a round, shorter than the default 1 s, then sees
# flushes of them in progress, as a broker running for hours does.
FREQUENT_FLUSH_CONFIG = dataclasses.replace(STORE_CONFIG, flush_interval_consume_queue_ms=10)
CLOCK_STEP_MS = 20


class HurriedClock(SystemClock):
    """Store time that runs `CLOCK_STEP_MS` further ahead at every reading.

    A round's few hundred puts then span seconds of store time, as a broker's run does, so
    recovery's safe point (the checkpoint's oldest time less RocketMQ's 3 s) falls inside the
    log and recovery trusts what lies before it. At the wall clock's pace, a round lasts well
    under 3 s and nearly every recovery would re-read the whole log, which tests much less.
    """

    _readings = itertools.count()

    def now_ms(self) -> int:
        return int(time.time() * 1000) + CLOCK_STEP_MS * next(self._readings)


CLOCK = HurriedClock()


async def write_round(
    disk: SimulatedDisk, first_seq: int, rng: random.Random, store_config: MessageStoreConfig
) -> dict[int, int]:
    """Appends until the power goes (or a process crash); returns the FLUSHED acks."""
    store = MessageStore(store_config, fs=disk, disk_usage=lambda: 0.0, clock=CLOCK)
    store.load()
    await store.start()
    power_loss = rng.random() < 0.6
    disk.lose_power_at(rng.randint(1, 150), process_only=not power_loss)
    puts = rng.randint(1, PUTS_PER_ROUND_MAX)
    acks: dict[int, int] = {}
    next_seq = first_seq

    async def writer() -> None:
        nonlocal next_seq
        while next_seq < first_seq + puts and disk.powered:
            seq = next_seq
            next_seq += 1
            result = await store.put_message(expected_message(seq))
            if result.status is PutStatus.PUT_OK:
                assert result.durability is Durability.FLUSHED
                acks[seq] = result.physical_offsets[0]

    async with asyncio.timeout(60):
        await asyncio.gather(*(writer() for _ in range(WRITERS)))
    if power_loss:
        disk.power_loss()
    else:
        disk.crash_process()
    store.close()  # what is left of the process; its files are gone with it
    disk.reboot()
    return acks


def run_rounds(
    seed: int, rounds: int, store_config: MessageStoreConfig = STORE_CONFIG
) -> Iterator[tuple[int, dict[int, int]]]:
    """Runs `rounds` rounds and checks the store after each; yields (round, all acks)."""
    rng = random.Random(seed)
    disk = SimulatedDisk(seed)
    acked: dict[int, int] = {}
    next_seq = 0
    for number in range(rounds):
        acked.update(asyncio.run(write_round(disk, next_seq, rng, store_config)))
        highest, _stored = check_store(ROOT, acked, disk, store_config)
        next_seq = max(highest, max(acked, default=-1)) + 1
        yield number, acked


def test_flushed_messages_survive_power_loss() -> None:
    sys.stdout.write(f"POCKETMQ_POWER_LOSS_SEED={SEED}\n")
    acked: dict[int, int] = {}
    for _number, acked_so_far in run_rounds(SEED, ROUNDS):
        acked = acked_so_far
    assert len(acked) > ROUNDS * 20, "hardly anything was acknowledged; the test proves nothing"


def test_the_index_survives_power_loss_with_derived_files_flushed_within_rounds() -> None:
    # Rounds last less than the default 1 s flush of queues and index, so the test above
    # rarely sees a flush of them in progress; `FREQUENT_FLUSH_CONFIG` does. Before the
    # index's recovery checked what a power loss left of its newest entries and slots
    # (`IndexFile.recover`), every seed tried failed here within the first rounds with
    # "index lost"; once rounds spanned seconds of store time (`HurriedClock`), every seed
    # tried failed again, until recovery also synced the names of queue files found after a
    # crash and stopped taking an index sector that is not all zeros for written whole. Those
    # two defects show here only now and then, so each has a test of its own that fails
    # without the fix every time: `test_recovered_queue_files.py` and
    # `test_index_recovery.py::test_a_sector_synced_half_full_loses_the_entries_after_the_sync`.
    sys.stdout.write(f"POCKETMQ_POWER_LOSS_SEED={SEED}\n")
    for _number, _acked in run_rounds(SEED, ROUNDS, FREQUENT_FLUSH_CONFIG):
        pass


def skip_commit_log_fdatasync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CommitLog's flush marks bytes flushed without syncing them."""
    real_flush = mapped_file.MappedFile.flush

    def flush(self: mapped_file.MappedFile) -> int:
        if "commitlog" in str(self.path):
            self.flushed_position = self.wrote_position
            return self.flushed_position
        return real_flush(self)

    monkeypatch.setattr(mapped_file.MappedFile, "flush", flush)


def skip_directory_sync_of_new_files(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new mapped file is renamed into place, but its directory is never synced."""

    def create_sized_file(
        fs: filesystem.FileSystem, path: Path, size: int, *, durable: bool = True
    ) -> None:
        temporary = path.with_name(path.name + ".tmp")
        handle = fs.open(temporary, create=True)
        try:
            handle.truncate(size)
            if durable:
                handle.sync()
        finally:
            handle.close()
        fs.rename(temporary, path)

    monkeypatch.setattr(mapped_file, "create_sized_file", create_sized_file)


def trust_recovered_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defect this suite was written for: after an unclean stop, recovery marks what it
    found as flushed without syncing it."""
    real_load = message_store.MessageStore.load

    def load(self: message_store.MessageStore) -> object:
        with monkeypatch.context() as patch:
            patch.setattr(message_store.MessageStore, "_flush_all", lambda store: None)
            result = real_load(self)
        for mapped in self.commit_log.files.files:
            mapped.flushed_position = mapped.wrote_position
        return result

    monkeypatch.setattr(message_store.MessageStore, "load", load)


MUTANTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "skip_commit_log_fdatasync": skip_commit_log_fdatasync,
    "skip_directory_sync_of_new_files": skip_directory_sync_of_new_files,
    "trust_recovered_bytes": trust_recovered_bytes,
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_power_loss_check_catches_mutant(mutant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    MUTANTS[mutant](monkeypatch)
    rounds = 0
    caught_at: int | None = None
    try:
        for number, _acked in run_rounds(MUTANT_SEED, MUTANT_ROUNDS):
            rounds = number + 1
    except (AssertionError, MessageDecodeError):  # a check failed, or a queue entry led nowhere
        caught_at = rounds + 1
    sys.stdout.write(
        f"POCKETMQ_POWER_LOSS_SEED={MUTANT_SEED} {mutant}: caught after {caught_at} rounds\n"
    )
    assert caught_at is not None, f"mutant {mutant} survived {MUTANT_ROUNDS} rounds"
