"""A broker's line to the controllers (`controllerAddr`, separated by `;`): finds the leader
(CONTROLLER_GET_METADATA_INFO answered by any replica), sends it requests, and follows it when
it moves (CONTROLLER_NOT_LEADER, or a replica that stopped answering)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import RemotingClient

log = logging.getLogger(__name__)

TIMEOUT_S = 3.0


class ControllerUnavailable(Exception):
    """No controller leader answered; the message says what was tried."""


class ControllerClient:
    def __init__(self, client: RemotingClient, addresses: list[str]) -> None:
        self._client = client
        self.addresses = addresses
        self.leader: str | None = None
        self._warned = False

    async def find_leader(self) -> str:
        """Asks every controller who leads; the first that names a leader wins.

        Raises:
            ControllerUnavailable: none knows a leader.
        """
        problems = []
        for address in self.addresses:
            request = RemotingCommand.request(RequestCode.CONTROLLER_GET_METADATA_INFO)
            try:
                response = await self._client.invoke(address, request, TIMEOUT_S)
            except (RemotingError, OSError) as exc:
                problems.append(f"{address}: {exc}")
                continue
            leader = response.ext_fields.get("controllerLeaderAddress")
            if response.code == ResponseCode.SUCCESS and leader:
                if leader != self.leader:
                    log.info("controller leader: %s", leader)
                self.leader = leader
                self._warned = False
                return leader
            problems.append(f"{address}: no leader known yet")
        raise ControllerUnavailable("; ".join(problems) or "controllerAddr lists no controller")

    async def invoke(
        self,
        code: int,
        fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        attempts: int = 3,
    ) -> RemotingCommand:
        """Sends a request to the leader, finding it again when it moved.

        Raises:
            ControllerUnavailable: no leader answered in `attempts` tries.
        """
        problem = ""
        for _ in range(attempts):
            try:
                leader = self.leader or await self.find_leader()
                request = RemotingCommand.request(code, fields, body)
                response = await self._client.invoke(leader, request, TIMEOUT_S)
            except (ControllerUnavailable, RemotingError, OSError) as exc:
                problem = str(exc)
                self.leader = None
                await asyncio.sleep(0.05)
                continue
            if response.code == ResponseCode.CONTROLLER_NOT_LEADER:
                problem = f"{leader} no longer leads"
                self.leader = None
                continue
            return response
        if not self._warned:
            log.warning("no controller leader answered request %d: %s", code, problem)
            self._warned = True
        raise ControllerUnavailable(problem)

    async def heartbeat_all(self, fields: Mapping[str, str]) -> HeartbeatAnswers:
        """BROKER_HEARTBEAT to every controller (each keeps its own view of who is alive);
        what they answered, together."""

        async def one(address: str) -> RemotingCommand | None:
            request = RemotingCommand.request(RequestCode.BROKER_HEARTBEAT, fields)
            try:
                response = await self._client.invoke(address, request, TIMEOUT_S)
            except (RemotingError, OSError):
                return None
            return response if response.code == ResponseCode.SUCCESS else None

        answers = [a for a in await asyncio.gather(*(one(a) for a in self.addresses)) if a]
        epochs = [a.ext_fields.get("masterEpoch", "") for a in answers]
        levels = [a.ext_fields.get("haQos", "") for a in answers]
        return HeartbeatAnswers(
            took=len(answers),
            master_epoch=max((int(e) for e in epochs if e.isdigit()), default=0),
            qos=next((level for level in levels if level), None),
        )


@dataclass(frozen=True, slots=True)
class HeartbeatAnswers:
    took: int
    """How many controllers took the heartbeat."""
    master_epoch: int
    """The newest master epoch of the group they named (pocketmq's controllers say it)."""
    qos: str | None
    """The group's QoS level, as a pocketmq controller says it."""
