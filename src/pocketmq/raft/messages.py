"""What Raft nodes say to each other, what they keep, and what the core hands its driver."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum


class MessageType(IntEnum):
    """The kinds of message between nodes (Raft paper §5 and §6 of Ongaro's thesis)."""

    VOTE = 1
    VOTE_RESPONSE = 2
    PRE_VOTE = 3
    PRE_VOTE_RESPONSE = 4
    APPEND = 5
    APPEND_RESPONSE = 6
    HEARTBEAT = 7
    HEARTBEAT_RESPONSE = 8
    SNAPSHOT = 9
    TIMEOUT_NOW = 10


class EntryKind(IntEnum):
    NORMAL = 0
    NOOP = 1
    """The empty entry a new leader appends so that something of its own term commits."""


@dataclass(frozen=True, slots=True)
class Entry:
    term: int
    index: int
    data: bytes = b""
    kind: EntryKind = EntryKind.NORMAL


@dataclass(frozen=True, slots=True)
class HardState:
    """What must be on disk before any message that depends on it leaves the node."""

    term: int = 0
    vote: int = 0
    """The node voted for in `term`; 0 for none (node ids start at 1)."""
    commit: int = 0


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A state machine image covering every entry up to `index` (whose term is `term`)."""

    index: int = 0
    term: int = 0
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class Message:
    """One message between nodes. Fields a type does not use keep their defaults.

    Attributes:
        index, log_term: APPEND: the entry before `entries`; VOTE: the candidate's last entry;
            APPEND_RESPONSE: the highest index the follower now matches (or, rejected, the
            index it was asked about).
        reject_hint, hint_term: A rejected append's hint: the follower's best guess of where
            the logs may agree, and its term there (fast backtracking).
        context: A read-index request id carried by heartbeats, or b"transfer" on a vote that
            a leadership transfer started (voters then ignore their leader lease).
    """

    type: MessageType
    src: int
    dst: int
    term: int
    index: int = 0
    log_term: int = 0
    entries: tuple[Entry, ...] = ()
    commit: int = 0
    reject: bool = False
    reject_hint: int = 0
    hint_term: int = 0
    context: bytes = b""
    snapshot: Snapshot | None = None


@dataclass(frozen=True, slots=True)
class ReadState:
    """A linearizable read may be served once the state machine has applied `index`."""

    context: bytes
    index: int


@dataclass(slots=True)
class Ready:
    """What the driver must do, in order: persist `snapshot`, `entries` and `hard_state`; then
    send `messages`; then apply `committed`; then call `advance(ready)`."""

    hard_state: HardState | None = None
    """Set when term, vote or commit changed since the last Ready."""
    entries: list[Entry] = field(default_factory=list)
    """To append to stable storage; entries at or after `entries[0].index` are replaced."""
    snapshot: Snapshot | None = None
    """A snapshot received from the leader: persist it and restore the state machine from it."""
    messages: list[Message] = field(default_factory=list)
    committed: list[Entry] = field(default_factory=list)
    read_states: list[ReadState] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.hard_state
            or self.entries
            or self.snapshot
            or self.messages
            or self.committed
            or self.read_states
        )
