"""`NameServerRegistrar.register_now`, against a NameServer on loopback: it returns once the
NameServer routes what the broker's topics hold, a change asked for by `register_soon` too is
sent once, and it does not wait for rounds that stopped."""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.broker.registrar import BrokerIdentity, NameServerRegistrar
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NamesrvServer
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient

IDENTITY = BrokerIdentity("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912")


class Documents:
    """The broker's topics as the registrar reads them, counting the reads (one a NameServer
    a round)."""

    def __init__(self) -> None:
        self.topics = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
        self.topics.load(None, 0)
        self.reads = 0

    def __call__(self) -> dict[str, Any]:
        self.reads += 1
        return self.topics.snapshot()


async def _routed(client: RemotingClient, namesrv: str, topic: str) -> bool:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    return (await client.invoke(namesrv, request, 5)).code == ResponseCode.SUCCESS


def test_register_now_returns_once_the_topic_is_routed_and_sends_a_change_once() -> None:
    async def scenario() -> None:
        namesrv = NamesrvServer(NamesrvConfig(listen_port=0, bind_address="127.0.0.1"))
        address = f"127.0.0.1:{await namesrv.start()}"
        client = RemotingClient()
        documents = Documents()
        registrar = NameServerRegistrar(client, [address], IDENTITY, documents)
        try:
            await registrar.register_all()
            registrar.start()
            for round_ in range(3):
                topic = f"Fresh{round_}"
                documents.topics.update(TopicConfig(topic, 4, 4), 0)
                before = documents.reads
                registrar.register_soon()  # as the broker's change of topics asks
                await registrar.register_now()
                assert await _routed(client, address, topic)
                assert documents.reads == before + 1
            await registrar.stop()
            # Stopped: it registers by itself rather than waiting for rounds that will not come.
            documents.topics.update(TopicConfig("Late", 4, 4), 0)
            await asyncio.wait_for(registrar.register_now(), 5)
            assert await _routed(client, address, "Late")
        finally:
            await registrar.stop()
            await client.close()
            await namesrv.stop()

    asyncio.run(scenario())
