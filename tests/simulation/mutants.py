"""A catalogue of bugs injected into the Raft core, each a subclass the simulation runs instead
of `Raft`. The production code stays clean: every mutant overrides a method or wraps the
instance's log from here. A checker is only as good as the bugs it catches: `test_mutants.py`
requires the simulation to catch each of these within a small seed budget.

Print the catch-rate table (docs/raft.md):
python -m tests.simulation.mutants --seeds 50 --steps 2000
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pocketmq.raft.core import Raft, RaftConfig, Role
from pocketmq.raft.log import RaftLog
from pocketmq.raft.messages import (
    Entry,
    HardState,
    Message,
    MessageType,
    ReadState,
    Ready,
    Snapshot,
)
from tests.simulation.harness import Outcome, run_seed


class PatchesLog(Raft):
    """A mutant that replaces methods of the node's log once it is built."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.patch_log(self.log)

    def patch_log(self, log: RaftLog) -> None:
        raise NotImplementedError


class ForgetsVoteOnRestart(Raft):
    """Restarts with the term it persisted but not the vote (Raft paper §5.2, Figure 2:
    votedFor is persistent state)."""

    def __init__(self, *args: Any, hard_state: HardState | None = None, **kwargs: Any) -> None:
        if hard_state is not None:
            hard_state = replace(hard_state, vote=0)
        super().__init__(*args, hard_state=hard_state, **kwargs)


class ReadIndexWithoutQuorum(Raft):
    """Releases a read at the commit index without the heartbeat round that confirms it still
    leads (Ongaro's thesis §6.4 step 3)."""

    def _start_read(self, context: bytes) -> None:
        self._read_states.append(ReadState(context, self.log.committed))


class ReadsWithoutLeaseOrQuorum(Raft):
    """Serves reads at once from whatever it has committed, and never steps down when cut off
    (no check-quorum lease, no heartbeat round, no wait for its own term's first commit)."""

    def __init__(
        self, node_id: int, voters: Sequence[int], config: RaftConfig, *args: Any, **kwargs: Any
    ) -> None:
        super().__init__(node_id, voters, replace(config, check_quorum=False), *args, **kwargs)

    def read_index(self, context: bytes) -> bool:
        if self.role is not Role.LEADER:
            return False
        self._read_states.append(ReadState(context, self.log.committed))
        return True


class IgnoresPrevTerm(PatchesLog):
    """A follower accepts an append when it holds the previous index, whatever its term
    (Raft paper §5.3, the AppendEntries consistency check)."""

    def patch_log(self, log: RaftLog) -> None:
        original = log.try_append

        def try_append(
            prev_index: int, prev_term: int, commit: int, entries: tuple[Entry, ...]
        ) -> int | None:
            held = log.term(prev_index)
            return original(prev_index, prev_term if held is None else held, commit, entries)

        log.try_append = try_append  # type: ignore[method-assign]


class UpToDateIgnoresTerms(PatchesLog):
    """Compares only log lengths when voting (Raft paper §5.4.1 compares last terms first)."""

    def patch_log(self, log: RaftLog) -> None:
        log.is_up_to_date = lambda last_index, last_term: last_index >= log.last_index  # type: ignore[method-assign]


class VotesForStaleLogs(PatchesLog):
    """Grants votes without comparing logs at all (Raft paper §5.4.1)."""

    def patch_log(self, log: RaftLog) -> None:
        log.is_up_to_date = lambda last_index, last_term: True  # type: ignore[method-assign]


class SnapshotDropsKeys(Raft):
    """Compacts behind an image that lost a key of the state machine."""

    def compact(self, index: int, data: bytes) -> Snapshot:
        image = json.loads(data)
        for key in sorted(image["data"])[:1]:
            del image["data"][key]
        return super().compact(index, json.dumps(image).encode())


class CommitsByCount(Raft):
    """Commits an entry of an earlier term once a majority holds it (Raft paper §5.4.2,
    Figure 8 shows how such an entry is then overwritten)."""

    def _can_commit(self, index: int) -> bool:
        return True


class AcksBeforePersisting(Raft):
    """Hands new entries to the driver for persisting only at the next tick (a group commit),
    while the follower's acknowledgement goes out at once: a crash in between loses entries
    the leader counted."""

    _release = False

    def tick(self) -> None:
        self._release = True
        super().tick()

    def ready(self) -> Ready:
        ready = super().ready()
        if ready.entries and not self._release:
            ready.entries = []  # still unstable: handed over again at the next Ready
        elif ready.entries:
            self._release = False
        return ready


class AppliesAheadOfCommit(PatchesLog):
    """Hands the state machine the entry after the commit index too."""

    def patch_log(self, log: RaftLog) -> None:
        def to_apply() -> list[Entry]:
            high = min(log.committed + 1, log.stable, log.last_index)
            return log.slice(log.applied + 1, high + 1) if high > log.applied else []

        log.to_apply = to_apply  # type: ignore[method-assign]

    def has_ready(self) -> bool:
        log = self.log
        ahead = min(log.committed + 1, log.stable, log.last_index) > log.applied
        return ahead or super().has_ready()


