"""Registration with the NameServers (`BrokerOuterAPI.registerBrokerAll`).

The broker registers every topic with every NameServer at start, every
`registerNameServerPeriod` (clamped to 10-60 s as RocketMQ does) and when its table changes
otherwise (a slave's copy, a deletion); a topic created or updated goes alone, at once (an
increment, as RocketMQ's `registerIncrementBrokerData`), so that creating many topics costs
each a small registration rather than the whole table. It unregisters at a clean stop.
NameServers are independent: one that is down is retried at the next round and does not delay
the others. A NameServer that refuses the registration (another live broker holds this broker
name and id) is logged once as an error; the broker keeps serving and keeps trying, and is
registered once the holder is gone.
"""

from __future__ import annotations

import asyncio
import json
import logging
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import RemotingClient
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """How this broker presents itself to NameServers."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str


def register_request(identity: BrokerIdentity, topics_document: dict[str, Any]) -> RemotingCommand:
    """REGISTER_BROKER with the plain JSON `RegisterBrokerBody`."""
    body = json.dumps(
        {"filterServerList": [], "topicConfigSerializeWrapper": topics_document},
        separators=(",", ":"),
    ).encode()
    return RemotingCommand.request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerAddr": identity.broker_addr,
            "brokerId": str(identity.broker_id),
            "brokerName": identity.broker_name,
            "clusterName": identity.cluster_name,
            "haServerAddr": identity.ha_server_addr,
            "compressed": "false",
            "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF),
            "enableActingMaster": "false",
        },
        body,
    )


class NameServerRegistrar:
    """Keeps this broker registered with every NameServer."""

    def __init__(
        self,
        client: RemotingClient,
        namesrv_addresses: list[str],
        identity: BrokerIdentity,
        topics_document: Callable[[], dict[str, Any]],
        *,
        period_ms: int = 30_000,
        timeout_ms: int = 24_000,
    ) -> None:
        self._client = client
        self.addresses = namesrv_addresses
        self._identity = identity
        self._topics_document = topics_document
        self._period_s = min(max(period_ms, 10_000), 60_000) / 1000
        self._timeout_s = timeout_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self.master_address: str | None = None
        self.master_ha_address: str | None = None
        self._wakeup = asyncio.Event()
        self.registered: dict[str, bool] = {}
        self.refusals: dict[str, str] = {}
        """NameServer -> its last refusal (`code N remark`), until it accepts again."""
        self._state_version: int | None = None

    @property
    def identity(self) -> BrokerIdentity:
        return self._identity

    def retarget(self, broker_id: int, state_version: int) -> None:
        """Registers from now on as `broker_id`, with `state_version` in the topics' data
        version: a DLedger replica's role and term (NameServers keep a master slot for the
        highest state version, so a deposed leader cannot take it back)."""
        if broker_id != self._identity.broker_id:
            log.info(
                "registering as brokerId %d of %s from now on",
                broker_id,
                self._identity.broker_name,
            )
        self._identity = replace(self._identity, broker_id=broker_id)
        self._state_version = state_version

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="namesrv-register")

    def register_soon(self) -> None:
        """Registers again at once (topics changed)."""
        self._wakeup.set()

    async def register_topics(self, document: dict[str, Any]) -> None:
        """Sends part of the topics (`TopicTable.increment`) to every NameServer and returns
        once each has answered or failed, as RocketMQ answers a topic's creation only once
        they know it: a client routes it next. A NameServer keeps the broker's other topics;
        with `deleteTopicWithBrokerRegistration` it drops them until the next round, as
        RocketMQ's does.

        A NameServer this broker has not registered with yet gets the whole table instead: it
        takes a broker's first registration as its whole view, and would skip a full round
        after it under the same data version (a topic made while the broker starts, before
        its first round, would otherwise leave the slave's routes, without write permission).
        """
        await asyncio.gather(
            *(
                self._register(address, document if self.registered.get(address) else None)
                for address in self.addresses
            )
        )

    async def register_all(self) -> None:
        await asyncio.gather(*(self._register(address) for address in self.addresses))

    async def _register(self, address: str, document: dict[str, Any] | None = None) -> None:
        if document is None:
            document = self._topics_document()
        if self._state_version is not None:
            version = {**document.get("dataVersion", {}), "stateVersion": self._state_version}
            document = {**document, "dataVersion": version}
        request = register_request(self._identity, document)
        try:
            response = await self._client.invoke(address, request, self._timeout_s)
        except (RemotingError, OSError) as exc:
            if self.registered.get(address, True):
                log.warning("cannot register with NameServer %s: %s", address, exc)
            self.registered[address] = False
            return
        if response.code != ResponseCode.SUCCESS:
            # Logged again only when the answer changes: a refused broker keeps running and
            # retries every period (it takes the slot once the holder is gone), quietly.
            refusal = f"code {response.code} {response.remark}"
            if self.refusals.get(address) != refusal:
                log.error("NameServer %s refused the registration: %s", address, refusal)
            self.refusals[address] = refusal
            self.registered[address] = False
            return
        self.refusals.pop(address, None)
        if not self.registered.get(address, False):
            log.info("registered with NameServer %s", address)
        self.registered[address] = True
        # A slave learns its master here; kept while the master is away (it comes back there).
        ha_address = response.ext_fields.get("haServerAddr")
        if ha_address and ha_address != self.master_ha_address:
            log.info("master of %s: %s (HA %s)", self._identity.broker_name,
                     response.ext_fields.get("masterAddr"), ha_address)  # fmt: skip
            self.master_ha_address = ha_address
        if response.ext_fields.get("masterAddr"):
            self.master_address = response.ext_fields["masterAddr"]

    async def _run(self) -> None:
        """Registers every period, or at once when woken; `start` follows a first round."""
        while True:
            try:
                async with asyncio.timeout(self._period_s):
                    await self._wakeup.wait()
            except TimeoutError:
                pass
            # Cleared before the round: a change during the round triggers another one.
            self._wakeup.clear()
            await self.register_all()

    async def stop(self) -> None:
        """Stops the rounds and unregisters from every NameServer (best effort)."""
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        identity = self._identity
        request_fields = {
            "brokerAddr": identity.broker_addr,
            "brokerId": str(identity.broker_id),
            "brokerName": identity.broker_name,
            "clusterName": identity.cluster_name,
        }

        async def unregister(address: str) -> None:
            request = RemotingCommand.request(RequestCode.UNREGISTER_BROKER, request_fields)
            try:
                await self._client.invoke(address, request, 3)
            except (RemotingError, OSError) as exc:
                log.info("could not unregister from NameServer %s: %s", address, exc)

        await asyncio.gather(*(unregister(a) for a in self.addresses))
