"""Raft under seeded random faults: safety after every step, liveness once the faults heal.

POCKETMQ_SIM_SEEDS (per cluster size; CI default 250, so 500 in all) and POCKETMQ_SIM_STEPS
(default 2,000) set the size; POCKETMQ_SIM_FIRST_SEED moves the window for fresh seeds."""

from __future__ import annotations

import os
import time

import pytest

from pocketmq.raft.core import Raft
from tests.simulation.checker import SafetyViolation
from tests.simulation.harness import Simulation, replay_command, simulate

SEEDS = int(os.environ.get("POCKETMQ_SIM_SEEDS", "250"))
STEPS = int(os.environ.get("POCKETMQ_SIM_STEPS", "2000"))
FIRST_SEED = int(os.environ.get("POCKETMQ_SIM_FIRST_SEED", "0"))


@pytest.mark.parametrize("nodes", [3, 5])
def test_random_faults_never_break_safety_and_heal_to_a_leader(nodes: int) -> None:
    """Election safety, log matching, leader completeness, state machine safety and read-index
    linearizability after every step (Raft paper, Figure 3); then a bounded recovery."""
    started = time.monotonic()
    terms = commits = 0
    for seed in range(FIRST_SEED, FIRST_SEED + SEEDS):
        try:
            sim = simulate(seed, nodes, STEPS)
        except AssertionError as failure:
            raise AssertionError(
                f"seed {seed} failed: {failure}\nreplay: {replay_command(seed, nodes, STEPS)}"
            ) from failure
        terms += len(sim.checker.leaders)
        commits += sim.checker.commit_index
    print(  # noqa: T201
        f"{SEEDS} seeds x {STEPS} steps, {nodes} nodes: {terms} terms with a leader, "
        f"{commits} entries committed, {time.monotonic() - started:.1f} s"
    )


class VotesForStaleLogs(Raft):
    """A known bug: grants votes without comparing logs (Raft paper §5.4.1)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.log.is_up_to_date = lambda last_index, last_term: True  # type: ignore[method-assign]


def test_checker_catches_a_node_that_votes_for_stale_logs() -> None:
    failures = []
    for seed in range(40):
        try:
            simulate(seed, 3, STEPS, VotesForStaleLogs)
        except SafetyViolation as violation:
            failures.append(str(violation))
    assert failures, "40 seeds ran a buggy Raft and the checker saw nothing"
    assert any("leader completeness" in failure for failure in failures), failures


def test_a_failing_seed_prints_how_to_replay_it() -> None:
    assert replay_command(7, 5, 2000) == (
        "python -m tests.simulation.harness --seed 7 --nodes 5 --steps 2000"
    )
    sim = Simulation(7, 3)
    sim.run(50)
    again = Simulation(7, 3)
    again.run(50)
    assert sim.checker.stored == again.checker.stored, "a seed must replay exactly"
