"""A DLedger group (real CommitLogStateMachine over real MessageStores) under the seeded faults
of the Raft simulation: identical CommitLog bytes per applied index, acknowledged PUTs found on
every replica that applied them, acknowledged offset commits that never go back.

POCKETMQ_DLEDGER_SIM_SEEDS (per cluster size; CI default 12) and POCKETMQ_DLEDGER_SIM_STEPS
(default 1,500) set the size; POCKETMQ_SIM_FIRST_SEED moves the window. A failure prints
`SIM_SEED=<n>`; `SIM_SEED=<n>` in the environment runs that seed alone."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.simulation.dledger_sim import MUTANTS, Mutant, replay_command, run_dledger_seed

SEEDS = int(os.environ.get("POCKETMQ_DLEDGER_SIM_SEEDS", "12"))
STEPS = int(os.environ.get("POCKETMQ_DLEDGER_SIM_STEPS", "1500"))
FIRST_SEED = int(os.environ.get("POCKETMQ_SIM_FIRST_SEED", "0"))
ONE_SEED = os.environ.get("SIM_SEED")


def seeds() -> range:
    if ONE_SEED is not None:
        return range(int(ONE_SEED), int(ONE_SEED) + 1)
    return range(FIRST_SEED, FIRST_SEED + SEEDS)


@pytest.mark.parametrize("nodes", [3, 5])
def test_random_faults_keep_dledger_replicas_identical(nodes: int, tmp_path: Path) -> None:
    started = time.monotonic()
    puts = commits = 0
    for seed in seeds():
        outcome = run_dledger_seed(seed, nodes, STEPS, root=tmp_path)
        assert not outcome.failure, (
            f"SIM_SEED={seed} failed at {outcome.step} ms on {nodes} nodes: {outcome.failure}\n"
            f"replay: {replay_command(seed, nodes, STEPS)}"
        )
        puts += outcome.reads
        commits += outcome.operations
    print(  # noqa: T201
        f"{len(seeds())} seeds x {STEPS} steps, {nodes} nodes: {puts} PUTs and {commits} offset "
        f"commits acknowledged, {time.monotonic() - started:.1f} s"
    )
    if ONE_SEED is None:
        assert puts >= 5 * len(seeds()), "the workload must acknowledge PUTs"
        assert commits >= 2 * len(seeds()), "the workload must acknowledge offset commits"


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.machine_class.__name__)
def test_simulation_catches_state_machine_mutant(mutant: Mutant, tmp_path: Path) -> None:
    for seed in range(mutant.seeds):
        caught = run_dledger_seed(seed, 3, STEPS, mutant.machine_class, root=tmp_path)
        if caught.failure:
            clean = run_dledger_seed(seed, 3, STEPS, root=tmp_path)
            assert not clean.failure, f"SIM_SEED={seed} fails without the mutant: {clean.failure}"
            return
    pytest.fail(f"the mutant {mutant.name!r} survived {mutant.seeds} seeds x {STEPS} steps")


def test_a_leader_restarted_in_its_term_keeps_its_replicated_offset_commits(
    tmp_path: Path,
) -> None:
    """A mutant of `DLedgerReplica._origin` that names (node, current term) whatever the role
    (the first version did): node 3 leads term 1, crashes, restarts as a follower still in
    term 1 and skips its own META entries when it replays them, losing acknowledged offsets."""
    outcome = run_dledger_seed(2, 3, STEPS, root=tmp_path, origin_while_leading=False)
    assert "below the acknowledged commit" in outcome.failure
    assert not run_dledger_seed(2, 3, STEPS, root=tmp_path).failure


def test_a_snapshot_that_skips_commit_log_data_stops_the_replica_it_reaches(
    tmp_path: Path,
) -> None:
    """Followers compact too (as `RaftNode` lets them); one that then leads may install its
    image on a replica whose CommitLog ends before the image's end. That replica stops with
    DivergenceError instead of appending every later message at the wrong offset."""
    outcome = run_dledger_seed(8, 3, STEPS, root=tmp_path, followers_compact=True)
    assert "DivergenceError" in outcome.failure
    assert "lacks data the group committed" in outcome.failure
