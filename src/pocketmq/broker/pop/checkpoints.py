"""The in-flight table of POP: checkpoints (one per pop of one queue), the fate of each message
in them, and the records that carry every change into the revive log.

Each message of a checkpoint moves INFLIGHT -> ACKING -> ACKED (an ack) or MOVED (a change of
its invisible time handed it to a new checkpoint), or INFLIGHT -> REVIVING -> REVIVED (its
invisible time ran out and a copy went to the retry topic). ACKING and REVIVING are held while
the record or the copy is being stored: they keep an ack and a revive of the same message from
both succeeding. A checkpoint leaves the table once none of its messages is in flight.

The table changes only by `apply_*`, called with what the log holds: a stored record (live, or
replayed at start) and a stored retry copy. So replaying the log rebuilds it exactly.

Records (JSON bodies in `rmq_sys_REVIVE_LOG_<cluster>`, RocketMQ's `PopCheckPoint` / `AckMsg`
field names where they mean the same):

    ck   {"c","t","q","so","pt","it","rq","d","nx","o", "ack"?}
         d: queue offsets minus so; nx: the queue offset the pop moved on to; o: orderly.
         "ack" (pocketmq): the message this checkpoint takes over from (a change of invisible
         time), acked by the same record so that the change is atomic.
    ack  {"c","t","q","so","pt","aol"}   the acked queue offsets of one checkpoint.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

CK_TAG: Final = "ck"
ACK_TAG: Final = "ack"


class Fate(enum.IntEnum):
    INFLIGHT = 0
    ACKING = 1
    ACKED = 2
    REVIVING = 3
    REVIVED = 4
    MOVED = 5
    """Handed over to a new checkpoint by a change of invisible time."""


PENDING: Final = frozenset({Fate.INFLIGHT, Fate.ACKING, Fate.REVIVING})


Key = tuple[str, str, int, int, int]
"""(group, read topic, queue id, start offset, pop time)."""


@dataclass(frozen=True, slots=True)
class MessageRef:
    """One message of one checkpoint."""

    key: Key
    queue_offset: int

    def to_json(self) -> dict[str, Any]:
        group, topic, queue_id, start, pop_time = self.key
        return {
            "c": group,
            "t": topic,
            "q": queue_id,
            "so": start,
            "pt": pop_time,
            "ao": self.queue_offset,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MessageRef:
        return cls(
            (str(data["c"]), str(data["t"]), int(data["q"]), int(data["so"]), int(data["pt"])),
            int(data["ao"]),
        )


@dataclass(slots=True)
class Checkpoint:
    """The messages one pop of one queue handed out, and what became of each."""

    group: str
    topic: str
    """The topic read: the subscribed topic, or the group's pop retry topic."""
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    offsets: list[int]
    next_offset: int
    order: bool = False
    fates: list[Fate] = field(default_factory=list)
    takes_over: MessageRef | None = None

    def __post_init__(self) -> None:
        if not self.fates:
            self.fates = [Fate.INFLIGHT] * len(self.offsets)

    @property
    def key(self) -> Key:
        return (self.group, self.topic, self.queue_id, self.start_offset, self.pop_time)

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def done(self) -> bool:
        return all(fate not in PENDING for fate in self.fates)

    def index(self, queue_offset: int) -> int | None:
        try:
            return self.offsets.index(queue_offset)
        except ValueError:
            return None

    def ref(self, queue_offset: int) -> MessageRef:
        return MessageRef(self.key, queue_offset)

    def record(self) -> bytes:
        data: dict[str, Any] = {
            "c": self.group,
            "t": self.topic,
            "q": self.queue_id,
            "so": self.start_offset,
            "pt": self.pop_time,
            "it": self.invisible_time,
            "rq": self.revive_qid,
            "d": [o - self.start_offset for o in self.offsets],
            "nx": self.next_offset,
            "o": self.order,
        }
        if self.takes_over is not None:
            data["ack"] = self.takes_over.to_json()
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_record(cls, body: bytes) -> Checkpoint:
        data = json.loads(body)
        start = int(data["so"])
        over = data.get("ack")
        return cls(
            group=str(data["c"]),
            topic=str(data["t"]),
            queue_id=int(data["q"]),
            start_offset=start,
            pop_time=int(data["pt"]),
            invisible_time=int(data["it"]),
            revive_qid=int(data["rq"]),
            offsets=[start + int(d) for d in data["d"]],
            next_offset=int(data["nx"]),
            order=bool(data.get("o", False)),
            takes_over=MessageRef.from_json(over) if over else None,
        )


