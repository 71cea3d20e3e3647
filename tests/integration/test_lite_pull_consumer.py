"""The lite pull consumer against a real NameServer and broker on loopback.

Each scenario produces with the asyncio producer and polls with `LitePullConsumer`; every
wait is a bounded loop with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client.consumer.lite_pull import LitePullConsumer
from pocketmq.client.errors import ClientConfigError
from pocketmq.client.message import Message, MessageExt, MessageQueue, SendResult
from pocketmq.client.producer.producer import Producer
from pocketmq.common.consumer_modes import ConsumeFromWhere, MessageModel
from pocketmq.testing import async_wait_until
from pocketmq.testing.cluster import InProcessCluster

SCENARIO_TIMEOUT_S = 12.0
WAIT_S = 8.0  # every wait fits in a scenario's time limit
FROM_FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


def _run(scenario: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(scenario, SCENARIO_TIMEOUT_S))


async def _poll_until(
    consumer: LitePullConsumer, count: int, timeout_s: float = WAIT_S
) -> list[MessageExt]:
    """Polls until `count` messages came back; fails when they do not in time."""
    got: list[MessageExt] = []

    async def polled_enough() -> bool:
        batch = await consumer.poll(timeout_s=0.2)
        assert len(batch) <= consumer.poll_batch_max
        got.extend(batch)
        return len(got) >= count

    await async_wait_until(
        polled_enough,
        f"{count} messages polled",
        timeout_s=timeout_s,
        poll_s=0.001,
        describe=lambda: f"polled {len(got)}",
    )
    return got


async def _create_topic(producer: Producer, topic: str) -> SendResult:
    """Sends one message, which creates `topic` on the broker (autoCreateTopicEnable)."""
    return await producer.send(Message(topic, b"warm-up creates the topic"))


async def _other_queue(consumer: LitePullConsumer, topic: str, not_this: MessageQueue) -> Any:
    queues = await consumer.fetch_queues(topic)
    return next(q for q in queues if q != not_this)


def test_subscribe_polls_every_message_once_with_bodies_keys_and_tags_intact(
    pocketmq_cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        sent: dict[str, Message] = {}
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LiteIntact")
            consumer = LitePullConsumer(
                "g-intact", namesrv=namesrv, consume_from_where=FROM_FIRST, poll_batch_max=4
            )
            consumer.subscribe("LiteIntact")
            async with consumer:
                for i in range(20):
                    body = bytes([i]) * (10_000 if i % 5 == 0 else 100 + i)  # some compressed
                    message = Message(
                        "LiteIntact",
                        body,
                        tags=f"tag{i % 3}",
                        keys=[f"k{i}", f"order-{i}"],
                        properties={"n": str(i)},
                    )
                    sent[(await producer.send(message)).msg_id] = message
                got = await _poll_until(consumer, len(sent) + 1)
                got += await consumer.poll(timeout_s=0.3)  # a duplicate would be there by now
        ids = [m.msg_id for m in got]
        assert sorted(ids) == sorted([*sent, warm.msg_id])
        by_id = {m.msg_id: m for m in got}
        for msg_id, message in sent.items():
            received = by_id[msg_id]
            assert received.body == message.body
            assert received.tags == message.tags
            assert received.keys == message.keys
            assert received.user_properties == message.properties
            assert received.topic == "LiteIntact"
        offsets_by_queue: dict[MessageQueue, list[int]] = {}
        for m in got:
            offsets_by_queue.setdefault(m.queue, []).append(m.queue_offset)
        for offsets in offsets_by_queue.values():
            assert offsets == sorted(offsets)

    _run(scenario())


def test_seek_rereads_from_the_offset_and_never_returns_the_old_position(
    pocketmq_cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LiteSeek")
            consumer = LitePullConsumer(
                "g-seek", namesrv=namesrv, consume_from_where=FROM_FIRST, poll_batch_max=2
            )
            async with consumer:
                queue = await _other_queue(consumer, "LiteSeek", warm.queue)
                results = [
                    await producer.send(Message("LiteSeek", f"m{i}".encode()), queue=queue)
                    for i in range(10)
                ]
                offsets = [r.queue_offset for r in results]
                await consumer.assign([queue])
                assert consumer.assignment == [queue]
                first = await _poll_until(consumer, 2)
                assert [m.queue_offset for m in first] == offsets[:2]
                # The rest of the pulled batch is buffered now: the seek must drop it.
                await consumer.seek(queue, offsets[5])
                again = await _poll_until(consumer, 5)
                again += await consumer.poll(timeout_s=0.3)
                assert [m.queue_offset for m in again] == offsets[5:]
                assert [m.body for m in again] == [f"m{i}".encode() for i in range(5, 10)]

                await consumer.seek(queue, offsets[8])
                tail = await _poll_until(consumer, 2)
                assert [m.queue_offset for m in tail] == offsets[8:]

    _run(scenario())


def test_seek_to_begin_and_end(pocketmq_cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LiteEnds")
            consumer = LitePullConsumer("g-ends", namesrv=namesrv, consume_from_where=FROM_FIRST)
            async with consumer:
                queue = await _other_queue(consumer, "LiteEnds", warm.queue)
                for i in range(4):
                    await producer.send(Message("LiteEnds", f"m{i}".encode()), queue=queue)
                await consumer.assign([queue])
                first = await _poll_until(consumer, 4)

                await consumer.seek_to_begin(queue)
                again = await _poll_until(consumer, 4)
                assert [m.msg_id for m in again] == [m.msg_id for m in first]

                await consumer.seek_to_end(queue)
                assert await consumer.poll(timeout_s=0.3) == []
                new = await producer.send(Message("LiteEnds", b"after the end"), queue=queue)
                after = await _poll_until(consumer, 1)
                assert [m.msg_id for m in after] == [new.msg_id]

                with pytest.raises(ClientConfigError, match="out of range"):
                    await consumer.seek(queue, 99)
                with pytest.raises(ClientConfigError, match="not assigned"):
                    await consumer.seek(warm.queue, 0)

    _run(scenario())


def test_commit_lets_a_new_consumer_of_the_group_continue_after_the_committed_offset(
    pocketmq_cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            await _create_topic(producer, "LiteCommit")
            for i in range(8):
                await producer.send(Message("LiteCommit", f"old{i}".encode()))
            first = LitePullConsumer(
                "g-commit", namesrv=namesrv, consume_from_where=FROM_FIRST, auto_commit=False
            )
            first.subscribe("LiteCommit")
            async with first:
                old = await _poll_until(first, 9)
                queues = [q for q in first.assignment if q.topic == "LiteCommit"]
                assert len(queues) == 4
                for queue in queues:
                    assert await first.committed(queue) == -1  # no auto-commit
                await first.commit()
                expected = {q: 0 for q in queues}
                for m in old:
                    expected[m.queue] = max(expected[m.queue], m.queue_offset + 1)
                for queue in queues:
                    assert await first.committed(queue) == expected[queue]

            new_ids = {
                (await producer.send(Message("LiteCommit", f"new{i}".encode()))).msg_id
                for i in range(5)
            }
            second = LitePullConsumer("g-commit", namesrv=namesrv, consume_from_where=FROM_FIRST)
            second.subscribe("LiteCommit")
            async with second:
                got = await _poll_until(second, 5)
                got += await second.poll(timeout_s=0.3)
        assert sorted(m.msg_id for m in got) == sorted(new_ids)

    _run(scenario())


def test_close_commits_consumed_offsets_with_auto_commit(
    pocketmq_cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LiteAuto")
            consumer = LitePullConsumer(
                "g-auto", namesrv=namesrv, consume_from_where=FROM_FIRST, auto_commit_interval_s=60
            )
            async with consumer:
                await consumer.assign([warm.queue])
                got = await _poll_until(consumer, 1)
                assert [m.msg_id for m in got] == [warm.msg_id]
            checker = LitePullConsumer("g-auto", namesrv=namesrv, auto_commit=False)
            async with checker:
                assert await checker.committed(warm.queue) == warm.queue_offset + 1

    _run(scenario())


def test_two_consumers_of_a_group_split_the_queues(pocketmq_cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            await _create_topic(producer, "LiteSplit")
        first = LitePullConsumer("g-split", namesrv=namesrv)
        second = LitePullConsumer("g-split", namesrv=namesrv)
        for consumer in (first, second):
            consumer.subscribe("LiteSplit")
        async with first, second:
            assert first.instance.client_id != second.instance.client_id
            every = set(await first.fetch_queues("LiteSplit"))

            def split() -> tuple[set[MessageQueue], set[MessageQueue]] | None:
                mine = {q for q in first.assignment if q.topic == "LiteSplit"}
                theirs = {q for q in second.assignment if q.topic == "LiteSplit"}
                if mine and theirs and not mine & theirs and mine | theirs == every:
                    return mine, theirs
                return None

            mine, theirs = await async_wait_until(
                split, "the queues split between the two consumers", timeout_s=WAIT_S
            )
            assert mine, theirs
            assert theirs, mine
            assert not mine & theirs
            assert mine | theirs == every

    _run(scenario())


def test_poll_returns_an_empty_list_promptly_on_timeout(
    pocketmq_cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LiteQuiet")
        async with LitePullConsumer("g-quiet", namesrv=namesrv) as consumer:
            await consumer.assign(await consumer.fetch_queues("LiteQuiet"))
            await consumer.seek_to_end(warm.queue)
            started = time.monotonic()
            assert await consumer.poll(timeout_s=0.5) == []
            assert 0.4 <= time.monotonic() - started < 1.5
            started = time.monotonic()
            assert await consumer.poll(timeout_s=0) == []
            assert time.monotonic() - started < 0.2

    _run(scenario())


def test_assign_and_subscribe_cannot_be_mixed(pocketmq_cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        queue = MessageQueue("LiteMixed", "broker-a", 0)
        subscribed = LitePullConsumer("g-mixed-1", namesrv=namesrv)
        subscribed.subscribe("LiteMixed")
        with pytest.raises(ClientConfigError, match="cannot be mixed"):
            await subscribed.assign([queue])
        assigned = LitePullConsumer("g-mixed-2", namesrv=namesrv)
        await assigned.assign([queue])
        with pytest.raises(ClientConfigError, match="cannot be mixed"):
            assigned.subscribe("LiteMixed")
        with pytest.raises(ClientConfigError, match="not started"):
            await assigned.poll(timeout_s=0)

    _run(scenario())


def test_pause_holds_back_a_queue_until_resume(pocketmq_cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LitePause")
            consumer = LitePullConsumer("g-pause", namesrv=namesrv, consume_from_where=FROM_FIRST)
            async with consumer:
                queues = await consumer.fetch_queues("LitePause")
                await consumer.assign(queues)
                paused = queues[0]
                consumer.pause([paused])
                expected: dict[MessageQueue, set[str]] = {q: set() for q in queues}
                expected[warm.queue].add(warm.msg_id)
                for queue in queues:
                    for i in range(3):
                        message = Message("LitePause", f"{queue.queue_id}-{i}".encode())
                        expected[queue].add((await producer.send(message, queue=queue)).msg_id)
                others = sum(len(ids) for q, ids in expected.items() if q != paused)
                got = await _poll_until(consumer, others)
                got += await consumer.poll(timeout_s=0.5)  # the paused queue's would be here
                assert paused not in {m.queue for m in got}
                assert {m.msg_id for m in got} == set().union(
                    *(ids for q, ids in expected.items() if q != paused)
                )

                consumer.resume([paused])
                resumed = await _poll_until(consumer, len(expected[paused]))
                assert {m.msg_id for m in resumed} == expected[paused]

    _run(scenario())


def test_broadcasting_commit_writes_the_offset_file(
    pocketmq_cluster: InProcessCluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        async with Producer("p", namesrv=namesrv) as producer:
            warm = await _create_topic(producer, "LiteBroadcast")
        consumer = LitePullConsumer(
            "g-broadcast",
            namesrv=namesrv,
            message_model=MessageModel.BROADCASTING,
            consume_from_where=FROM_FIRST,
            auto_commit=False,
            offset_store_dir=tmp_path / "offsets",
        )
        consumer.subscribe("LiteBroadcast")
        async with consumer:
            assert len(consumer.assignment) == 4  # every queue, no retry topic
            got = await _poll_until(consumer, 1)
            assert [m.msg_id for m in got] == [warm.msg_id]
            await consumer.commit()
            assert await consumer.committed(warm.queue) == warm.queue_offset + 1
        (path,) = (tmp_path / "offsets").rglob("offsets.json")
        table = json.loads(path.read_text("utf-8"))["offsetTable"]
        key = json.dumps(
            {
                "brokerName": warm.queue.broker_name,
                "queueId": warm.queue.queue_id,
                "topic": "LiteBroadcast",
            },
            separators=(",", ":"),
        )
        assert table[key] == warm.queue_offset + 1

    _run(scenario())
