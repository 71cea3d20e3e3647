"""Controller mode's write rule and replication states under seeded slave faults
(`qos_sim.py`): no member of the SyncStateSet ever lacks an acknowledged put, NO_LOSS never
acknowledges a single copy, and the group climbs back to SYNC; each mutant of the rule is
caught.

POCKETMQ_QOS_SIM_SEEDS (CI default 30) and POCKETMQ_QOS_SIM_STEPS (default 4,000) set the size;
a failure prints `SIM_SEED=<n>`, and `SIM_SEED=<n>` in the environment runs that seed alone."""

from __future__ import annotations

import os

import pytest

from pocketmq.broker.controlled.sync_state import SyncStateSet
from pocketmq.common.ha_qos import HaState
from tests.simulation.qos_sim import MUTANTS, run_qos_seed

SEEDS = int(os.environ.get("POCKETMQ_QOS_SIM_SEEDS", "30"))
STEPS = int(os.environ.get("POCKETMQ_QOS_SIM_STEPS", "4000"))
ONE_SEED = os.environ.get("SIM_SEED")
MUTANT_SEEDS = 30


def seeds() -> range:
    if ONE_SEED is not None:
        return range(int(ONE_SEED), int(ONE_SEED) + 1)
    return range(SEEDS)


def test_the_rule_keeps_every_acknowledged_put_on_the_set_and_climbs_back_to_sync() -> None:
    visited: set[HaState] = set()
    acked = 0
    for seed in seeds():
        outcome = run_qos_seed(seed, STEPS)
        assert not outcome.failure, (
            f"SIM_SEED={seed} failed at {outcome.step} ms: {outcome.failure}"
        )
        visited |= outcome.states
        acked += outcome.acked
    if ONE_SEED is None:
        assert visited >= {HaState.ASYNC, HaState.SEMI_SYNC, HaState.SYNC}, visited
        assert acked >= 100 * len(seeds()), "the workload must acknowledge puts"


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.__name__)
def test_the_simulation_catches_a_broken_rule(mutant: type[SyncStateSet]) -> None:
    for seed in range(MUTANT_SEEDS):
        if run_qos_seed(seed, STEPS, mutant).failure:
            return
    pytest.fail(f"{mutant.__name__} survived {MUTANT_SEEDS} seeds x {STEPS} steps")
