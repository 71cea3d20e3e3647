"""A linearizability checker for a key-value history (Herlihy & Wing; the search is Wing & Gong's
with Lowe's memoization, as in Knossos and Porcupine).

Keys are independent registers, so each key's history is checked alone. Every write carries a
value no other write carries. A write whose outcome the client never learned (its node crashed
or stepped down first) may take effect at any point after its invocation or never; a read is
recorded only once it returned."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

SEARCH_BUDGET = 200_000
"""Search states per key before the check gives up as inconclusive (bounded work)."""


@dataclass(slots=True)
class Operation:
    key: str
    is_write: bool
    value: str | None
    """What a write wrote, or what a read returned (None: the key was absent)."""
    invoked: int
    """Position in the history's event order (several events can share one millisecond)."""
    invoked_ms: int
    completed: int | None = None
    """None: the outcome is unknown."""
    completed_ms: int | None = None

    def describe(self) -> str:
        kind = "write" if self.is_write else "read"
        done = f"{self.completed_ms} ms" if self.completed_ms is not None else "never answered"
        return f"{kind} {self.key}={self.value!r} ({self.invoked_ms} ms .. {done})"


class History:
    def __init__(self) -> None:
        self.operations: list[Operation] = []
        self._events = 0
        self.inconclusive = 0

    def _next(self) -> int:
        self._events += 1
        return self._events

    def invoke_write(self, key: str, value: str, now_ms: int) -> Operation:
        op = Operation(key, True, value, self._next(), now_ms)
        self.operations.append(op)
        return op

    def invoke_read(self, key: str, now_ms: int) -> Operation:
        """A read; it joins the history once `complete` gives its result."""
        return Operation(key, False, None, self._next(), now_ms)

    def complete(self, op: Operation, now_ms: int, value: str | None = None) -> None:
        op.completed, op.completed_ms = self._next(), now_ms
        if not op.is_write:
            op.value = value
            self.operations.append(op)

    @property
    def reads(self) -> int:
        return sum(1 for op in self.operations if not op.is_write)

    def check(self) -> str | None:
        """None when the history is linearizable; else why not."""
        by_key: dict[str, list[Operation]] = defaultdict(list)
        for op in self.operations:
            by_key[op.key].append(op)
        for key in sorted(by_key):
            verdict = check_register(by_key[key])
            if verdict is None:
                self.inconclusive += 1
            elif verdict:
                return verdict
        return None


def check_register(history: list[Operation]) -> str | None:
    """'' when one key's history is linearizable, an explanation when not, None when the search
    ran out of budget."""
    observed = {op.value for op in history if not op.is_write}
    # A write never answered and never read can be left out: dropping it from any order leaves
    # the reads' values unchanged (no read returned it).
    ops = sorted(
        (op for op in history if op.completed is not None or op.value in observed),
        key=lambda op: op.invoked,
    )
    never = 1 << 62
    ends = [op.completed if op.completed is not None else never for op in ops]
    starts = [op.invoked for op in ops]
    n = len(ops)
    required = 0
    for i, op in enumerate(ops):
        if op.completed is not None:
            required |= 1 << i

    def candidates(done: int) -> list[int]:
        """The operations that may take effect next: none still pending ended before they
        began. Scans in invocation order and stops once an invocation is past every pending
        end seen so far (a later one cannot end sooner)."""
        i = (~done & (done + 1)).bit_length() - 1  # the first pending operation
        horizon = never
        found = []
        while i < n and starts[i] < horizon:
            if not done >> i & 1:
                found.append(i)
                horizon = min(horizon, ends[i])
            i += 1
        return [i for i in found if starts[i] < horizon]

    readers: dict[str | None, int] = defaultdict(int)
    for i, op in enumerate(ops):
        if not op.is_write:
            readers[op.value] |= 1 << i
    dead = "\0 no read returns it"
    """The value of a write no pending read returns: all such values are alike to the rest."""

    seen: set[tuple[int, str | None]] = set()
    stack: list[tuple[int, str | None]] = [(0, None)]
    while stack:
        done, value = stack.pop()
        # Moves that never rule out an order that would otherwise work are taken at once:
        # reads of the current value (a read changes nothing), and once no pending read needs
        # the current value, writes no pending read needs either.
        while True:
            ready = candidates(done)
            taken = done
            for i in ready:
                if not ops[i].is_write and ops[i].value == value:
                    done |= 1 << i
            if value == dead or not readers.get(value, 0) & ~done:
                value = dead
                for i in ready:
                    if ops[i].is_write and not readers.get(ops[i].value, 0) & ~done:
                        done |= 1 << i
            if done == taken:
                break
        if done & required == required:
            return ""
        if (done, value) in seen or value != dead:
            continue  # a write now would hide the current value from a read still to come
        seen.add((done, value))
        if len(seen) > SEARCH_BUDGET:
            return None
        stack.extend((done | 1 << i, ops[i].value) for i in ready if ops[i].is_write)
    return (
        f"linearizability: the {len(ops)} operations on key {ops[0].key!r} have no legal "
        f"order; e.g. {_witness(ops)}"
    )


def _witness(ops: list[Operation]) -> str:
    """A read that returned a value overwritten before it began, or never written."""
    writes = {op.value: op for op in ops if op.is_write}
    for read in ops:
        if read.is_write or read.completed is None:
            continue
        source = writes.get(read.value)
        if read.value is not None and source is None:
            return f"{read.describe()} returned a value never written"
        source_end = 0 if source is None else source.completed
        if source_end is None:
            continue
        for later in ops:
            if (
                later.is_write
                and later is not source
                and later.invoked > source_end
                and later.completed is not None
                and later.completed < read.invoked
            ):
                return f"{read.describe()}, but {later.describe()} overwrote it before"
    return "; ".join(op.describe() for op in ops[:8])
