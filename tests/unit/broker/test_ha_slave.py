"""The slave's side of replication against a master that misbehaves, over loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.broker.ha.epochs import FILE_NAME, EpochFile
from pocketmq.broker.ha.settings import HASettings
from pocketmq.broker.ha.slave import HASlave
from pocketmq.runtime.clock import SystemClock
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore
from pocketmq.testing import async_wait_until


def test_a_master_closing_during_the_handshake_is_retried(tmp_path: Path) -> None:
    """The master reads the slave's hello and hangs up before its epochs: the slave treats it
    as any lost connection and comes back, instead of its task dying without a word."""

    async def run() -> None:
        connections = 0

        async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal connections
            connections += 1
            await reader.read(1)
            writer.close()

        server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = MessageStore(MessageStoreConfig(store_path_root_dir=str(tmp_path / "store")))
        store.load()
        epochs = EpochFile(tmp_path / FILE_NAME)
        epochs.load()

        async def master_address() -> str:
            return f"127.0.0.1:{port}"

        slave = HASlave(
            store, HASettings(housekeeping_s=5), master_address, SystemClock(), epochs=epochs
        )
        slave.start()
        try:
            await async_wait_until(
                lambda: connections >= 2, "the slave connected again", timeout_s=10, poll_s=0.05
            )
        finally:
            await slave.stop()
            server.close()
            await server.wait_closed()
            await store.shutdown()

    asyncio.run(run())
