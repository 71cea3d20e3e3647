"""A client of the replicated key-value store: finds the leader, follows its redirects."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pocketmq.common.codes import ResponseCode
from pocketmq.raftkv.server import KV_DUMP, KV_PROPOSE, KV_READ, KV_STATUS
from pocketmq.raftkv.store import put_command
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import RemotingClient


class RaftKVError(Exception):
    pass


class RaftKVClient:
    def __init__(self, addresses: list[str], *, timeout_s: float = 10.0) -> None:
        self.addresses = list(addresses)
        self.timeout_s = timeout_s
        self._remoting = RemotingClient()
        self._leader: str | None = None

    async def close(self) -> None:
        await self._remoting.close()

    async def put(self, key: str, value: str) -> int:
        """Writes `key`; returns the log index once the leader applied it.

        Raises:
            RaftKVError: no leader accepted it within the timeout. The write may still have
                happened (a leader can fail after committing and before answering).
        """
        response = await self._to_leader(
            RemotingCommand.request(KV_PROPOSE, body=put_command(key, value))
        )
        return int(response.ext_fields["index"])

    async def get(self, key: str) -> str | None:
        """A linearizable read (read-index on the leader)."""
        response = await self._to_leader(RemotingCommand.request(KV_READ, {"key": key}))
        return response.body.decode() if response.code == ResponseCode.SUCCESS else None

    async def status(self, address: str) -> dict[str, Any]:
        response = await self._remoting.invoke(address, RemotingCommand.request(KV_STATUS), 3.0)
        result: dict[str, Any] = json.loads(response.body)
        return result

    async def dump(self, address: str) -> dict[str, Any]:
        response = await self._remoting.invoke(address, RemotingCommand.request(KV_DUMP), 10.0)
        result: dict[str, Any] = json.loads(response.body)
        return result

    async def _to_leader(self, request: RemotingCommand) -> RemotingCommand:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        attempt, last_error = 0, "no node answered"
        while loop.time() < deadline:
            address = self._leader or self.addresses[attempt % len(self.addresses)]
            attempt += 1
            try:
                command = RemotingCommand.request(request.code, request.ext_fields, request.body)
                remaining = max(0.1, deadline - loop.time())
                response = await self._remoting.invoke(address, command, remaining)
            except (RemotingError, OSError) as exc:
                self._leader, last_error = None, f"{address}: {exc}"
                await asyncio.sleep(0.05)
                continue
            if response.code in (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND):
                self._leader = address
                return response
            self._leader = response.ext_fields.get("leader")
            last_error = f"{address}: {response.remark}"
            if self._leader is None:
                await asyncio.sleep(0.05)  # an election is under way
        raise RaftKVError(f"no leader answered within {self.timeout_s} s; last: {last_error}")
