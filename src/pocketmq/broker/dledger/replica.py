"""One replica of a DLedger group: the Raft node over the CommitLog state machine, the put
path's writer, and the role it plays in the group.

Roles follow Raft: a leader serves as the group's master (brokerId 0) once its own barrier
entry applied, so that everything earlier leaders committed is in its CommitLog, queues and
tables; until then, and on every other replica, puts are refused with SERVICE_NOT_AVAILABLE
and a remark naming the leader, while reads are served. The broker's server is told of each
switch (`on_master`, `on_slave`) and starts or stops what only a master runs.

A put is one Raft entry (concurrent puts share an append and an fsync); it is acknowledged
once a majority holds it (fsynced with SYNC_FLUSH, in the page cache with ASYNC_FLUSH: the
receipt's `durability` says which) and it applied here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pocketmq.broker.dledger.commands import BARRIER, encode_meta, encode_put
from pocketmq.broker.dledger.settings import DLedgerSettings
from pocketmq.broker.dledger.state_machine import CommitLogStateMachine
from pocketmq.broker.replicated_metadata import MetadataTables, ReplicatedMetadata
from pocketmq.common.stored_message import HostAddress
from pocketmq.raft.core import Role
from pocketmq.raft.node import NotLeaderError, ProposalLostError, RaftNode
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import Durability, MessageToStore, PutResult, PutStatus
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

PREFERRED_CHECK_S = 1.0

RoleHook = Callable[[], Awaitable[None]]


class DLedgerReplica:
    """Build it over the loaded store, `attach` the metadata tables, then `start`."""

    def __init__(
        self,
        settings: DLedgerSettings,
        store: MessageStore,
        *,
        fsync: bool,
        store_host: HostAddress,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.store = store
        self.fsync = fsync
        self.store_host = store_host
        self._clock = clock
        self.serving = False
        """Leading, caught up, and acting as the group's master."""
        self.served_term = 0
        self.role_changes = 0
        self.on_master: list[RoleHook] = []
        self.on_slave: list[RoleHook] = []
        self.node: RaftNode[PutResult | None] | None = None
        self.metadata: ReplicatedMetadata | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # A slave's CommitLog takes only committed entries: no door may write it directly.
        store.accepts_puts = False

    @property
    def is_slave(self) -> bool:
        return not self.serving

    @property
    def broker_id(self) -> int:
        return 0 if self.serving else self.settings.follower_broker_id

    def attach(self, tables: MetadataTables) -> None:
        """Builds the node; the state machine restores from the node's snapshot here."""
        self.metadata = ReplicatedMetadata(tables, self._propose_metadata)
        node_settings = self.settings.node_settings(self.store.root, fsync=self.fsync)
        if not (node_settings.directory / "log").exists() and self.store.max_phy_offset > 0:
            raise ValueError(
                f"{self.store.root} holds a CommitLog written outside DLedger mode; start "
                "DLedger replicas on empty stores (storePathRootDir)"
            )
        machine = CommitLogStateMachine(self.store, self.metadata, self._origin)
        self.node = node = RaftNode(node_settings, machine)
        metadata = self.metadata
        metadata.held_index = lambda: min(node.match_indexes().values(), default=0)
        node.held_by_all = lambda: metadata.held_by_all

    def _origin(self) -> tuple[int, int]:
        """What this replica's own META commands carry while it serves: those are in its
        tables already. A replica restarted in the term it led replays them as a follower, and
        must apply them (its tables restarted without them)."""
        assert self.node is not None
        return (self.node.settings.node_id, self.served_term if self.serving else -1)

    async def start(self) -> None:
        node = self._node()
        await node.start()
        node.on_change.append(self._changed.set)
        self._changed.set()
        self._task = asyncio.get_running_loop().create_task(self._follow_roles(), name="dledger")
        log.info(
            "DLedger group %s: replica %s of %s, election timeout %d ms",
            self.settings.group,
            self.settings.self_id,
            ", ".join(f"{n}={a}" for n, a in self.settings.peers.items()),
            self.settings.election_timeout_ms,
        )

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        if self.serving:
            await self._become_slave("stopping")
        if self.node is not None:
            await self.node.stop()

    def _node(self) -> RaftNode[PutResult | None]:
        assert self.node is not None, "attach() first"
        return self.node

    # -- roles -------------------------------------------------------------------------------
    async def _follow_roles(self) -> None:
        node = self._node()
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(PREFERRED_CHECK_S):
                    await self._changed.wait()
            self._changed.clear()
            raft = node.raft
            if self.serving and (raft.role is not Role.LEADER or raft.term != self.served_term):
                await self._become_slave(f"term {raft.term}, leader {self.leader_name() or '-'}")
            if raft.role is Role.LEADER and not self.serving:
                term = raft.term
                try:
                    # Bounded: a leader cut off right after its election would wait until the
                    # partition heals; the next round looks at the role again.
                    async with asyncio.timeout(2 * self.settings.election_timeout_ms / 1000):
                        await node.propose(BARRIER)
                except (NotLeaderError, ProposalLostError, TimeoutError):
                    self._changed.set()
                    continue
                if raft.role is Role.LEADER and raft.term == term:
                    await self._become_master(term)
            if self.serving:
                self._hand_to_preferred()

    async def _become_master(self, term: int) -> None:
        self.serving = True
        self.served_term = term
        self.role_changes += 1
        log.info(
            "DLedger group %s: %s leads in term %d and serves as master (commit index %d)",
            self.settings.group,
            self.settings.self_id,
            term,
            self._node().raft.log.committed,
        )
        assert self.metadata is not None
        self.metadata.start_recording()
        await self._run_hooks(self.on_master)

    async def _become_slave(self, why: str) -> None:
        self.serving = False
        self.role_changes += 1
        log.info(
            "DLedger group %s: %s no longer master (%s)", self.settings.group,
            self.settings.self_id, why,
        )  # fmt: skip
        assert self.metadata is not None
        await self.metadata.stop_recording()
        await self._run_hooks(self.on_slave)

    async def _run_hooks(self, hooks: list[RoleHook]) -> None:
        for hook in hooks:
            try:
                await hook()
            except Exception:  # a service that fails to start or stop must not stop the roles
                log.exception("DLedger group %s: a role change step failed", self.settings.group)

    def _hand_to_preferred(self) -> None:
        preferred = self.settings.preferred_leader
        if not preferred or preferred == self.settings.self_id:
            return
        node = self._node()
        target = self.settings.raft_id(preferred)
        if node.match_indexes().get(target, -1) == node.raft.log.last_index:
            log.info("handing leadership to the preferred leader %s", preferred)
            node.transfer_leadership(target)

    def transfer_to(self, name: str) -> str | None:
        """Starts handing leadership to replica `name`; returns why not, or None."""
        if name not in self.settings.peers:
            return f"{name} is not one of the peers ({', '.join(self.settings.peers)})"
        if name == self.settings.self_id:
            return f"{name} leads already" if self.serving else f"{name} is this replica"
        if not self._node().transfer_leadership(self.settings.raft_id(name)):
            return "this replica does not lead; ask the leader"
        return None

    def leader_name(self) -> str | None:
        return self.settings.name_of(self._node().raft.leader)

    # -- the put path's writer ---------------------------------------------------------------
    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        node = self._node()
        if not self.serving:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=self._not_master())
        metadata = self.metadata
        command = encode_put(messages, self._clock.now_ms(), self.store_host)
        try:
            if metadata is not None and metadata.topics_changed_since_last_command:
                # A topic this send created goes into the log before its first message, so
                # that no replica (and no next master) holds messages of a topic it lacks.
                await metadata.flush()
            applied = await node.propose(command)
        except (NotLeaderError, ProposalLostError) as exc:
            return PutResult(PutStatus.SERVICE_NOT_AVAILABLE, remark=f"{exc}; send again")
        result = applied.result
        if result is None:  # cannot happen: a PUT applies to a result
            return PutResult(PutStatus.UNKNOWN_ERROR, remark="the entry applied to nothing")
        if result.ok:
            for position, message in enumerate(messages):
                message.queue_offset = result.queue_offset + position
            result.durability = Durability.FLUSHED if self.fsync else Durability.IN_MEMORY
            matches = node.match_indexes().values()
            result.replicas = max(
                sum(1 for match in matches if match >= applied.index),
                len(self.settings.peers) // 2 + 1,
            )
        return result

    def _not_master(self) -> str:
        leader = self.leader_name()
        where = f"the leader is {leader}" if leader else "no leader is elected yet"
        return (
            f"this broker is a follower of DLedger group {self.settings.group} ({where}); "
            "send to the master the NameServer names"
        )

    async def _propose_metadata(self, document: dict[str, Any]) -> None:
        node = self._node()
        if not self.serving:
            raise NotLeaderError(node.leader_address())
        document["origin"] = [node.settings.node_id, self.served_term]
        await node.propose(encode_meta(document))

    # -- status ------------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        node = self._node()
        raft = node.raft
        matches = node.match_indexes()
        last = raft.log.last_index
        peers = {}
        for name, address in self.settings.peers.items():
            raft_id = self.settings.raft_id(name)
            entry: dict[str, Any] = {"address": address}
            if raft_id in matches:
                entry["matchIndex"] = matches[raft_id]
                entry["lag"] = last - matches[raft_id]
            peers[name] = entry
        return {
            "group": self.settings.group,
            "selfId": self.settings.self_id,
            "role": raft.role.value,
            "master": self.serving,
            "brokerId": self.broker_id,
            "term": raft.term,
            "leader": self.leader_name(),
            "commitIndex": raft.log.committed,
            "appliedIndex": node.applied,
            "lastIndex": last,
            "commitLogMaxOffset": self.store.max_phy_offset,
            "roleChanges": self.role_changes,
            "durability": "FLUSHED" if self.fsync else "IN_MEMORY",
            "peers": peers,
        }
