"""A slave's copy of its master's metadata (RocketMQ's `SlaveSynchronize`): topics,
subscription groups, consumer offsets and delay offsets, pulled at start and every 10 s.

The master answers GET_ALL_TOPIC_CONFIG (21), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45) with the JSON documents of its
files; the slave replaces its tables with them and saves them, so that consumers reading from
the slave while the master is away start where the group was.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel, RemotingClient, RequestHandler
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0
_TIMEOUT_S = 3.0

Apply = Callable[[Any], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class MetadataTargets:
    """Where each of the master's documents goes on the slave."""

    topics: Apply
    groups: Apply
    consumer_offsets: Apply
    delay_offsets: Apply


class MetadataSync:
    """Pulls the master's metadata into a slave's tables, now and then."""

    def __init__(
        self,
        client: RemotingClient,
        master_address: Callable[[], str | None],
        targets: MetadataTargets,
        *,
        interval_s: float = SYNC_INTERVAL_S,
    ) -> None:
        self._client = client
        self._master_address = master_address
        self._targets = targets
        self._interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self.last_sync_ok: bool | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metadata-sync")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    async def _run(self) -> None:
        while True:
            await self.sync_once()
            await asyncio.sleep(self._interval_s)

    async def sync_once(self) -> bool:
        """One round; False (logged once per outage) when the master did not answer."""
        address = self._master_address()
        if not address:
            return False
        targets = self._targets
        try:
            for code, apply in (
                (RequestCode.GET_ALL_TOPIC_CONFIG, targets.topics),
                (RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, targets.groups),
                (RequestCode.GET_ALL_CONSUMER_OFFSET, targets.consumer_offsets),
                (RequestCode.GET_ALL_DELAY_OFFSET, targets.delay_offsets),
            ):
                await apply(await self._fetch(address, code))
        except (RemotingError, OSError, ValueError) as exc:
            if self.last_sync_ok is not False:
                log.warning("metadata sync from master %s failed: %s; retrying", address, exc)
            self.last_sync_ok = False
            return False
        if self.last_sync_ok is not True:
            log.info("metadata synced from master %s", address)
        self.last_sync_ok = True
        return True

    async def hand_back_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commits `offset` on the master (UPDATE_CONSUMER_OFFSET).

        Raises:
            ValueError: no master known, or it refused.
        """
        address = self._master_address()
        if not address:
            raise ValueError("no master to hand the consumer progress back to")
        header = {
            "consumerGroup": group,
            "topic": topic,
            "queueId": str(queue_id),
            "commitOffset": str(offset),
        }
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header)
        response = await self._client.invoke(address, request, _TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"the master refused offset {offset}: {response.remark}")
        log.info(
            "handed progress of %s on %s/%d (%d), committed here, back to master %s",
            group, topic, queue_id, offset, address,
        )  # fmt: skip

    async def _fetch(self, address: str, code: int) -> Any:
        response = await self._client.invoke(address, RemotingCommand.request(code, {}), _TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ValueError(f"request {code} refused: {response.code} {response.remark}")
        return json.loads(response.body or b"{}")


def master_routes(
    consumer_offsets: Callable[[], dict[str, Any]], delay_offsets: Callable[[], dict[str, Any]]
) -> dict[int, RequestHandler]:
    """The master's answers a slave needs beyond the admin ones (43 and 45)."""

    def answer(document: Callable[[], dict[str, Any]]) -> RequestHandler:
        async def handle(request: RemotingCommand, channel: Channel) -> RemotingCommand:
            body = json.dumps(document(), separators=(",", ":")).encode()
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

        return handle

    return {
        RequestCode.GET_ALL_CONSUMER_OFFSET: answer(consumer_offsets),
        RequestCode.GET_ALL_DELAY_OFFSET: answer(delay_offsets),
    }
