"""A started broker starts its sends as decoded only where a put does not wait.

`eager_request_codes` says which codes are eager for either answer (tests/unit/broker);
this checks that the broker asks it the right question for its flush type and role.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.server import BrokerServer
from pocketmq.common.codes import RequestCode
from pocketmq.store.config import FlushDiskType, MessageStoreConfig


@pytest.mark.parametrize(
    ("flush", "role", "sends_eager"),
    [
        (FlushDiskType.ASYNC_FLUSH, BrokerRole.ASYNC_MASTER, True),
        (FlushDiskType.SYNC_FLUSH, BrokerRole.ASYNC_MASTER, False),
        (FlushDiskType.ASYNC_FLUSH, BrokerRole.SYNC_MASTER, False),
    ],
)
def test_sends_start_as_decoded_only_where_puts_do_not_wait(
    tmp_path: Path, flush: FlushDiskType, role: BrokerRole, sends_eager: bool
) -> None:
    async def scenario() -> None:
        broker = BrokerServer(
            BrokerConfig(
                bind_address="127.0.0.1", broker_ip1="127.0.0.1", listen_port=0, broker_role=role
            ),
            MessageStoreConfig(
                store_path_root_dir=str(tmp_path / "store"),
                mapped_file_size_commit_log=4 << 20,
                flush_disk_type=flush,
            ),
        )
        await broker.start()
        try:
            assert broker.server is not None
            eager = broker.server.eager
            assert (RequestCode.SEND_MESSAGE_V2 in eager) is sends_eager
            assert RequestCode.PULL_MESSAGE in eager
        finally:
            await broker.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))
