"""A queue being consumed (`ProcessQueue`): messages pulled but not yet done, and the offset
that is safe to commit.

Messages arrive in queue order and finish in any order (concurrent consumption). The safe
offset is the lowest offset still in flight, or the offset after the last message pulled when
nothing is in flight: committing it never skips an unfinished message, so a crash or a
rebalance can only cause redelivery, never loss.

The counts and bytes held are what flow control looks at: a queue past its limits is not
pulled again until its listener catches up.

Pure, single-threaded (the event loop's).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from pocketmq.client.message import MessageExt


class ProcessQueue:
    """In-flight messages of one queue and its commit point."""

    __slots__ = (
        "_done",
        "_in_flight",
        "_order",
        "abandoned",
        "dropped",
        "held_bytes",
        "next_offset",
    )

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        """Where the next pull starts."""
        self.held_bytes = 0
        self.dropped = False
        """Set when a rebalance took the queue away: results no longer move the offset, and
        messages not yet handed to the listener stay unconsumed (the next owner reads them)."""
        self.abandoned = False
        """Set when a dropped queue's running listener calls took too long: they stop after
        the call in progress (their offset was committed without them)."""
        self._order: deque[int] = deque()
        self._in_flight: dict[int, int] = {}  # offset -> body size
        self._done: set[int] = set()

    @property
    def held_count(self) -> int:
        return len(self._in_flight)

    def add(self, messages: Iterable[MessageExt], next_offset: int) -> None:
        """Records pulled messages; `next_offset` is where the next pull starts."""
        for message in messages:
            offset = message.queue_offset
            if offset in self._in_flight:
                continue
            self._order.append(offset)
            self._in_flight[offset] = len(message.body)
            self.held_bytes += len(message.body)
        self.next_offset = max(self.next_offset, next_offset)

    def finish(self, offsets: Iterable[int]) -> None:
        """Marks messages as consumed (or handed to the retry topic)."""
        for offset in offsets:
            size = self._in_flight.pop(offset, None)
            if size is None:
                continue
            self.held_bytes -= size
            self._done.add(offset)
        while self._order and self._order[0] in self._done:
            self._done.discard(self._order.popleft())

    def commit_offset(self) -> int:
        """The offset that is safe to commit: nothing below it is unfinished."""
        return self._order[0] if self._order else self.next_offset

    def reset(self, next_offset: int) -> None:
        """Forgets everything held and starts again at `next_offset` (offset moved)."""
        self._order.clear()
        self._in_flight.clear()
        self._done.clear()
        self.held_bytes = 0
        self.next_offset = next_offset