class SnapshotOverNewerEntries(Raft):
    """A follower installs any snapshot the leader sends, even one older than what it has
    committed, throwing away the newer entries."""

    def _handle_snapshot(self, m: Message) -> None:
        snapshot = m.snapshot
        assert snapshot is not None
        self.log.restore(snapshot)
        self._send(MessageType.APPEND_RESPONSE, m.src, index=self.log.last_index)


@dataclass(frozen=True)
class Mutant:
    name: str
    raft_class: type[Raft]
    seeds: int
    """The CI budget: the simulation must catch it within this many seeds per cluster size."""
    scripted: bool = False
    """Random seeds rarely reach it within the budget: the scripted scenario that shows the
    bug (Figure 8 of the Raft paper) counts as the catch."""

    @property
    def description(self) -> str:
        return (self.raft_class.__doc__ or "").split("\n\n")[0].replace("\n", " ").strip()


CATALOGUE = (
    Mutant("forgets its vote on restart", ForgetsVoteOnRestart, 30),
    Mutant("read index without quorum check", ReadIndexWithoutQuorum, 30),
    Mutant("reads without lease or quorum", ReadsWithoutLeaseOrQuorum, 30),
    Mutant("follower ignores the previous entry's term", IgnoresPrevTerm, 30),
    Mutant("up-to-date check ignores terms", UpToDateIgnoresTerms, 30),
    Mutant("votes for stale logs", VotesForStaleLogs, 30),
    Mutant("snapshot drops keys", SnapshotDropsKeys, 30),
    Mutant("commits by count", CommitsByCount, 30, scripted=True),
    Mutant("acknowledges entries before persisting them", AcksBeforePersisting, 30),
    Mutant("applies ahead of the commit index", AppliesAheadOfCommit, 30),
    Mutant("installs a snapshot over newer entries", SnapshotOverNewerEntries, 30),
)


def first_catch(
    mutant: Mutant, steps: int, seeds: Sequence[int], sizes: Sequence[int] = (3, 5)
) -> Outcome | None:
    """The first run (seed by seed, each cluster size in turn) that fails with the mutant in,
    or None if it survives them all."""
    for seed in seeds:
        for nodes in sizes:
            outcome = run_seed(seed, nodes, steps, mutant.raft_class)
            if outcome.failure:
                return outcome
    return None


CHECKS = (
    ("misses writes committed", "read index behind the commit index"),
    ("beyond its commit index", "applied beyond the commit index"),
    ("moved its commit index back", "commit index moved back"),
    ("over the", "snapshot older than what was applied"),
    ("a committed entry conflicts", "the core's own assertion"),
    ("committed entries differ", "committed entries differ"),
)


def check_name(failure: str) -> str:
    """The check a failure message comes from, in a few words."""
    for pattern, name in CHECKS:
        if pattern in failure:
            return name
    head = failure.split(":")[0]
    return head if len(head) <= 30 else "other"


def scripted_catch(mutant: Mutant) -> str:
    """Whether the scripted Figure 8 scenario catches the mutant."""
    from tests.simulation.test_raft_scenarios import figure_8  # it imports this module

    try:
        figure_8(mutant.raft_class)
    except AssertionError as failure:
        return f"Figure 8 script: caught ({check_name(str(failure))})"
    return "Figure 8 script: survived"


def catch_table(
    seeds: int,
    steps: int,
    sizes: Sequence[int] = (3, 5),
    first_seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> str:
    """A markdown table: for each mutant, the seeds whose run failed of those run, and the mean
    simulated milliseconds to the failure."""
    lines = [
        "| mutant | caught (3 and 5 nodes) | mean steps to detection | check that failed most |",
        "|---|---|---|---|",
    ]
    window = range(first_seed, first_seed + seeds)
    for mutant in CATALOGUE:
        started = time.monotonic()
        caught: list[Outcome] = []
        for nodes in sizes:
            caught += [
                outcome
                for seed in window
                if (outcome := run_seed(seed, nodes, steps, mutant.raft_class)).failure
            ]
        runs = seeds * len(sizes)
        mean = f"{sum(o.step for o in caught) / len(caught):.0f}" if caught else "-"
        kinds: dict[str, int] = {}
        for outcome in caught:
            kind = check_name(outcome.failure)
            kinds[kind] = kinds.get(kind, 0) + 1
        common = max(kinds, key=lambda k: kinds[k]) if kinds else "-"
        if mutant.scripted:
            common += f"; {scripted_catch(mutant)}"
        lines.append(f"| {mutant.name} | {len(caught)}/{runs} | {mean} | {common} |")
        if progress:
            progress(f"{lines[-1]}  ({time.monotonic() - started:.0f} s)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Prints each mutant's catch rate.")
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    print(catch_table(args.seeds, args.steps, first_seed=args.first_seed))  # noqa: T201


if __name__ == "__main__":
    main()
