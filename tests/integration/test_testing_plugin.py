"""The pytest plugin's fixtures give a working cluster in one line."""

from __future__ import annotations

import asyncio

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import InProcessCluster, ServerProcess
from tests.integration.test_broker import send_v2


def route(namesrv: str, topic: str) -> int:
    async def ask() -> int:
        client = RemotingClient()
        try:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            return (await client.invoke(namesrv, request, 5)).code
        finally:
            await client.close()

    return asyncio.run(ask())


def test_in_process_cluster(pocketmq_cluster: InProcessCluster) -> None:
    assert route(pocketmq_cluster.namesrv_addr, "TBW102") == ResponseCode.SUCCESS

    async def send() -> int:
        client = RemotingClient()
        try:
            answer = await client.invoke(pocketmq_cluster.broker_addr, send_v2("P", 0, b"x"), 5)
            return answer.code
        finally:
            await client.close()

    assert asyncio.run(send()) == ResponseCode.SUCCESS


def test_process_cluster(pocketmq_process_cluster: ServerProcess) -> None:
    assert route(pocketmq_process_cluster.address, "TBW102") == ResponseCode.SUCCESS
