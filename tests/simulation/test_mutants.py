"""The checker must catch real bugs: each mutant in `mutants.CATALOGUE` is run through the random
simulation until a seed fails, within its CI budget; a mutant that survives fails the suite. The
seed that caught it must pass with the real core, so the catch is the bug's and not the
checker's.

POCKETMQ_SIM_STEPS sets the steps per seed (default 2,000); POCKETMQ_MUTANT_SEEDS overrides
every mutant's seed budget. The catch-rate table: python -m tests.simulation.mutants"""

from __future__ import annotations

import os

import pytest

from tests.simulation.harness import replay_command, run_seed
from tests.simulation.mutants import CATALOGUE, Mutant, first_catch
from tests.simulation.test_raft_scenarios import figure_8

STEPS = int(os.environ.get("POCKETMQ_SIM_STEPS", "2000"))
BUDGET = os.environ.get("POCKETMQ_MUTANT_SEEDS")


@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda m: m.raft_class.__name__)
def test_simulation_catches_mutant(mutant: Mutant) -> None:
    seeds = int(BUDGET) if BUDGET else mutant.seeds
    if mutant.scripted:
        with pytest.raises(AssertionError):
            figure_8(mutant.raft_class)
        return
    caught = first_catch(mutant, STEPS, range(seeds))
    assert caught is not None, (
        f"the mutant {mutant.name!r} survived {seeds} seeds x {STEPS} steps on 3 and 5 nodes"
    )
    clean = run_seed(caught.seed, caught.nodes, STEPS)
    assert not clean.failure, (
        f"SIM_SEED={caught.seed} fails without the mutant too: {clean.failure}\n"
        f"replay: {replay_command(caught.seed, caught.nodes, STEPS)}"
    )
