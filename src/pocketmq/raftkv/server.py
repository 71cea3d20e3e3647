"""One node of the replicated key-value store: a `RaftNode` replicating a `KeyValueStore`, and
the request handlers clients reach on the node's address (writes and reads on the leader,
status and dumps on any node)."""

from __future__ import annotations

import json

from pocketmq.common.codes import ResponseCode
from pocketmq.raft.node import NodeSettings, NotLeaderError, ProposalLostError, RaftNode
from pocketmq.raftkv.store import KeyValueStore
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel

KV_PROPOSE = 51101
KV_READ = 51102
KV_STATUS = 51103
KV_DUMP = 51104


class KeyValueServer:
    def __init__(self, settings: NodeSettings) -> None:
        self.store = KeyValueStore()
        self.node: RaftNode[str | None] = RaftNode(
            settings,
            self.store,
            {
                KV_PROPOSE: self._on_propose,
                KV_READ: self._on_read,
                KV_STATUS: self._on_status,
                KV_DUMP: self._on_dump,
            },
        )

    async def start(self) -> int:
        return await self.node.start()

    async def stop(self) -> None:
        await self.node.stop()

    async def _on_propose(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            applied = await self.node.propose(request.body)
        except (NotLeaderError, ProposalLostError) as exc:
            return self._refusal(request, exc)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={"index": str(applied.index)}
        )

    async def _on_read(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        key = request.ext_fields.get("key", "")
        try:
            await self.node.read_barrier()
        except NotLeaderError as exc:
            return self._refusal(request, exc)
        found = self.store.data.get(key)
        fields = {"index": str(found.index)} if found else {}
        body = found.value.encode() if found else b""
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS if found else ResponseCode.QUERY_NOT_FOUND,
            ext_fields=fields,
            body=body,
        )

    async def _on_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        raft = self.node.raft
        status = {
            "id": raft.id,
            "role": raft.role.value,
            "term": raft.term,
            "leader": raft.leader,
            "leaderAddress": self.node.leader_address(),
            "commit": raft.log.committed,
            "applied": self.store.applied,
            "lastIndex": raft.log.last_index,
            "snapshotIndex": raft.log.snapshot.index,
        }
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=json.dumps(status).encode()
        )

    async def _on_dump(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """Every key with its value and the index that wrote it (for comparing replicas)."""
        dump = {key: [v.value, v.index] for key, v in self.store.data.items()}
        body = json.dumps({"applied": self.store.applied, "data": dump}).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    def _refusal(self, request: RemotingCommand, exc: Exception) -> RemotingCommand:
        """No leader known yet: SYSTEM_BUSY (retry later); a known leader: SYSTEM_ERROR with
        its address in the `leader` field (retry there)."""
        leader = exc.leader_address if isinstance(exc, NotLeaderError) else None
        return RemotingCommand.response_to(
            request,
            ResponseCode.SYSTEM_BUSY if leader is None else ResponseCode.SYSTEM_ERROR,
            remark=str(exc),
            ext_fields={"leader": leader} if leader else {},
        )
