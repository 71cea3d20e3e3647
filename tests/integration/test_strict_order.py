"""A strictly ordered topic (created with `order=true`) keeps each key on its queue: while a
broker is down, keys of its queues fail to send instead of moving to another broker, where
they would overtake the messages still stored on the dead one; other keys carry on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Message, MessageQueue, Producer, select_by_hash
from pocketmq.client.errors import ConnectionFailedError
from pocketmq.testing.processes import ServerProcess

TOPIC = "StrictSteps"


def _broker(
    run_server: Callable[..., ServerProcess], tmp_path: Path, name: str, namesrv: str
) -> ServerProcess:
    properties = tmp_path / f"{name}.properties"
    properties.write_text(f"brokerName={name}\nbrokerClusterName=DefaultCluster\n")
    return run_server(
        "broker", "-c", str(properties), "--port", "0", "--data-dir", str(tmp_path / name),
        "-n", namesrv, name=name,
    )  # fmt: skip


def test_keys_of_a_dead_broker_fail_instead_of_moving(
    run_server: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    namesrv = run_server("namesrv", "--port", "0", name="namesrv").address
    _broker(run_server, tmp_path, "broker-a", namesrv)
    broker_b = _broker(run_server, tmp_path, "broker-b", namesrv)

    async def scenario() -> None:
        async with AdminClient([namesrv]) as admin:
            settings = TopicSettings(TOPIC, read_queue_nums=4, write_queue_nums=4, order=True)
            assert len(await admin.create_topic(settings, cluster="DefaultCluster")) == 2
            # As RocketMQ: each broker answers once the NameServers know its queues.
            route = await admin.topic_route(TOPIC)
            assert {d.broker_name for d in route.broker_datas} == {"broker-a", "broker-b"}
        async with Producer("strict-producer", namesrv=namesrv, send_timeout_s=2) as producer:
            queues = await producer.publish_queues(TOPIC)
            assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
            keys: dict[str, str] = {}  # broker name -> a key whose queue is on it
            for i in range(200):
                queue = select_by_hash(queues, Message(TOPIC, b""), f"order-{i}")
                keys.setdefault(queue.broker_name, f"order-{i}")
            before: dict[str, MessageQueue] = {}
            for broker, key in keys.items():
                before[broker] = (await producer.send_orderly(Message(TOPIC, b"1"), key)).queue

            broker_b.kill()
            for _ in range(100):  # the NameServer drops broker-b when its connection closes
                route = await producer.instance.fetch_route(TOPIC)
                if all(d.broker_name != "broker-b" for d in route.broker_datas):
                    break
                await asyncio.sleep(0.1)
            assert len(await producer.publish_queues(TOPIC)) == 8, "the order config keeps them"
            with pytest.raises(ConnectionFailedError, match="broker-b"):
                await producer.send_orderly(Message(TOPIC, b"2"), keys["broker-b"])
            after = (await producer.send_orderly(Message(TOPIC, b"2"), keys["broker-a"])).queue
            assert after == before["broker-a"]

    asyncio.run(scenario())
