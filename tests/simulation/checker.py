"""Raft's safety properties (Raft paper, Figure 3), checked after every step of a simulation.

Each check is incremental: it looks only at what changed since the last step, against global
records of everything any node has ever stored, committed or applied."""

from __future__ import annotations

from pocketmq.raft.core import Raft, Role
from pocketmq.raft.messages import Entry, Snapshot


class SafetyViolation(AssertionError):
    pass


class SafetyChecker:
    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}
        """term -> the node that led it."""
        self.stored: dict[tuple[int, int], tuple[bytes, int]] = {}
        """(index, term) -> (data, term of the entry before) as first stored by any node."""
        self.committed: dict[int, tuple[int, bytes]] = {}
        """index -> (term, data) of every entry any node has seen committed."""
        self.applied: dict[int, bytes] = {}
        self._commit_seen: dict[int, int] = {}
        self._applied_last: dict[int, int] = {}
        self._completeness_checked: dict[int, int] = {}

    @property
    def commit_index(self) -> int:
        return max(self.committed, default=0)

    def on_stored(self, node: Raft, entries: list[Entry]) -> None:
        """Log matching: an (index, term) pair names one entry, whose predecessor has one term;
        so by induction two logs that share an (index, term) agree on everything before it."""
        if not entries:
            return
        prev_term = node.log.term(entries[0].index - 1)
        assert prev_term is not None
        for entry in entries:
            record = (entry.data, prev_term)
            first = self.stored.setdefault((entry.index, entry.term), record)
            if first != record:
                raise SafetyViolation(
                    f"log matching: node {node.id} stored {entry} after term {record[1]}, "
                    f"another node stored {first} at the same index and term"
                )
            prev_term = entry.term

    def on_step(self, node: Raft) -> None:
        if node.role is Role.LEADER:
            self._check_leader(node)
        self._check_committed(node)

    def _check_leader(self, node: Raft) -> None:
        first = self.leaders.setdefault(node.term, node.id)
        if first != node.id:
            raise SafetyViolation(
                f"election safety: nodes {first} and {node.id} both led term {node.term}"
            )
        if self._completeness_checked.get(node.id) == node.term:
            return
        # Leader completeness: a leader's log holds every entry committed before it was elected.
        self._completeness_checked[node.id] = node.term
        log = node.log
        for index, (term, _) in self.committed.items():
            if index <= log.snapshot.index:
                continue
            if log.term(index) != term:
                raise SafetyViolation(
                    f"leader completeness: node {node.id}, leader of term {node.term}, has term "
                    f"{log.term(index)} at index {index}, committed with term {term}"
                )

    def _check_committed(self, node: Raft) -> None:
        log = node.log
        seen = self._commit_seen.get(node.id, 0)
        if log.committed <= seen:
            return
        for index in range(max(seen + 1, log.first_index), log.committed + 1):
            term = log.term(index)
            assert term is not None
            entry = log.entries[index - log.first_index]
            record = (term, entry.data)
            first = self.committed.setdefault(index, record)
            if first != record:
                raise SafetyViolation(
                    f"committed entries differ at index {index}: node {node.id} has term {term}, "
                    f"term {first[0]} was committed there before"
                )
        self._commit_seen[node.id] = log.committed

    def on_applied(self, node_id: int, entries: list[Entry]) -> None:
        """State machine safety: no two nodes apply different commands at one index."""
        last = self._applied_last.get(node_id, 0)
        for entry in entries:
            if entry.index != last + 1:
                raise SafetyViolation(f"node {node_id} applied {entry.index} after {last}")
            first = self.applied.setdefault(entry.index, entry.data)
            if first != entry.data:
                raise SafetyViolation(
                    f"state machine safety: node {node_id} applied {entry.data!r} at index "
                    f"{entry.index}, another node applied {first!r}"
                )
            last = entry.index
        self._applied_last[node_id] = last

    def on_snapshot_installed(self, node_id: int, snapshot: Snapshot) -> None:
        committed = self.committed.get(snapshot.index)
        if snapshot.index and (committed is None or committed[0] != snapshot.term):
            raise SafetyViolation(f"node {node_id} installed a snapshot of uncommitted {snapshot}")
        self._applied_last[node_id] = snapshot.index

    def on_restart(self, node_id: int, applied: int) -> None:
        self._applied_last[node_id] = applied
        self._commit_seen[node_id] = 0
