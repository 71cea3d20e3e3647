"""`NameServerRegistrar.register_topics`, against a NameServer on loopback: it returns once the
NameServer routes the topics it carries, without reading or sending the whole table, and two
changes sent in either order both reach the routes."""

from __future__ import annotations

import asyncio
from typing import Any

from pocketmq.broker.registrar import BrokerIdentity, NameServerRegistrar
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_WRITE
from pocketmq.common.route import TopicRouteData
from pocketmq.common.route_json import decode_topic_route
from pocketmq.namesrv.config import NamesrvConfig
from pocketmq.namesrv.server import NamesrvServer
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient

IDENTITY = BrokerIdentity("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", "127.0.0.1:10912")


class Documents:
    """The broker's topics as the registrar reads them for a round, counting the reads."""

    def __init__(self) -> None:
        self.topics = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
        self.topics.load(None, 0)
        self.reads = 0

    def __call__(self) -> dict[str, Any]:
        self.reads += 1
        return self.topics.snapshot()


async def _route(client: RemotingClient, namesrv: str, topic: str) -> TopicRouteData | None:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    response = await client.invoke(namesrv, request, 5)
    if response.code != ResponseCode.SUCCESS:
        return None
    return decode_topic_route(response.body)


async def _write_queues(client: RemotingClient, namesrv: str, topic: str) -> int | None:
    """The topic's write queues on broker-a by the NameServer's route, None when unrouted."""
    route = await _route(client, namesrv, topic)
    if route is None:
        return None
    return next(q.write_queue_nums for q in route.queue_datas if q.broker_name == "broker-a")


def run_with_registrar(scenario: Any) -> None:
    async def main() -> None:
        namesrv = NamesrvServer(NamesrvConfig(listen_port=0, bind_address="127.0.0.1"))
        address = f"127.0.0.1:{await namesrv.start()}"
        client = RemotingClient()
        documents = Documents()
        registrar = NameServerRegistrar(client, [address], IDENTITY, documents)
        try:
            await registrar.register_all()
            registrar.start()
            await scenario(registrar, documents, client, address)
        finally:
            await registrar.stop()
            await client.close()
            await namesrv.stop()

    asyncio.run(main())


def test_register_topics_returns_once_routed_and_sends_only_those_topics() -> None:
    async def scenario(
        registrar: NameServerRegistrar, documents: Documents, client: RemotingClient, ns: str
    ) -> None:
        for round_ in range(3):
            topic = f"Fresh{round_}"
            documents.topics.update(TopicConfig(topic, 4, 4), 0)
            reads = documents.reads
            increment = documents.topics.increment([topic], 0)
            assert list(increment["topicConfigTable"]) == [topic]
            await registrar.register_topics(increment)
            assert await _write_queues(client, ns, topic) == 4
            assert documents.reads == reads  # the whole table was neither read nor sent
        # The broker's other topics stay routed, and a full round after changes nothing.
        await registrar.register_all()
        assert await _write_queues(client, ns, "Fresh0") == 4
        assert await _write_queues(client, ns, "TBW102") == 8

    run_with_registrar(scenario)


def test_changes_sent_in_either_order_both_reach_the_routes() -> None:
    """Two changes made before either is sent: without a version of its own for each, the
    NameServer takes the second as one it has seen and keeps the old queue count."""

    async def scenario(
        registrar: NameServerRegistrar, documents: Documents, client: RemotingClient, ns: str
    ) -> None:
        topics = documents.topics
        topics.update(TopicConfig("Grown", 4, 4), 0)
        await registrar.register_topics(topics.increment(["Grown"], 0))
        assert await _write_queues(client, ns, "Grown") == 4
        # A send creates one topic and, while its put is under way, an admin grows another.
        topics.update(TopicConfig("Created", 2, 2), 0)
        topics.update(TopicConfig("Grown", 8, 8), 0)
        grown = topics.increment(["Grown"], 0)
        created = topics.increment(["Created"], 0)
        await registrar.register_topics(created)
        await registrar.register_topics(grown)
        assert await _write_queues(client, ns, "Created") == 2
        assert await _write_queues(client, ns, "Grown") == 8

    run_with_registrar(scenario)


def test_a_change_before_the_first_full_registration_leaves_no_topic_unrouted() -> None:
    """A topic made while a master starts (POP's revive topic, an early `updateTopic`) is sent
    before its first full round. Sent alone, it would be the NameServer's first view of the
    master, and the full round after it, under the same data version, would be skipped: the
    routes would keep what the slave registered, without write permission."""

    async def main() -> None:
        namesrv = NamesrvServer(NamesrvConfig(listen_port=0, bind_address="127.0.0.1"))
        address = f"127.0.0.1:{await namesrv.start()}"
        client = RemotingClient()
        slave = NameServerRegistrar(
            client,
            [address],
            BrokerIdentity("DefaultCluster", "broker-a", 1, "127.0.0.1:10921", "127.0.0.1:10922"),
            Documents(),
        )
        documents = Documents()
        master = NameServerRegistrar(client, [address], IDENTITY, documents)
        try:
            await slave.register_all()
            documents.topics.update(TopicConfig("Early", 2, 2), 0)
            await master.register_topics(documents.topics.increment(["Early"], 0))
            await master.register_all()
            route = await _route(client, address, "TBW102")
            assert route is not None
            (queues,) = [q for q in route.queue_datas if q.broker_name == "broker-a"]
            assert queues.perm & PERM_WRITE
            assert await _write_queues(client, address, "Early") == 2
        finally:
            await master.stop()
            await slave.stop()
            await client.close()
            await namesrv.stop()

    asyncio.run(main())
