"""RaftNode: drives the Raft core with a real clock, a disk and the remoting transport, and
replicates a `StateMachine` it knows nothing about; its owner serves clients on the same port.

Per round: take received messages, proposals and read barriers, tick when due, then for every
Ready persist (fsync, in a worker thread), send, apply, and resolve the proposals that applied."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic

from pocketmq.raft.codec import RaftCodecError, decode_messages, encode_messages
from pocketmq.raft.core import Raft, RaftConfig, Role
from pocketmq.raft.disk import DiskStorage
from pocketmq.raft.messages import Message, Ready
from pocketmq.raft.state_machine import Applied, ResultT, StateMachine
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel, RemotingClient, RemotingServer, RequestHandler

log = logging.getLogger(__name__)

RAFT_MESSAGES = 51100
"""Oneway: a frame of Raft messages between nodes."""


class NotLeaderError(Exception):
    def __init__(self, leader_address: str | None) -> None:
        hint = f"the leader is at {leader_address}" if leader_address else "no leader is known yet"
        super().__init__(f"this node is not the leader: {hint}; retry there")
        self.leader_address = leader_address


class ProposalLostError(Exception):
    """The entry was overwritten by another leader's: the command did not happen."""


@dataclass(frozen=True)
class NodeSettings:
    node_id: int
    peers: dict[int, str]
    """Every voter's id -> host:port, this node's included."""
    directory: Path
    tick_ms: int = 100
    snapshot_every: int = 10_000
    """Entries applied between state machine snapshots (then the log before them is dropped)."""
    batching: bool = True
    """Several proposals per append and per fsync; off, one command per round (benchmarks)."""
    raft: RaftConfig = field(default_factory=RaftConfig)
    fsync: bool = True
    """Off, entries are acknowledged from the page cache (a process crash keeps them, a
    power loss may not); terms and votes are fsynced either way."""
    compact_behind_followers: bool = False
    """On, a node drops from its log only entries every voter holds (a leader knows it from
    its followers' progress, a follower is told by `RaftNode.held_by_all`), so that no replica
    it may lead one day needs a snapshot: for state machines whose image leaves data out (a
    CommitLog). The image is taken when due and kept until then."""


