"""RaftNode: drives the Raft core with a real clock, a disk and the remoting transport, and
serves the replicated key-value store (`kv.py`) to clients.

Per round: take received messages and client requests, tick when due, then for every Ready
persist (fsync, in a worker thread), send, apply, answer the clients whose commands applied."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import random
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path

from pocketmq.common.codes import ResponseCode
from pocketmq.raft.codec import RaftCodecError, decode_messages, encode_messages
from pocketmq.raft.core import Raft, RaftConfig, Role
from pocketmq.raft.disk import DiskStorage
from pocketmq.raft.kv import KeyValueStore
from pocketmq.raft.messages import Message, Ready
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel, RemotingClient, RemotingServer

log = logging.getLogger(__name__)

RAFT_MESSAGES = 51100
"""Oneway: a frame of Raft messages between nodes."""
KV_PROPOSE = 51101
KV_READ = 51102
KV_STATUS = 51103
KV_DUMP = 51104


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


class RaftNode:
    def __init__(self, settings: NodeSettings) -> None:
        self.settings = settings
        self.storage = DiskStorage(settings.directory)
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
        self.kv = KeyValueStore()
        self.kv.restore(restored.snapshot.data)
        host, _, port = settings.peers[settings.node_id].rpartition(":")
        self.server = RemotingServer(
            {
                RAFT_MESSAGES: self._on_messages,
                KV_PROPOSE: self._on_propose,
                KV_READ: self._on_read,
                KV_STATUS: self._on_status,
                KV_DUMP: self._on_dump,
            },
            host=host,
            port=int(port),
        )
        self.client = RemotingClient()
        self._inbox: list[Message] = []
        self._proposals: deque[tuple[bytes, asyncio.Future[int]]] = deque()
        self._reads: deque[tuple[bytes, asyncio.Future[int]]] = deque()
        self._waiting: dict[int, tuple[int, asyncio.Future[int]]] = {}
        self._read_waiting: dict[bytes, asyncio.Future[int]] = {}
        self._ready_reads: list[tuple[int, asyncio.Future[int]]] = []
        self._read_ids = itertools.count(1)
        self._wake = asyncio.Event()
        self._outboxes: dict[int, asyncio.Queue[bytes]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

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
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._tasks[-1]), timeout=5.0)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.client.close()
        self.storage.close()

    # -- client commands -----------------------------------------------------------------------
    async def propose(self, command: bytes) -> int:
        """Replicates `command`; returns its log index once applied here."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._proposals.append((command, future))
        self._wake.set()
        return await future

    async def read_barrier(self) -> int:
        """Waits until this node (the leader) may serve a linearizable read (read-index)."""
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._reads.append((str(next(self._read_ids)).encode(), future))
        self._wake.set()
        return await future

    def leader_address(self) -> str | None:
        return self.settings.peers.get(self.raft.leader)

    # -- the loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
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
                await asyncio.to_thread(self._persist, ready)
                self._send(ready.messages)
                self._apply(ready)
                raft.advance(ready)
                self._maybe_snapshot()
                if not self.settings.batching:
                    break

    def _take_requests(self) -> None:
        raft = self.raft
        count = len(self._proposals) if self.settings.batching else min(1, len(self._proposals))
        for _ in range(count):
            command, future = self._proposals.popleft()
            index = raft.propose(command)
            if index is None:
                future.set_exception(NotLeaderError(self.leader_address()))
            else:
                self._waiting[index] = (raft.term, future)
        while self._reads:
            context, future = self._reads.popleft()
            if raft.read_index(context):
                self._read_waiting[context] = future
            else:
                future.set_exception(NotLeaderError(self.leader_address()))
        if raft.role is not Role.LEADER and self._read_waiting:
            for future in self._read_waiting.values():
                if not future.done():
                    future.set_exception(NotLeaderError(self.leader_address()))
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
            self.kv.restore(ready.snapshot.data)
            log.info(
                "restored the state machine from the leader's snapshot at %d", ready.snapshot.index
            )
        for entry in ready.committed:
            self.kv.apply(entry.index, entry.data)
            waiting = self._waiting.pop(entry.index, None)
            if waiting and not waiting[1].done():
                term, future = waiting
                if term == entry.term:
                    future.set_result(entry.index)
                else:
                    future.set_exception(ProposalLostError(f"entry {entry.index} was overwritten"))
        for read in ready.read_states:
            released = self._read_waiting.pop(read.context, None)
            if released is not None:
                self._ready_reads.append((read.index, released))
        still = []
        for index, future in self._ready_reads:
            if future.done():
                continue
            if self.kv.applied >= index:
                future.set_result(index)
            else:
                still.append((index, future))
        self._ready_reads = still

    def _maybe_snapshot(self) -> None:
        log_state = self.raft.log
        if log_state.applied - log_state.snapshot.index < self.settings.snapshot_every:
            return
        snapshot = self.raft.compact(log_state.applied, self.kv.snapshot())
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

    async def _on_propose(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            index = await self.propose(request.body)
        except (NotLeaderError, ProposalLostError) as exc:
            return self._refusal(request, exc)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={"index": str(index)}
        )

    async def _on_read(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        key = request.ext_fields.get("key", "")
        try:
            await self.read_barrier()
        except NotLeaderError as exc:
            return self._refusal(request, exc)
        found = self.kv.data.get(key)
        fields = {"index": str(found.index)} if found else {}
        body = found.value.encode() if found else b""
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS if found else ResponseCode.QUERY_NOT_FOUND,
            ext_fields=fields,
            body=body,
        )

    async def _on_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        raft = self.raft
        status = {
            "id": raft.id,
            "role": raft.role.value,
            "term": raft.term,
            "leader": raft.leader,
            "leaderAddress": self.leader_address(),
            "commit": raft.log.committed,
            "applied": self.kv.applied,
            "lastIndex": raft.log.last_index,
            "snapshotIndex": raft.log.snapshot.index,
        }
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=json.dumps(status).encode()
        )

    async def _on_dump(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """Every key with its value and the index that wrote it (for comparing replicas)."""
        dump = {key: [v.value, v.index] for key, v in self.kv.data.items()}
        body = json.dumps({"applied": self.kv.applied, "data": dump}).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    def _refusal(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        leader = exc.leader_address if isinstance(exc, NotLeaderError) else None
        return RemotingCommand.response_to(
            request,
            ResponseCode.SYSTEM_BUSY if leader is None else ResponseCode.SYSTEM_ERROR,
            remark=str(exc),
            ext_fields={"leader": leader} if leader else {},
        )
