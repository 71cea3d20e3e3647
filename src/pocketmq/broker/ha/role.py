"""A broker's part in its group, by `brokerRole`: a master runs the HA service and its puts
settle with the slaves; a slave refuses puts, follows the master's stream and copies its
metadata. The broker's server creates one and leaves the replication life cycle to it."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pocketmq.broker.config import BrokerRole
from pocketmq.broker.ha.master import HAMaster
from pocketmq.broker.ha.settings import HASettings
from pocketmq.broker.ha.slave import HASlave
from pocketmq.broker.ha.sync import MetadataSync
from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel
from pocketmq.runtime.clock import Clock
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore


class ReplicaRole:
    """The HA side of one broker: `start` with the store, `follow` once registered (slaves),
    `stop` before the store stops."""

    def __init__(self, role: BrokerRole, store_config: MessageStoreConfig, clock: Clock) -> None:
        self.role = role
        self.settings = HASettings.from_store_config(
            store_config, sync=role is BrokerRole.SYNC_MASTER
        )
        self._ha_listen_port = store_config.ha_listen_port
        self._clock = clock
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self.sync: MetadataSync | None = None
        self._store: MessageStore | None = None

    @property
    def is_slave(self) -> bool:
        return self.role is BrokerRole.SLAVE

    async def start(
        self,
        store: MessageStore,
        *,
        bind_address: str,
        listen_port: int,
        master_ha_address: Callable[[], Awaitable[str | None]],
    ) -> int:
        """A master listens on its HA port, a slave gets ready to follow; returns the port to
        announce as `haServerAddr` (`haListenPort`, by default the listen port + 1, or a free
        one when the broker's port was chosen freely).

        Args:
            store: The broker's loaded store.
            bind_address: Where the broker listens.
            listen_port: The broker's port; 0 when it was asked for a free one.
            master_ha_address: A slave's way to find its master's HA address.
        """
        self._store = store
        port = self._ha_listen_port
        if port < 0:
            port = listen_port + 1 if listen_port else 0
        if self.is_slave:
            store.accepts_puts = False
            self.slave = HASlave(store, self.settings, master_ha_address, self._clock)
            return port
        self.master = HAMaster(store, self.settings, self._clock)
        store.replication = self.master
        return await self.master.start(bind_address, port)

    def follow(self, sync: MetadataSync) -> None:
        """A slave starts streaming from its master and copying its metadata."""
        assert self.slave is not None, "only a slave follows"
        self.slave.start()
        self.sync = sync
        sync.start()

    async def stop(self) -> None:
        if self.sync is not None:
            await self.sync.stop()
        if self.slave is not None:
            await self.slave.stop()
        if self.master is not None:
            await self.master.stop()
            if self._store is not None:
                self._store.replication = None

    def status(self) -> dict[str, Any]:
        """`HARuntimeInfo`: the master's slaves, or the slave's view of its master."""
        if self.master is not None:
            return self.master.runtime_info()
        if self.slave is not None:
            return self.slave.runtime_info()
        return {"master": True}

    async def handle_status(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_BROKER_HA_STATUS (907)."""
        body = json.dumps(self.status(), separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)
