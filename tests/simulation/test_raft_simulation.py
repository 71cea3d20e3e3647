"""Raft under seeded random faults: safety after every delivered message, a linearizable client
history, and liveness once the faults heal.

POCKETMQ_SIM_SEEDS (per cluster size; CI default 200, so 400 in all) and POCKETMQ_SIM_STEPS
(default 2,000) set the size; POCKETMQ_SIM_FIRST_SEED moves the window for fresh seeds. A
failure prints `SIM_SEED=<n>`; `SIM_SEED=<n>` in the environment runs that seed alone."""

from __future__ import annotations

import os
import time

import pytest

from tests.simulation.harness import Simulation, replay_command, run_seed

SEEDS = int(os.environ.get("POCKETMQ_SIM_SEEDS", "200"))
STEPS = int(os.environ.get("POCKETMQ_SIM_STEPS", "2000"))
FIRST_SEED = int(os.environ.get("POCKETMQ_SIM_FIRST_SEED", "0"))
ONE_SEED = os.environ.get("SIM_SEED")


def seeds() -> range:
    if ONE_SEED is not None:
        return range(int(ONE_SEED), int(ONE_SEED) + 1)
    return range(FIRST_SEED, FIRST_SEED + SEEDS)


@pytest.mark.parametrize("nodes", [3, 5])
def test_random_faults_never_break_safety_and_heal_to_a_leader(nodes: int) -> None:
    """Election safety, one vote per term, log matching, leader completeness, state machine
    safety (commands and states, snapshots included), durability of what a message promises,
    and read-index reads that see every earlier commit, after every delivered message (Raft
    paper, Figure 3); a linearizable history of client writes and reads; a bounded recovery
    once the faults heal, which serves a read too."""
    started = time.monotonic()
    reads = operations = 0
    for seed in seeds():
        outcome = run_seed(seed, nodes, STEPS)
        assert not outcome.failure, (
            f"SIM_SEED={seed} failed at {outcome.step} ms on {nodes} nodes: {outcome.failure}\n"
            f"replay: SIM_SEED={seed} python -m pytest tests/simulation/test_raft_simulation.py "
            f"-k {nodes}, "
            f"or {replay_command(seed, nodes, STEPS)}"
        )
        assert outcome.reads > 0, f"SIM_SEED={seed} served no read"
        reads += outcome.reads
        operations += outcome.operations
    count = len(seeds())
    print(  # noqa: T201
        f"{count} seeds x {STEPS} steps, {nodes} nodes: {reads / count:.0f} reads served and "
        f"{operations / count:.0f} client operations checked per seed, "
        f"{time.monotonic() - started:.1f} s"
    )
    if ONE_SEED is None:  # a few seeds commit little while the faults last (long delays)
        assert reads >= 10 * count, "the workload must serve many reads per seed"


def test_a_failing_seed_prints_how_to_replay_it() -> None:
    assert replay_command(7, 5, 2000) == (
        "python -m tests.simulation.harness --seed 7 --nodes 5 --steps 2000"
    )
    sim = Simulation(7, 3)
    sim.run(50)
    again = Simulation(7, 3)
    again.run(50)
    assert sim.checker.stored == again.checker.stored, "a seed must replay exactly"