def ack_record(key: Key, queue_offsets: list[int]) -> bytes:
    group, topic, queue_id, start, pop_time = key
    data = {
        "c": group,
        "t": topic,
        "q": queue_id,
        "so": start,
        "pt": pop_time,
        "aol": queue_offsets,
    }
    return json.dumps(data, separators=(",", ":")).encode()


def parse_ack_record(body: bytes) -> tuple[Key, list[int]]:
    data = json.loads(body)
    key = (str(data["c"]), str(data["t"]), int(data["q"]), int(data["so"]), int(data["pt"]))
    return key, [int(o) for o in data["aol"]]


class CheckpointTable:
    """Every checkpoint with a message in flight, by key."""

    def __init__(self) -> None:
        self._checkpoints: dict[Key, Checkpoint] = {}

    def __len__(self) -> int:
        return len(self._checkpoints)

    def __iter__(self) -> Iterator[Checkpoint]:
        return iter(list(self._checkpoints.values()))

    def get(self, key: Key) -> Checkpoint | None:
        return self._checkpoints.get(key)

    def clear(self) -> None:
        self._checkpoints.clear()

    def discard(self, key: Key) -> None:
        """Drops a checkpoint whatever its messages' fates (a superseded orderly batch)."""
        self._checkpoints.pop(key, None)

    def apply_checkpoint(self, checkpoint: Checkpoint) -> bool:
        """A stored ck record; False when the table had it already (a replay)."""
        if checkpoint.key in self._checkpoints:
            return False
        if checkpoint.takes_over is not None:
            over = checkpoint.takes_over
            self._settle(over.key, [over.queue_offset], Fate.MOVED)
        self._checkpoints[checkpoint.key] = checkpoint
        return True

    def apply_acks(self, key: Key, queue_offsets: list[int]) -> None:
        """A stored ack record (or the takeover of a change of invisible time)."""
        self._settle(key, queue_offsets, Fate.ACKED)

    def apply_revived(self, ref: MessageRef) -> None:
        """A retry copy of the message is stored."""
        self._settle(ref.key, [ref.queue_offset], Fate.REVIVED)

    def _settle(self, key: Key, queue_offsets: list[int], fate: Fate) -> None:
        checkpoint = self._checkpoints.get(key)
        if checkpoint is None:
            return
        for offset in queue_offsets:
            i = checkpoint.index(offset)
            if i is not None and checkpoint.fates[i] in PENDING:
                checkpoint.fates[i] = fate
        if checkpoint.done:
            del self._checkpoints[key]

    def hold(self, ref: MessageRef, fate: Fate) -> Checkpoint | None:
        """Marks an in-flight message ACKING or REVIVING while its record or copy is stored;
        None when it is not in flight (unknown, acked, revived, or held by the other)."""
        checkpoint = self._checkpoints.get(ref.key)
        if checkpoint is None:
            return None
        i = checkpoint.index(ref.queue_offset)
        if i is None or checkpoint.fates[i] is not Fate.INFLIGHT:
            return None
        checkpoint.fates[i] = fate
        return checkpoint

    def release(self, ref: MessageRef) -> None:
        """A hold whose write stored nothing: the message is in flight again."""
        checkpoint = self._checkpoints.get(ref.key)
        if checkpoint is None:
            return
        i = checkpoint.index(ref.queue_offset)
        if i is not None and checkpoint.fates[i] in (Fate.ACKING, Fate.REVIVING):
            checkpoint.fates[i] = Fate.INFLIGHT

    def fate(self, ref: MessageRef) -> Fate | None:
        checkpoint = self._checkpoints.get(ref.key)
        if checkpoint is None:
            return None
        i = checkpoint.index(ref.queue_offset)
        return None if i is None else checkpoint.fates[i]
