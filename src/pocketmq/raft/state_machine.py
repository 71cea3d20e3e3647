"""What the Raft driver replicates: a state machine it applies committed commands to, in log
order and identically on every node, and the image of it a snapshot holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

ResultT = TypeVar("ResultT")
ResultT_co = TypeVar("ResultT_co", covariant=True)


class StateMachine(Protocol[ResultT_co]):
    def apply(self, index: int, command: bytes) -> ResultT_co:
        """Applies the committed `command` at log `index`. Every replica calls it with the
        same commands in the same order, so it must be deterministic, and it must not raise
        on a command it cannot use (the entry still takes its index everywhere). Each new
        leader's first entry comes through too, as the empty command."""
        ...

    def snapshot(self) -> bytes:
        """The whole state as bytes, once everything up to the applied index is in it."""
        ...

    def restore(self, image: bytes) -> None:
        """Replaces the state with a `snapshot()` image; `b""` means the empty state."""
        ...


@dataclass(frozen=True, slots=True)
class Applied(Generic[ResultT]):
    """A proposal that committed and was applied on the node that took it."""

    index: int
    result: ResultT
    """What `StateMachine.apply` returned for it."""
