"""What a leader knows of each follower's log, and the majority arithmetic built on it."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from enum import Enum


class ProgressState(Enum):
    PROBE = "probe"
    """Where the logs agree is unknown: one append at a time until one succeeds."""
    REPLICATE = "replicate"
    """The logs agree up to `match`: appends are pipelined, `next` runs ahead of `match`."""
    SNAPSHOT = "snapshot"
    """The follower needs entries the leader compacted away: a snapshot is on its way."""


class Progress:
    __slots__ = (
        "inflight",
        "match",
        "next",
        "pending_snapshot",
        "probe_sent",
        "recent_active",
        "stalled_at",
        "state",
    )

    def __init__(self, next_index: int) -> None:
        self.match = 0
        self.next = next_index
        self.state = ProgressState.PROBE
        self.probe_sent = False
        """In PROBE: an append is out and unanswered; the next waits for a heartbeat answer."""
        self.pending_snapshot = 0
        self.inflight: deque[int] = deque()
        """In REPLICATE: the last index of each unanswered append, oldest first."""
        self.recent_active = False
        """Heard from since the leader's last check-quorum round."""
        self.stalled_at = 0
        """In REPLICATE: what had been sent before a heartbeat the follower answered without
        holding it; if a second such answer shows no progress either, the append was lost."""

    def become_probe(self) -> None:
        if self.state is ProgressState.SNAPSHOT:
            self.next = max(self.match + 1, self.pending_snapshot + 1)
        else:
            self.next = self.match + 1
        self.state = ProgressState.PROBE
        self.probe_sent = False
        self.pending_snapshot = 0
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state = ProgressState.REPLICATE
        self.next = self.match + 1
        self.inflight.clear()
        self.stalled_at = 0

    def lost_appends(self, follower_last: int, sent_before_heartbeat: int) -> bool:
        """A heartbeat answer in REPLICATE: whether appends sent before two heartbeats never
        arrived (one answer alone may just have overtaken them)."""
        if follower_last >= sent_before_heartbeat or self.match >= sent_before_heartbeat:
            self.stalled_at = 0
            return False
        if self.stalled_at == sent_before_heartbeat:
            return True
        self.stalled_at = sent_before_heartbeat
        return False

    def become_snapshot(self, index: int) -> None:
        self.state = ProgressState.SNAPSHOT
        self.pending_snapshot = index
        self.inflight.clear()

    def update(self, index: int) -> bool:
        """A follower acknowledged entries up to `index`; whether that was news."""
        self.probe_sent = False
        while self.inflight and self.inflight[0] <= index:
            self.inflight.popleft()
        if index <= self.match:
            return False
        self.match = index
        self.next = max(self.next, index + 1)
        return True

    def decrease_to(self, rejected: int, hint: int) -> bool:
        """A follower refused the append after `rejected`; moves `next` back using its hint.
        False for a stale refusal (of an append sent before a newer state)."""
        if self.state is ProgressState.REPLICATE:
            if rejected <= self.match:
                return False
            self.next = self.match + 1
            return True
        if self.next - 1 != rejected:
            return False
        self.next = max(min(rejected, hint + 1), self.match + 1)
        self.probe_sent = False
        return True

    def paused(self, max_inflight: int) -> bool:
        if self.state is ProgressState.PROBE:
            return self.probe_sent
        if self.state is ProgressState.SNAPSHOT:
            return True
        return len(self.inflight) >= max_inflight

    def sent(self, last_index: int, count: int) -> None:
        """An append carrying `count` entries up to `last_index` went out."""
        if self.state is ProgressState.REPLICATE:
            if count:
                self.next = last_index + 1
                self.inflight.append(last_index)
        elif self.state is ProgressState.PROBE:
            self.probe_sent = True


def majority(size: int) -> int:
    return size // 2 + 1


def committed_index(matches: Iterable[int]) -> int:
    """The highest index a majority of the voters hold."""
    ordered = sorted(matches, reverse=True)
    return ordered[majority(len(ordered)) - 1]


def tally(votes: dict[int, bool], size: int) -> bool | None:
    """True once a majority granted, False once a majority is out of reach, else None."""
    granted = sum(votes.values())
    if granted >= majority(size):
        return True
    if len(votes) - granted > size - majority(size):
        return False
    return None
