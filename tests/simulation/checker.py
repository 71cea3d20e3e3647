"""Raft's safety properties (Raft paper, Figure 3), checked after every delivered message and
every processed `Ready` of a simulation.

Each check is incremental: it looks only at what changed since the last call, against global
records of everything any node has ever stored, committed or applied. Beyond the commands, the
checker compares the state machines themselves: a digest of each replica's state after every
applied index must equal every other replica's at that index, and a snapshot must hold exactly
the state at its index."""

from __future__ import annotations

from pocketmq.raft.core import Raft, Role
from pocketmq.raft.messages import Entry, Message, MessageType, Snapshot
from pocketmq.raftkv.store import KeyValueStore


class SafetyViolation(AssertionError):
    pass


def state_digest(kv: KeyValueStore) -> int:
    """The state machine's contents as one number; equal states give equal digests."""
    return hash(tuple(sorted((key, v.value, v.index) for key, v in kv.data.items())))


def image_digest(image: bytes) -> tuple[int, int]:
    """The applied index and digest of the state a snapshot image restores."""
    kv = KeyValueStore()
    kv.restore(image)
    return kv.applied, state_digest(kv)


class SafetyChecker:
    def __init__(self) -> None:
        self.leaders: dict[int, int] = {}
        """term -> the node that led it."""
        self.stored: dict[tuple[int, int], tuple[bytes, int]] = {}
        """(index, term) -> (data, term of the entry before) as first stored by any node."""
        self.committed: dict[int, tuple[int, bytes]] = {}
        """index -> (term, data) of every entry any node has seen committed."""
        self.applied: dict[int, bytes] = {}
        self.digests: dict[int, int] = {0: state_digest(KeyValueStore())}
        """index -> digest of the state machine once that index is applied (on any node)."""
        self.votes: dict[tuple[int, int], int] = {}
        """(voter, term) -> the candidate it granted its vote."""
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

    def on_sent(self, message: Message) -> None:
        """One vote per term (Raft paper §5.2): a node never grants two candidates one term,
        not even across a restart."""
        if message.type is not MessageType.VOTE_RESPONSE or message.reject:
            return
        first = self.votes.setdefault((message.src, message.term), message.dst)
        if first != message.dst:
            raise SafetyViolation(
                f"election safety: node {message.src} voted for nodes {first} and "
                f"{message.dst} in term {message.term}"
            )

    def on_step(self, node: Raft) -> None:
        """After each message a node takes and each `Ready` it processes."""
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
        if log.committed < seen:
            raise SafetyViolation(
                f"node {node.id} moved its commit index back from {seen} to {log.committed} "
                "without restarting"
            )
        if log.committed == seen:
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

    def on_applied(self, node: Raft, entry: Entry, digest: int) -> None:
        """State machine safety: no two nodes apply different commands at one index, only
        committed ones, in order, and reach the same state after each."""
        node_id = node.id
        last = self._applied_last.get(node_id, 0)
        if entry.index != last + 1:
            raise SafetyViolation(f"node {node_id} applied {entry.index} after {last}")
        if entry.index > node.log.committed:
            raise SafetyViolation(
                f"node {node_id} applied index {entry.index} beyond its commit index "
                f"{node.log.committed}"
            )
        first = self.applied.setdefault(entry.index, entry.data)
        if first != entry.data:
            raise SafetyViolation(
                f"state machine safety: node {node_id} applied {entry.data!r} at index "
                f"{entry.index}, another node applied {first!r}"
            )
        self._check_digest(node_id, entry.index, digest, "after applying")
        self._applied_last[node_id] = entry.index

    def _check_digest(self, node_id: int, index: int, digest: int, what: str) -> None:
        first = self.digests.setdefault(index, digest)
        if first != digest:
            raise SafetyViolation(
                f"state machines differ: node {node_id} {what} index {index} holds another "
                "state than a replica had there"
            )

    def _check_image(self, node_id: int, snapshot: Snapshot, what: str) -> None:
        applied, digest = image_digest(snapshot.data)
        if applied != snapshot.index:
            raise SafetyViolation(
                f"node {node_id} {what} a snapshot at index {snapshot.index} whose image "
                f"says {applied}"
            )
        self._check_digest(node_id, snapshot.index, digest, f"{what} a snapshot at")

    def on_compacted(self, node_id: int, snapshot: Snapshot) -> None:
        """A snapshot must hold exactly the state at its index."""
        self._check_image(node_id, snapshot, "took")

    def on_snapshot_installed(self, node_id: int, snapshot: Snapshot) -> None:
        committed = self.committed.get(snapshot.index)
        if snapshot.index and (committed is None or committed[0] != snapshot.term):
            raise SafetyViolation(f"node {node_id} installed a snapshot of uncommitted {snapshot}")
        last = self._applied_last.get(node_id, 0)
        if snapshot.index < last:
            raise SafetyViolation(
                f"node {node_id} installed a snapshot at index {snapshot.index} over the "
                f"{last} entries it had applied"
            )
        self._check_image(node_id, snapshot, "installed")
        self._applied_last[node_id] = snapshot.index

    def on_restart(self, node_id: int, snapshot: Snapshot) -> None:
        if snapshot.index:
            self._check_image(node_id, snapshot, "restarted from")
        self._applied_last[node_id] = snapshot.index
        self._commit_seen[node_id] = 0
