"""Orderly (FIFO) pop: one queue is handed to a group one batch at a time.

A queue of a group is blocked while its live batch has a message in flight whose invisible time
has not run out. Its offset moves only over acked messages (and messages the filter skipped),
so a batch that times out is read again from its first unacked message, in order, and the
messages already acked in it are skipped. A new batch supersedes the one before it. Each
delivery of an offset is counted, and the count is the message's reconsume times.

`OrderQueue` changes only by `apply_checkpoint` and `apply_acks`, with what the revive log
holds, so replaying the log at start rebuilds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.broker.pop.checkpoints import Checkpoint, CheckpointTable, Fate, Key

QueueKey = tuple[str, str, int]
"""(group, topic, queue id)."""


@dataclass(slots=True)
class OrderQueue:
    committed: int
    """The first offset not yet done (acked or skipped by the filter)."""
    done: set[int] = field(default_factory=set)
    """Offsets at or past `committed` that are done."""
    deliveries: dict[int, int] = field(default_factory=dict)
    """Deliveries so far of each offset at or past `committed`."""
    live: Key | None = None
    """The latest batch's checkpoint."""

    def advance(self) -> None:
        while self.committed in self.done:
            self.done.discard(self.committed)
            self.deliveries.pop(self.committed, None)
            self.committed += 1


class OrderQueues:
    """The orderly state of every (group, topic, queue) popped in order."""

    def __init__(self, table: CheckpointTable) -> None:
        self._table = table
        self._queues: dict[QueueKey, OrderQueue] = {}

    def clear(self) -> None:
        self._queues.clear()

    def get(self, key: QueueKey) -> OrderQueue | None:
        return self._queues.get(key)

    def items(self) -> list[tuple[QueueKey, OrderQueue]]:
        return list(self._queues.items())

    def queue(self, key: QueueKey, committed: int) -> OrderQueue:
        """The queue's state, starting at `committed` when it has none."""
        state = self._queues.get(key)
        if state is None:
            state = self._queues[key] = OrderQueue(committed)
        return state

    def blocked(self, key: QueueKey, now_ms: int) -> bool:
        state = self._queues.get(key)
        if state is None or state.live is None:
            return False
        checkpoint = self._table.get(state.live)
        if checkpoint is None or now_ms >= checkpoint.revive_time:
            return False
        return any(fate in (Fate.INFLIGHT, Fate.ACKING) for fate in checkpoint.fates)

    def apply_checkpoint(self, checkpoint: Checkpoint, committed: int) -> None:
        """A stored orderly checkpoint: it supersedes the queue's batch before it."""
        key = (checkpoint.group, checkpoint.topic, checkpoint.queue_id)
        state = self.queue(key, committed)
        if state.live is not None and state.live != checkpoint.key:
            self._table.discard(state.live)
        state.live = checkpoint.key
        delivered = set(checkpoint.offsets)
        for offset in range(max(checkpoint.start_offset, state.committed), checkpoint.next_offset):
            if offset in delivered:
                state.deliveries[offset] = state.deliveries.get(offset, 0) + 1
            else:
                state.done.add(offset)
        state.advance()

    def apply_acks(self, checkpoint_key: Key, queue_offsets: list[int]) -> OrderQueue | None:
        """Acks of an orderly checkpoint's messages; returns the queue's state."""
        group, topic, queue_id, _, _ = checkpoint_key
        state = self._queues.get((group, topic, queue_id))
        if state is None:
            return None
        state.done.update(o for o in queue_offsets if o >= state.committed)
        state.advance()
        return state
