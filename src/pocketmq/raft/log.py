"""The in-memory view of a node's log: a snapshot point, the entries after it, commit and apply
marks, and how far the driver has made the entries durable."""

from __future__ import annotations

from pocketmq.raft.messages import Entry, Snapshot


class RaftLog:
    def __init__(self, snapshot: Snapshot, entries: list[Entry], commit: int) -> None:
        assert all(e.index == snapshot.index + 1 + i for i, e in enumerate(entries))
        self.snapshot = snapshot
        self.entries = list(entries)
        self.committed = max(snapshot.index, min(commit, self.last_index))
        self.applied = snapshot.index
        self.stable = self.last_index
        """Every entry up to here is on disk (what the node loaded from disk is)."""
        self.pending_snapshot: Snapshot | None = None
        """Received from the leader and not yet handed to the driver."""

    @property
    def first_index(self) -> int:
        return self.snapshot.index + 1

    @property
    def last_index(self) -> int:
        return self.snapshot.index + len(self.entries)

    @property
    def last_term(self) -> int:
        return self.entries[-1].term if self.entries else self.snapshot.term

    def term(self, index: int) -> int | None:
        """The term of the entry at `index`; None when compacted away or beyond the end."""
        if index == self.snapshot.index:
            return self.snapshot.term
        if index < self.snapshot.index or index > self.last_index:
            return None
        return self.entries[index - self.first_index].term

    def matches(self, index: int, term: int) -> bool:
        return self.term(index) == term

    def is_up_to_date(self, last_index: int, last_term: int) -> bool:
        """Whether a log ending at (last_index, last_term) is at least as up to date as this
        one (Raft paper §5.4.1): a later last term wins, then a longer log."""
        return last_term > self.last_term or (
            last_term == self.last_term and last_index >= self.last_index
        )

    def slice(self, low: int, high: int) -> list[Entry]:
        """Entries with low <= index < high; `low` must not be compacted."""
        assert low >= self.first_index, (low, self.first_index)
        return self.entries[low - self.first_index : high - self.first_index]

    def append(self, entries: list[Entry]) -> None:
        """Appends entries that follow the last one (the leader's own proposals)."""
        if entries:
            assert entries[0].index == self.last_index + 1
            self.entries.extend(entries)

    def try_append(
        self, prev_index: int, prev_term: int, commit: int, entries: tuple[Entry, ...]
    ) -> int | None:
        """A follower's side of AppendEntries (Raft paper §5.3): None when the log does not hold
        (prev_index, prev_term); else the index of the last entry the leader sent."""
        if prev_index < self.snapshot.index:
            # The start is inside our snapshot, which only holds committed entries: skip them.
            entries = tuple(e for e in entries if e.index > self.snapshot.index)
            prev_index, prev_term = self.snapshot.index, self.snapshot.term
        if not self.matches(prev_index, prev_term):
            return None
        for position, entry in enumerate(entries):
            if self.term(entry.index) != entry.term:
                assert entry.index > self.committed, "a committed entry conflicts"
                del self.entries[entry.index - self.first_index :]
                self.entries.extend(entries[position:])
                self.stable = min(self.stable, entry.index - 1)
                break
        last_new = prev_index + len(entries)
        self.commit_to(min(commit, last_new))
        return last_new

    def commit_to(self, index: int) -> None:
        if index > self.committed:
            assert index <= self.last_index, (index, self.last_index)
            self.committed = index

    def conflict_hint(self, index: int, term: int) -> tuple[int, int]:
        """The largest index <= `index` whose term is <= `term`, and its term: no entry after it
        can match a log whose entry at `index` has `term` (etcd's findConflictByTerm)."""
        index = min(index, self.last_index)
        while index > self.snapshot.index:
            found = self.term(index)
            assert found is not None
            if found <= term:
                return index, found
            index -= 1
        return self.snapshot.index, self.snapshot.term

    def unstable(self) -> list[Entry]:
        return self.entries[self.stable + 1 - self.first_index :] if self.entries else []

    def to_apply(self) -> list[Entry]:
        """Committed, durable entries the state machine has not applied yet."""
        high = min(self.committed, self.stable)
        if high <= self.applied:
            return []
        return self.slice(self.applied + 1, high + 1)

    def restore(self, snapshot: Snapshot) -> None:
        """Replaces the whole log with a leader's snapshot."""
        self.snapshot = snapshot
        self.entries = []
        self.committed = self.applied = self.stable = snapshot.index
        self.pending_snapshot = snapshot

    def compact(self, index: int, data: bytes) -> Snapshot:
        """Drops the entries up to `index` (applied) behind a state machine image of them."""
        assert self.snapshot.index < index <= self.applied, (index, self.applied)
        term = self.term(index)
        assert term is not None
        del self.entries[: index - self.snapshot.index]
        self.snapshot = Snapshot(index=index, term=term, data=data)
        return self.snapshot
