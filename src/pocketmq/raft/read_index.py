"""A leader's read-index requests (Ongaro's thesis §6.4): each holds the commit index of when
it was asked until a majority, answering a heartbeat that carries its context, confirms that
this node still leads."""

from __future__ import annotations

from pocketmq.raft.messages import ReadState


class _PendingRead:
    __slots__ = ("acks", "index")

    def __init__(self, index: int, leader: int) -> None:
        self.index = index
        self.acks = {leader}


class ReadIndexQueue:
    def __init__(self) -> None:
        self._pending: dict[bytes, _PendingRead] = {}
        self.waiting: list[bytes] = []
        """Contexts asked before this leader committed an entry of its term: its commit index
        is not known to be the cluster's yet."""

    def clear(self) -> None:
        self._pending.clear()
        self.waiting.clear()

    def take_waiting(self) -> list[bytes]:
        waiting, self.waiting = self.waiting, []
        return waiting

    def start(self, context: bytes, commit: int, leader: int) -> None:
        self._pending[context] = _PendingRead(commit, leader)

    def last_context(self) -> bytes:
        """The newest pending request's context (a heartbeat confirming it confirms all)."""
        return next(reversed(self._pending), b"")

    def ack(self, context: bytes, peer: int, quorum: int) -> list[ReadState]:
        """`peer` confirmed the request `context`; what that releases."""
        request = self._pending.get(context)
        if request is None:
            return []
        request.acks.add(peer)
        if len(request.acks) < quorum:
            return []
        # Leadership was confirmed after every earlier request too: release them with it.
        released: list[ReadState] = []
        for pending in list(self._pending):
            read = self._pending.pop(pending)
            released.append(ReadState(pending, read.index))
            if pending == context:
                break
        return released
