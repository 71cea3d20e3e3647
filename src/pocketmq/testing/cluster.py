"""An in-process cluster for tests: a NameServer and a broker on an event loop of their own.

The servers run on a background thread, so synchronous tests and tests with their own event
loop can use them alike; every port is picked free on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.server import BrokerServer
from pocketmq.namesrv.server import NamesrvConfig, NamesrvServer
from pocketmq.runtime.event_loop import run_until_stopped
from pocketmq.store.config import MessageStoreConfig

T = TypeVar("T")


@dataclass
class InProcessCluster:
    """A running NameServer and broker; `namesrv_addr` is what clients are given."""

    namesrv: NamesrvServer
    broker: BrokerServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    @property
    def broker_addr(self) -> str:
        return self.broker.address

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 30.0) -> T:
        """Runs a coroutine on the cluster's loop (e.g. to inspect the store) and waits."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)

    def stop(self) -> None:
        """Stops the broker and the NameServer, then closes the loop; again, does nothing."""
        if self.loop.is_closed():
            return

        async def stop_all() -> None:
            await self.broker.stop()
            await self.namesrv.stop()

        try:
            self.call(stop_all())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(timeout=30)


def start_cluster(data_dir: Path, **broker_settings: Any) -> InProcessCluster:
    """Starts a NameServer and a broker (cluster DefaultCluster, broker-a) on free ports.

    `broker_settings` set `BrokerConfig` or `MessageStoreConfig` fields by name, e.g.
    `flush_disk_type=FlushDiskType.SYNC_FLUSH`. As `pocketmq up`, timer messages may be
    recalled.
    """
    loop = asyncio.new_event_loop()
    thread = threading.Thread(
        target=run_until_stopped, args=(loop,), name="pocketmq-cluster", daemon=True
    )
    thread.start()
    namesrv = NamesrvServer(NamesrvConfig(listen_port=0, bind_address="127.0.0.1"))
    broker_config = BrokerConfig(
        listen_port=0, bind_address="127.0.0.1", broker_ip1="127.0.0.1", recall_message_enable=True
    )
    store_config = MessageStoreConfig(
        store_path_root_dir=str(data_dir),
        mapped_file_size_commit_log=64 * 1024 * 1024,
    )
    for name, value in broker_settings.items():
        target = broker_config if hasattr(broker_config, name) else store_config
        if not hasattr(target, name):
            raise TypeError(f"no broker or store setting named {name!r}")
        setattr(target, name, value)

    async def start() -> BrokerServer:
        port = await namesrv.start()
        broker_config.namesrv_addr = f"127.0.0.1:{port}"
        broker = BrokerServer(broker_config, store_config)
        await broker.start()
        return broker

    try:
        broker = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        raise
    return InProcessCluster(namesrv, broker, loop, thread)
