"""Where a node keeps its Raft state: the storage protocol and an in-memory implementation
(what the simulation crashes and restarts nodes from)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from pocketmq.raft.messages import Entry, HardState, Snapshot


@dataclass(slots=True)
class Restored:
    """What a node restarts from."""

    hard_state: HardState = field(default_factory=HardState)
    snapshot: Snapshot = field(default_factory=Snapshot)
    entries: list[Entry] = field(default_factory=list)


class LogStorage(Protocol):
    def load(self) -> Restored: ...

    def append(self, entries: list[Entry]) -> None:
        """Appends `entries`, first dropping every stored entry at or after `entries[0].index`."""

    def set_hard_state(self, state: HardState) -> None: ...

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        """Stores `snapshot` and drops the entries it covers (all of them when the stored log
        does not hold the snapshot's last entry: a leader's snapshot replaces the log)."""

    def sync(self) -> None:
        """Makes everything above durable; nothing is sent before this returns."""


class MemoryStorage:
    """Survives a simulated crash. Drivers sync right after writing, so a crash is modelled
    between those steps: every write counts as durable."""

    def __init__(self) -> None:
        self._state = Restored()

    def load(self) -> Restored:
        state = self._state
        return Restored(state.hard_state, state.snapshot, list(state.entries))

    def append(self, entries: list[Entry]) -> None:
        if not entries:
            return
        stored = self._state.entries
        first = self._state.snapshot.index + 1
        del stored[max(0, entries[0].index - first) :]
        assert not stored or stored[-1].index + 1 == entries[0].index
        stored.extend(entries)

    def set_hard_state(self, state: HardState) -> None:
        self._state.hard_state = state

    def apply_snapshot(self, snapshot: Snapshot) -> None:
        state = self._state
        keep = [e for e in state.entries if e.index > snapshot.index]
        holds = any(e.index == snapshot.index and e.term == snapshot.term for e in state.entries)
        state.entries = keep if holds or snapshot.index <= state.snapshot.index else []
        state.snapshot = snapshot

    def sync(self) -> None:
        pass
