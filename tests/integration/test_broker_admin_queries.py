"""The broker lookups of `broker/admin_queries.py` against a real `pocketmq up`.

Each request travels over a real socket from a `RemotingClient`, as mqadmin sends it; codes,
remarks and body shapes are Apache RocketMQ 5's (`AdminBrokerProcessor`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pocketmq.client.admin import AdminClient, SubscriptionGroupSettings, TopicSettings
from pocketmq.client.message import Message
from pocketmq.client.producer.producer import Producer
from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.common.fastjson import parse_fastjson_any_keys
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess, async_wait_until, started

TOPIC = "QueryTopic"
GROUP = "QueryGroup"
ONLINE_GROUP = "OnlineGroup"
PRODUCER_GROUP = "QueryProducers"


class Broker:
    """Requests to one broker over one real connection."""

    def __init__(self, remoting: RemotingClient, address: str) -> None:
        self.remoting = remoting
        self.address = address

    async def ask(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        return await self.remoting.invoke(
            self.address, RemotingCommand.request(code, ext or {}, body), 5
        )

    async def ok_json(self, code: int, ext: dict[str, str] | None = None) -> Any:
        response = await self.ask(code, ext)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return parse_fastjson_any_keys(response.body)


async def prepare(client: AdminClient, broker: Broker, producer: Producer) -> None:
    """Three tagged messages in queue 0, a committed offset of GROUP, and a consumer of
    ONLINE_GROUP announced by heartbeat."""
    await client.create_topic(TopicSettings(TOPIC, 2, 2), cluster="DefaultCluster")
    assert await client.wait_for_route(TOPIC)
    await client.update_subscription_group(SubscriptionGroupSettings(GROUP), broker=broker.address)
    queue = next(q for q in await producer.publish_queues(TOPIC) if q.queue_id == 0)
    for tag in ("TagA", "TagB", "TagA"):
        await producer.send(Message(TOPIC, tag.encode(), tags=tag), queue=queue)
    commit = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "1"}
    assert (await broker.ask(RequestCode.UPDATE_CONSUMER_OFFSET, commit)).code == 0
    heartbeat = {
        "clientID": "127.0.0.1@online",
        "producerDataSet": [],
        "consumerDataSet": [
            {
                "groupName": ONLINE_GROUP,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": TOPIC, "subString": "TagA"}],
            }
        ],
    }
    response = await broker.ask(RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode())
    assert response.code == ResponseCode.SUCCESS


async def check_topic_config(broker: Broker) -> None:
    config = await broker.ok_json(RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC})
    assert config == {
        "attributes": {},
        "order": False,
        "perm": 6,
        "readQueueNums": 2,
        "topicFilterType": "SINGLE_TAG",
        "topicName": TOPIC,
        "topicSysFlag": 0,
        "writeQueueNums": 2,
    }
    missing = await broker.ask(RequestCode.GET_TOPIC_CONFIG, {"topic": "NoSuchTopic"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
    assert missing.remark == "No topic in this broker. topic: NoSuchTopic"


async def check_producer_connections(broker: Broker) -> None:
    ask = {"producerGroup": PRODUCER_GROUP}
    # The producer's heartbeat follows its start; wait for it rather than assume it.
    await async_wait_until(
        lambda: _succeeds(broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, ask),
        "the producer's heartbeat",
    )
    connections = (await broker.ok_json(RequestCode.GET_PRODUCER_CONNECTION_LIST, ask))[
        "connectionSet"
    ]
    assert len(connections) == 1
    (connection,) = connections
    assert set(connection) == {"clientAddr", "clientId", "language", "version"}
    assert connection["language"] == LanguageCode.PYTHON.name
    assert connection["clientAddr"].startswith("127.0.0.1:")
    missing = await broker.ask(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "Nope"})
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark == "the producer group[Nope] not exist"


async def _succeeds(broker: Broker, code: int, ext: dict[str, str]) -> bool:
    return (await broker.ask(code, ext)).code == ResponseCode.SUCCESS


async def check_consumed_by(broker: Broker) -> None:
    groups = await broker.ok_json(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})
    assert sorted(groups["groupList"]) == [ONLINE_GROUP, GROUP]
    none = await broker.ok_json(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "NoSuchTopic"})
    assert none == {"groupList": []}


async def check_broker_consume_stats(broker: Broker) -> None:
    stats = await broker.ok_json(
        RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false", "timeoutMillis": "3000"}
    )
    assert stats["brokerAddr"] == broker.address
    assert stats["totalDiff"] == 2
    assert stats["totalInflightDiff"] == 0
    by_group = {name: value for entry in stats["consumeStatsList"] for name, value in entry.items()}
    (consume_stats,) = by_group[GROUP]
    assert consume_stats["consumeTps"] == 0.0
    rows = {dict(key)["queueId"]: row for key, row in consume_stats["offsetTable"].items()}
    assert (rows[0]["brokerOffset"], rows[0]["consumerOffset"]) == (3, 1)
    assert (rows[1]["brokerOffset"], rows[1]["consumerOffset"]) == (0, 0)
    ordered = await broker.ok_json(
        RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true", "timeoutMillis": "3000"}
    )
    assert all(v == [] for entry in ordered["consumeStatsList"] for v in entry.values())


async def check_consume_queue(broker: Broker) -> None:
    ask = {"topic": TOPIC, "queueId": "0", "index": "1", "count": "5"}
    body = await broker.ok_json(RequestCode.QUERY_CONSUME_QUEUE, {**ask, "consumerGroup": GROUP})
    assert (body["minQueueIndex"], body["maxQueueIndex"]) == (0, 3)
    assert body["filterData"] == f"{GROUP}@{TOPIC} is not online!"
    assert "subscriptionData" not in body
    entries = body["queueData"]
    assert [set(e) for e in entries] == [{"eval", "physicOffset", "physicSize", "tagsCode"}] * 2
    assert entries[0]["physicOffset"] < entries[1]["physicOffset"]
    assert [e["tagsCode"] for e in entries] == [_java_hash("TagB"), _java_hash("TagA")]

    online = await broker.ok_json(
        RequestCode.QUERY_CONSUME_QUEUE, {**ask, "consumerGroup": ONLINE_GROUP}
    )
    assert online["subscriptionData"]["subString"] == "TagA"
    assert online["subscriptionData"]["tagsSet"] == ["TagA"]

    beyond = await broker.ask(RequestCode.QUERY_CONSUME_QUEUE, {**ask, "index": "9"})
    assert beyond.code == ResponseCode.SUCCESS
    assert beyond.remark == f"Index 9 of 0@{TOPIC} is not exist!"
    assert beyond.body == b""
    unknown = await broker.ask(RequestCode.QUERY_CONSUME_QUEUE, {**ask, "topic": "NoSuchTopic"})
    assert unknown.code == ResponseCode.SYSTEM_ERROR
    assert unknown.remark == "0@NoSuchTopic is not exist!"
    bad = await broker.ask(RequestCode.QUERY_CONSUME_QUEUE, {**ask, "queueId": "x"})
    assert bad.code == ResponseCode.SYSTEM_ERROR


def _java_hash(text: str) -> int:
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


async def check_the_rest(broker: Broker) -> None:
    system = (await broker.ok_json(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))["topicList"]
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "DefaultCluster", "broker-a"} <= set(system)
    assert TOPIC not in system
    cleaned = await broker.ask(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
    assert cleaned.code == ResponseCode.SUCCESS
    pop = await broker.ask(RequestCode.SET_MESSAGE_REQUEST_MODE, body=b"{}")
    assert pop.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert pop.remark == "POP consumption is not supported yet"


def test_admin_queries_answer_like_rocketmq(pocketmq_process_cluster: ServerProcess) -> None:
    namesrv = pocketmq_process_cluster.address

    async def scenario() -> None:
        client = AdminClient([namesrv])
        remoting = RemotingClient()
        producer = Producer(PRODUCER_GROUP, namesrv=namesrv)
        try:
            (address,) = await client.broker_addresses("DefaultCluster")
            broker = Broker(remoting, address)
            async with started(producer):
                await prepare(client, broker, producer)
                await check_topic_config(broker)
                await check_producer_connections(broker)
                await check_consumed_by(broker)
                await check_broker_consume_stats(broker)
                await check_consume_queue(broker)
                await check_the_rest(broker)
        finally:
            await remoting.close()
            await client.close()

    asyncio.run(asyncio.wait_for(scenario(), 25))