class RaftNode(Generic[ResultT]):
    """One Raft replica of `state_machine`. `handlers` (request code -> handler) are served on
    this node's address beside the Raft messages: the owner's client requests."""

    def __init__(
        self,
        settings: NodeSettings,
        state_machine: StateMachine[ResultT],
        handlers: Mapping[int, RequestHandler] | None = None,
    ) -> None:
        self.settings = settings
        self.storage = DiskStorage(settings.directory, fsync_entries=settings.fsync)
        restored = self.storage.load()
        config = settings.raft
        if not settings.batching:
            config = replace(config, max_entries_per_append=1)
        self.raft = Raft(
            settings.node_id,
            list(settings.peers),
            config,
            random.Random(),
            hard_state=restored.hard_state,
            snapshot=restored.snapshot,
            entries=restored.entries,
        )
        self.state_machine = state_machine
        state_machine.restore(restored.snapshot.data)
        self.applied = restored.snapshot.index
        """The last index applied to the state machine (read barriers wait for it)."""
        host, _, port = settings.peers[settings.node_id].rpartition(":")
        self.server = RemotingServer(
            {**(handlers or {}), RAFT_MESSAGES: self._on_messages}, host=host, port=int(port)
        )
        self.client = RemotingClient()
        self._inbox: list[Message] = []
        self._proposals: deque[tuple[bytes, asyncio.Future[Applied[ResultT]]]] = deque()
        self._reads: deque[tuple[bytes, asyncio.Future[int]]] = deque()
        self._waiting: dict[int, tuple[int, asyncio.Future[Applied[ResultT]]]] = {}
        self._read_waiting: dict[bytes, asyncio.Future[int]] = {}
        self._ready_reads: list[tuple[int, asyncio.Future[int]]] = []
        self._read_ids = itertools.count(1)
        self._wake = asyncio.Event()
        self._outboxes: dict[int, asyncio.Queue[bytes]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self.held_by_all: Callable[[], int] = lambda: 0
        """On a follower: the highest index every voter is known to hold (its owner learns it
        from the leader); see `NodeSettings.compact_behind_followers`."""
        self._due_image: tuple[int, bytes] | None = None
        self.on_change: list[Callable[[], None]] = []
        """Called after a round in which the role, the term or the known leader changed."""
        self._seen: tuple[Role, int, int] = (self.raft.role, self.raft.term, self.raft.leader)

    async def start(self) -> int:
        port = await self.server.start()
        loop = asyncio.get_running_loop()
        for peer, address in self.settings.peers.items():
            if peer != self.settings.node_id:
                queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=1024)
                self._outboxes[peer] = queue
                self._tasks.append(loop.create_task(self._sender(address, queue)))
        self._tasks.append(loop.create_task(self._run(), name="raft-loop"))
        log.info(
            "raft node %d serving at %s; term %d, log %d..%d, applied from snapshot %d",
            self.settings.node_id,
            self.settings.peers[self.settings.node_id],
            self.raft.term,
            self.raft.log.first_index,
            self.raft.log.last_index,
            self.raft.log.snapshot.index,
        )
        return port

    async def stop(self) -> None:
        """Stops serving, lets the loop finish the round it is in (its fsync included), then
        closes the files."""
        self._stopping = True
        await self.server.stop(grace_s=0.5)
        self._wake.set()
        if self._tasks:  # none when its port could not be opened
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._tasks[-1]), timeout=5.0)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.client.close()
        self.storage.close()

    # -- the owner's interface -----------------------------------------------------------------
    async def propose(self, command: bytes) -> Applied[ResultT]:
        """Replicates `command`; returns its log index and what applying it returned, once it
        applied here.

        Raises:
            NotLeaderError: this node does not lead (or is handing leadership over); it names
                the leader when one is known.
            ProposalLostError: another leader's entry took its index: it did not happen.
        """
        future: asyncio.Future[Applied[ResultT]] = asyncio.get_running_loop().create_future()
        self._proposals.append((command, future))
        self._wake.set()
        return await future

    async def read_barrier(self) -> int:
        """Waits until this node (the leader) may serve a linearizable read from its state
        machine (read-index); returns the read point. Raises `NotLeaderError` elsewhere."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._reads.append((str(next(self._read_ids)).encode(), future))
        self._wake.set()
        return await future

    def leader_address(self) -> str | None:
        return self.settings.peers.get(self.raft.leader)

    def match_indexes(self) -> dict[int, int]:
        """On the leader: each voter's highest index known to be in its log (its own
        included); elsewhere empty."""
        if self.raft.role is not Role.LEADER:
            return {}
        return {peer: progress.match for peer, progress in self.raft.progress.items()}

    def transfer_leadership(self, to: int) -> bool:
        """Starts handing leadership to voter `to` (this node must lead); False when it cannot
        (not the leader, or `to` is no voter). The hand-over completes within an election
        timeout or is abandoned."""
        if to not in self.settings.peers or self.raft.role is not Role.LEADER:
            return False
        started = self.raft.transfer_leadership(to)
        self._wake.set()
        return started

    # -- the loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self._rounds()
        except Exception:
            # Without its loop the node neither votes nor replicates: say so loudly.
            log.critical("raft node %d stopped on an error", self.settings.node_id, exc_info=True)
            raise

    async def _rounds(self) -> None:
        loop = asyncio.get_running_loop()
        tick_s = self.settings.tick_ms / 1000
        next_tick = loop.time() + tick_s
        raft = self.raft
        while not self._stopping:
            if not (self._inbox or self._proposals or self._reads):
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(0.0, next_tick - loop.time())):
                        await self._wake.wait()
            self._wake.clear()
            if loop.time() >= next_tick:
                raft.tick()
                next_tick = max(next_tick + tick_s, loop.time())
            inbox, self._inbox = self._inbox, []
            for message in inbox:
                raft.step(message)
            self._take_requests()
            while raft.has_ready():
                ready = raft.ready()
                if self.settings.fsync:
                    await asyncio.to_thread(self._persist, ready)
                else:
                    # Writes to the page cache only (a new term or vote is fsynced, rarely):
                    # cheaper here than a hop to a worker thread.
                    self._persist(ready)
                self._send(ready.messages)
                self._apply(ready)
                raft.advance(ready)
                self._maybe_snapshot()
                if not self.settings.batching:
                    break
            self._notify_change()

    def _notify_change(self) -> None:
        raft = self.raft
        seen = (raft.role, raft.term, raft.leader)
        if seen == self._seen:
            return
        self._seen = seen
        for listener in self.on_change:
            try:
                listener()
            except Exception:  # one listener's bug must not stop replication
                log.exception("raft role listener failed")

    def _take_requests(self) -> None:
        raft = self.raft
        count = len(self._proposals) if self.settings.batching else min(1, len(self._proposals))
        for _ in range(count):
            command, future = self._proposals.popleft()
            if future.done():  # its caller gave up (cancelled): nothing to propose
                continue
            index = raft.propose(command)
            if index is None:
                future.set_exception(NotLeaderError(self.leader_address()))
            else:
                self._waiting[index] = (raft.term, future)
        while self._reads:
            context, read = self._reads.popleft()
            if read.done():
                continue
            if raft.read_index(context):
                self._read_waiting[context] = read
            else:
                read.set_exception(NotLeaderError(self.leader_address()))
        if raft.role is not Role.LEADER and self._read_waiting:
            for read in self._read_waiting.values():
                if not read.done():
                    read.set_exception(NotLeaderError(self.leader_address()))
            self._read_waiting.clear()

    def _persist(self, ready: Ready) -> None:
        storage = self.storage
        if ready.snapshot:
            storage.apply_snapshot(ready.snapshot)
        storage.append(ready.entries)
        if ready.hard_state:
            storage.set_hard_state(ready.hard_state)
        storage.sync()

    def _send(self, messages: list[Message]) -> None:
        by_peer: dict[int, list[Message]] = {}
        for message in messages:
            by_peer.setdefault(message.dst, []).append(message)
        for peer, batch in by_peer.items():
            queue = self._outboxes.get(peer)
            if queue is None:
                continue
            if queue.full():
                queue.get_nowait()  # Raft recovers lost messages; a stalled peer must not grow us
            queue.put_nowait(encode_messages(batch))

    def _apply(self, ready: Ready) -> None:
        if ready.snapshot:
            self.state_machine.restore(ready.snapshot.data)
            self.applied = ready.snapshot.index
            log.info(
                "restored the state machine from the leader's snapshot at %d", ready.snapshot.index
            )
        for entry in ready.committed:
            result = self.state_machine.apply(entry.index, entry.data)
            self.applied = entry.index
            waiting = self._waiting.pop(entry.index, None)
            if waiting and not waiting[1].done():
                term, future = waiting
                if term == entry.term:
                    future.set_result(Applied(entry.index, result))
                else:
                    future.set_exception(ProposalLostError(f"entry {entry.index} was overwritten"))
        for read_state in ready.read_states:
            released = self._read_waiting.pop(read_state.context, None)
            if released is not None:
                self._ready_reads.append((read_state.index, released))
        still = []
        for index, read in self._ready_reads:
            if read.done():
                continue
            if self.applied >= index:
                read.set_result(index)
            else:
                still.append((index, read))
        self._ready_reads = still

    def _maybe_snapshot(self) -> None:
        log_state = self.raft.log
        due = self._due_image
        if due is not None and due[0] <= log_state.snapshot.index:
            due = self._due_image = None  # a leader's snapshot replaced the log meanwhile
        if due is None:
            if log_state.applied - log_state.snapshot.index < self.settings.snapshot_every:
                return
            due = (log_state.applied, self.state_machine.snapshot())
            if not self.settings.compact_behind_followers:
                self._compact(*due)
                return
            self._due_image = due
        if self.raft.role is Role.LEADER:
            held = min(self.match_indexes().values())
        else:
            held = self.held_by_all()
        if held >= due[0]:
            self._due_image = None
            self._compact(*due)

    def _compact(self, index: int, image: bytes) -> None:
        snapshot = self.raft.compact(index, image)
        self.storage.apply_snapshot(snapshot)
        log.info("snapshot at index %d; the log before it is dropped", snapshot.index)

    async def _sender(self, address: str, queue: asyncio.Queue[bytes]) -> None:
        while True:
            body = await queue.get()
            try:
                await self.client.invoke_oneway(
                    address, RemotingCommand.request(RAFT_MESSAGES, body=body)
                )
            except (RemotingError, OSError) as exc:
                log.debug("raft messages to %s lost: %s", address, exc)
            except Exception:  # a dead sender would cut this node off from the peer for good
                log.exception("raft messages to %s lost on an unexpected error", address)

    # -- handlers ------------------------------------------------------------------------------
    async def _on_messages(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand | None:
        try:
            self._inbox.extend(decode_messages(request.body))
        except RaftCodecError as exc:
            log.warning("dropped a malformed raft frame: %s", exc)
            return None
        self._wake.set()
        return None
