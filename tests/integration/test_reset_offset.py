"""Offset resets by time (INVOKE_BROKER_TO_RESET_OFFSET, 222) and consumer status (223) against
a real `pocketmq up`: the broker commits the offsets at the time, as RocketMQ 5's server-side
reset does, and a running push or lite-pull consumer told of it (220) reads the messages again.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter

from pocketmq.cli import admin_groups
from pocketmq.client.admin import AdminClient, SubscriptionGroupSettings, TopicSettings
from pocketmq.client.admin.offset_resets import reset_by_time_old
from pocketmq.client.consumer.lite_pull import LitePullConsumer
from pocketmq.client.consumer.offset_reset import decode_reset_offsets
from pocketmq.client.consumer.push import PushConsumer
from pocketmq.client.message import Message, MessageExt
from pocketmq.client.producer.producer import Producer
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.consumer_modes import ConsumeFromWhere
from pocketmq.common.fastjson import parse_fastjson_any_keys
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess, async_wait_until, started

TOPIC = "ResetTopic"
GROUP = "ResetGroup"
PULL_GROUP = "ResetPullGroup"
IDLE_GROUP = "ResetIdleGroup"
COUNT = 6


def _reset(group: str, timestamp_ms: int, **extra: str) -> RemotingCommand:
    fields = {"topic": TOPIC, "group": group, "timestamp": str(timestamp_ms), "isForce": "true"}
    return RemotingCommand.request(
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**fields, "offset": "-1", **extra}
    )


def _offsets(response: RemotingCommand) -> dict[int, int]:
    assert response.code == ResponseCode.SUCCESS, response.remark
    return {q.queue_id: o for q, o in decode_reset_offsets(response.body).items()}


async def _prepare(admin: AdminClient, producer: Producer) -> tuple[str, int]:
    """The topic with COUNT messages and the groups; returns the broker and a time before."""
    await admin.create_topic(
        TopicSettings(TOPIC, read_queue_nums=2, write_queue_nums=2), cluster="DefaultCluster"
    )
    for group in (GROUP, PULL_GROUP, IDLE_GROUP):
        await admin.update_subscription_group(
            SubscriptionGroupSettings(group_name=group), cluster="DefaultCluster"
        )
    assert await admin.wait_for_route(TOPIC)
    (address,) = await admin.broker_addresses("DefaultCluster")
    before_ms = int(time.time() * 1000) - 1000
    for i in range(COUNT):
        await producer.send(Message(TOPIC, f"m{i}".encode()))
    return address, before_ms


async def _check_push_consumer_rewinds(
    namesrv: str, broker: RemotingClient, address: str, before_ms: int
) -> None:
    seen: Counter[bytes] = Counter()

    def listener(messages: list[MessageExt]) -> None:
        seen.update(m.body for m in messages)

    consumer = PushConsumer(
        GROUP,
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        persist_interval_s=0.5,
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    async with started(consumer):
        await async_wait_until(lambda: len(seen) == COUNT, "every message consumed once")
        assert set(seen.values()) == {1}

        reset = _offsets(await broker.invoke(address, _reset(GROUP, before_ms), 5))
        assert reset == {0: 0, 1: 0}
        await async_wait_until(
            lambda: all(seen[f"m{i}".encode()] == 2 for i in range(COUNT)),
            "every message consumed again after the reset",
            describe=lambda: dict(seen),
        )

        status = await broker.invoke(
            address,
            RemotingCommand.request(
                RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": TOPIC, "group": GROUP}
            ),
            10,
        )
        assert status.code == ResponseCode.SUCCESS, status.remark
        table = parse_fastjson_any_keys(status.body)
        assert table["messageQueueTable"] == {}
        [(client_id, queues)] = table["consumerTable"].items()
        assert client_id == consumer.instance.client_id
        assert sorted(dict(key)["queueId"] for key in queues) == [0, 1]
        assert all(dict(key)["topic"] == TOPIC for key in queues)


async def _check_lite_pull_consumer_rewinds(
    namesrv: str, broker: RemotingClient, address: str, before_ms: int
) -> None:
    consumer = LitePullConsumer(
        PULL_GROUP, namesrv=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC)
    seen: Counter[bytes] = Counter()

    async def poll_until(count: int, what: str) -> None:
        async def enough() -> bool:
            seen.update(m.body for m in await consumer.poll(0.5))
            return sum(seen.values()) >= count

        await async_wait_until(enough, what, describe=lambda: dict(seen))

    async with started(consumer):
        await poll_until(COUNT, "every message polled once")
        reset = _offsets(await broker.invoke(address, _reset(PULL_GROUP, before_ms), 5))
        assert reset == {0: 0, 1: 0}
        await poll_until(2 * COUNT, "every message polled again after the reset")
    assert set(seen.values()) == {2}, dict(seen)


async def _check_without_consumer(
    admin: AdminClient, broker: RemotingClient, address: str, before_ms: int
) -> None:
    # RocketMQ 5 resets on the broker whether or not a consumer is online.
    maxima = {q: await _max_offset(broker, address, q) for q in (0, 1)}
    assert sum(maxima.values()) == COUNT
    assert _offsets(await broker.invoke(address, _reset(IDLE_GROUP, -1), 5)) == maxima
    assert _offsets(await broker.invoke(address, _reset(IDLE_GROUP, before_ms), 5)) == {0: 0, 1: 0}
    for queue_id in (0, 1):
        assert await admin.consumer_offset(address, IDLE_GROUP, TOPIC, queue_id) == 0
    one = _offsets(await broker.invoke(address, _reset(IDLE_GROUP, -1, queueId="1", offset="1"), 5))
    assert one == {1: 1}
    assert await admin.consumer_offset(address, IDLE_GROUP, TOPIC, 1) == 1

    await _check_admin_commands(admin, before_ms, maxima)
    answers = [
        await broker.invoke(address, request, 5)
        for request in (
            _reset("NoSuchGroup", -1),
            RemotingCommand.request(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                {"topic": "NoSuchTopic", "group": IDLE_GROUP, "timestamp": "-1", "isForce": "true"},
            ),
            _reset(IDLE_GROUP, -1, queueId="0", offset="999"),
            RemotingCommand.request(
                RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                {"topic": TOPIC, "group": IDLE_GROUP},
            ),
        )
    ]
    assert [(a.code, a.remark) for a in answers] == [
        (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "Group NoSuchGroup does not exist"),
        (ResponseCode.TOPIC_NOT_EXIST, "Topic NoSuchTopic does not exist"),
        (
            ResponseCode.SYSTEM_ERROR,
            f"Target offset 999 not in consume queue range [0-{maxima[0]}]",
        ),
        (
            ResponseCode.SYSTEM_ERROR,
            f"No Any Consumer online in the consumer group: [{IDLE_GROUP}]",
        ),
    ]


async def _check_admin_commands(admin: AdminClient, before_ms: int, maxima: dict[int, int]) -> None:
    args = argparse.Namespace(
        groupName=IDLE_GROUP, topic=TOPIC, timestamp=str(before_ms), force=False, cplus=False
    )
    report = await admin_groups.reset_offset_by_time(admin, args)
    assert report.lines[0] == (
        f"start reset consumer offset by specified, group[{IDLE_GROUP}], topic[{TOPIC}], "
        f"force[false], timestamp(string)[{before_ms}], timestamp(long)[{before_ms}]"
    )
    assert report.lines[1].split() == ["#brokerName", "#queueId", "#offset"]
    assert [line.split() for line in report.lines[2:]] == [
        ["broker-a", "0", "0"],
        ["broker-a", "1", "0"],
    ]
    report = await admin_groups.skip_accumulated_message(admin, args)
    assert [line.split() for line in report.lines[1:]] == [
        ["broker-a", str(q), str(o)] for q, o in sorted(maxima.items())
    ]
    # The old way mqadmin falls back to when a broker finds no consumer online.
    stats = await reset_by_time_old(admin, IDLE_GROUP, TOPIC, before_ms, force=False)
    assert [
        (s.queue.queue_id, s.broker_offset, s.consumer_offset, s.rollback_offset) for s in stats
    ] == [(q, o, o, 0) for q, o in sorted(maxima.items())]


async def _max_offset(broker: RemotingClient, address: str, queue_id: int) -> int:
    request = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": str(queue_id)}
    )
    return int((await broker.invoke(address, request, 5)).ext_fields["offset"])


def test_reset_offset_by_time(pocketmq_process_cluster: ServerProcess) -> None:
    namesrv = pocketmq_process_cluster.address

    async def scenario() -> None:
        admin = AdminClient([namesrv])
        broker = RemotingClient()
        producer = Producer("ResetProducers", namesrv=namesrv)
        try:
            async with started(producer):
                address, before_ms = await _prepare(admin, producer)
            await _check_without_consumer(admin, broker, address, before_ms)
            await _check_push_consumer_rewinds(namesrv, broker, address, before_ms)
            await _check_lite_pull_consumer_rewinds(namesrv, broker, address, before_ms)
        finally:
            await broker.close()
            await admin.close()

    asyncio.run(asyncio.wait_for(scenario(), 35))
