"""How a broker takes a group's committed offsets: a pull's piggybacked commitOffset only moves
an offset forward, UPDATE_CONSUMER_OFFSET (a consumer's correction, an administrator's reset)
sets any value, and a consumer that registers is not told of its own arrival while the other
members are."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RemotingClient
from pocketmq.testing import async_wait_until, start_up_process
from pocketmq.testing.cluster import InProcessCluster

TOPIC = "CommitTopic"
GROUP = "commit-group"
FLAG_COMMIT_OFFSET = 0x1


def _pull(commit_offset: int) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": GROUP,
            "topic": TOPIC,
            "queueId": "0",
            "queueOffset": "0",
            "maxMsgNums": "1",
            "sysFlag": str(FLAG_COMMIT_OFFSET),
            "commitOffset": str(commit_offset),
            "suspendTimeoutMillis": "0",
            "subscription": "*",
            "subVersion": "0",
        },
    )


def _heartbeat(client_id: str) -> RemotingCommand:
    body = {
        "clientID": client_id,
        "producerDataSet": [],
        "consumerDataSet": [
            {
                "groupName": GROUP,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}],
            }
        ],
    }
    return RemotingCommand.request(RequestCode.HEART_BEAT, None, json.dumps(body).encode())


async def _create_topic(namesrv: str) -> None:
    async with AdminClient([namesrv]) as admin:
        await admin.create_topic(
            TopicSettings(TOPIC, read_queue_nums=1, write_queue_nums=1), cluster="DefaultCluster"
        )
        assert await admin.wait_for_route(TOPIC)


def test_a_pull_commit_never_moves_an_offset_back(pocketmq_cluster: InProcessCluster) -> None:
    address = pocketmq_cluster.broker_addr

    async def scenario() -> list[int]:
        await _create_topic(pocketmq_cluster.namesrv_addr)
        seen = []
        async with AdminClient([pocketmq_cluster.namesrv_addr]) as admin:
            client = RemotingClient()
            try:

                async def committed() -> int:
                    offset = await admin.consumer_offset(address, GROUP, TOPIC, 0)
                    assert offset is not None
                    return offset

                await admin.update_consumer_offset(address, GROUP, TOPIC, 0, 100)
                for commit in (50, 120, 80):
                    response = await client.invoke(address, _pull(commit), 5)
                    assert response.code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.SUCCESS)
                    seen.append(await committed())
                await admin.update_consumer_offset(address, GROUP, TOPIC, 0, 10)  # a reset
                seen.append(await committed())
                await client.invoke(address, _pull(30), 5)
                seen.append(await committed())
            finally:
                await client.close()
        return seen

    assert asyncio.run(scenario()) == [100, 120, 120, 10, 30]


def test_every_member_the_newcomer_included_is_told_of_a_change(
    pocketmq_cluster: InProcessCluster,
) -> None:
    """As RocketMQ's broker does: a consumer whose first rebalance ran before its heartbeat
    registered it would otherwise wait for its next periodic rebalance (20 s)."""
    address = pocketmq_cluster.broker_addr

    async def scenario() -> dict[str, list[str]]:
        await _create_topic(pocketmq_cluster.namesrv_addr)
        notices: dict[str, list[str]] = {"first": [], "second": []}
        phase = "first joins"

        def on_notify(name: str) -> Any:
            async def handle(request: RemotingCommand, channel: Channel) -> None:
                notices[name].append(phase)

            return {RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: handle}

        async def told(first: int, second: int) -> None:
            await async_wait_until(
                lambda: (len(notices["first"]), len(notices["second"])) == (first, second),
                timeout_s=5,
                what=f"{first} and {second} notices",
            )

        first, second = RemotingClient(on_notify("first")), RemotingClient(on_notify("second"))
        try:
            ok = ResponseCode.SUCCESS
            assert (await first.invoke(address, _heartbeat("10.0.0.1@first"), 5)).code == ok
            await told(1, 0)
            phase = "second joins"
            assert (await second.invoke(address, _heartbeat("10.0.0.2@second"), 5)).code == ok
            await told(2, 1)
            phase = "first leaves"
            leave = RemotingCommand.request(
                RequestCode.UNREGISTER_CLIENT,
                {"clientID": "10.0.0.1@first", "consumerGroup": GROUP},
            )
            assert (await first.invoke(address, leave, 5)).code == ok
            await told(2, 2)
        finally:
            await first.close()
            await second.close()
        return notices

    notices = asyncio.run(scenario())
    assert notices == {
        "first": ["first joins", "second joins"],
        "second": ["second joins", "first leaves"],
    }


def test_an_acknowledged_offset_commit_survives_a_broker_kill(tmp_path: Path) -> None:
    """RocketMQ saves offsets every flushConsumerOffsetInterval (5 s) and loses newer commits in
    a crash; pocketmq answers a commit that waits for its answer only once it is saved."""

    async def commit(namesrv: str) -> None:
        async with AdminClient([namesrv]) as admin:
            await admin.create_topic(
                TopicSettings(TOPIC, read_queue_nums=2, write_queue_nums=2),
                cluster="DefaultCluster",
            )
            assert await admin.wait_for_route(TOPIC, timeout_s=10)
            (address,) = await admin.broker_addresses("DefaultCluster")
            for queue_id, offset in ((0, 42), (1, 7)):
                await admin.update_consumer_offset(address, GROUP, TOPIC, queue_id, offset)

    async def committed(namesrv: str) -> list[int | None]:
        async with AdminClient([namesrv]) as admin:
            (address,) = await admin.broker_addresses("DefaultCluster")
            return [await admin.consumer_offset(address, GROUP, TOPIC, q) for q in (0, 1)]

    first = start_up_process(tmp_path / "data", tmp_path / "up-1.log")
    try:
        asyncio.run(commit(first.address))
    finally:
        first.kill()  # SIGKILL at once: long before the 5 s interval
    second = start_up_process(tmp_path / "data", tmp_path / "up-2.log")
    try:
        assert asyncio.run(committed(second.address)) == [42, 7]
    finally:
        second.stop()
