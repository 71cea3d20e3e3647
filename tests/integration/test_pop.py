"""POP consumption over remoting against a real broker: pop, ack, change of invisible time,
redelivery through the retry topic after the invisible time, orderly pops, long polling, and
what a bad or stale receipt handle is answered."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Producer
from pocketmq.client.message import Message
from pocketmq.client.pop import PopClient, PopError, PoppedMessage
from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import async_wait_until
from pocketmq.testing.cluster import InProcessCluster

GROUP = "pop-group"


async def _topic(cluster: InProcessCluster, topic: str, queues: int = 2) -> None:
    async with AdminClient([cluster.namesrv_addr]) as admin:
        await admin.create_topic(
            TopicSettings(topic, read_queue_nums=queues, write_queue_nums=queues),
            cluster="DefaultCluster",
        )
        assert await admin.wait_for_route(topic)


async def _send(cluster: InProcessCluster, topic: str, count: int, **send: object) -> list[str]:
    async with Producer("pop-producer", namesrv=cluster.namesrv_addr) as producer:
        ids = []
        for i in range(count):
            result = await producer.send(Message(topic, b"m%d" % i), **send)  # type: ignore[arg-type]
            ids.append(result.msg_id)
        return ids


def _ids(messages: list[PoppedMessage]) -> list[str]:
    return [m.message.properties["UNIQ_KEY"] for m in messages]


async def _drain(
    pop: PopClient, address: str, topic: str, **options: object
) -> list[PoppedMessage]:
    """Pops until a pop comes back empty (bounded)."""
    got: list[PoppedMessage] = []
    for _ in range(50):
        result = await pop.pop(address, topic, **options)  # type: ignore[arg-type]
        if not result.messages:
            return got
        got += result.messages
    raise AssertionError("the topic never ran dry")


def test_pop_ack_and_redelivery_after_the_invisible_time(
    pocketmq_cluster: InProcessCluster,
) -> None:
    address = pocketmq_cluster.broker_addr

    async def scenario() -> None:
        await _topic(pocketmq_cluster, "PopTopic")
        sent = await _send(pocketmq_cluster, "PopTopic", 10)
        client = RemotingClient()
        try:
            pop = PopClient(client, GROUP, broker_name="broker-a")
            first = await _drain(pop, address, "PopTopic", max_nums=4, invisible_ms=1500)
            assert sorted(_ids(first)) == sorted(sent)
            acked, kept = first[:6], first[6:]
            for message in acked:
                await pop.ack(address, "PopTopic", message.handle)
            # Acking twice is fine while the batch is in flight or the message is known acked.
            # The rest come back after their invisible time, through the retry topic, once.
            again: list[PoppedMessage] = []

            async def redelivered() -> bool:
                again.extend(
                    (await pop.pop(address, "PopTopic", max_nums=32, invisible_ms=60_000)).messages
                )
                return len(again) >= len(kept)

            await async_wait_until(redelivered, "the unacked messages come back", timeout_s=20)
            assert sorted(_ids(again)) == sorted(_ids(kept))
            assert all(m.message.topic == "PopTopic" for m in again)
            assert all(m.message.reconsume_times == 1 for m in again)
            for message in again:
                await pop.ack(address, "PopTopic", message.handle)
            # An ack of a handle whose message was revived is refused, with a reason.
            with pytest.raises(PopError) as refused:
                await pop.ack(address, "PopTopic", kept[0].handle)
            assert refused.value.code == ResponseCode.NO_MESSAGE
            assert "not in flight" in refused.value.remark
            assert not (await pop.pop(address, "PopTopic", invisible_ms=1000)).messages
        finally:
            await client.close()

    pocketmq_cluster.call(scenario(), timeout_s=60)


def test_change_invisible_time_and_bad_handles(pocketmq_cluster: InProcessCluster) -> None:
    address = pocketmq_cluster.broker_addr

    async def scenario() -> None:
        await _topic(pocketmq_cluster, "PopChange", queues=1)
        await _send(pocketmq_cluster, "PopChange", 2)
        client = RemotingClient()
        try:
            pop = PopClient(client, GROUP, broker_name="broker-a")
            got = (await pop.pop(address, "PopChange", max_nums=2, invisible_ms=60_000)).messages
            assert len(got) == 2
            # Back in 0 ms: the new handle is the one that counts, the old one is spent.
            new_handle = await pop.change_invisible_time(address, "PopChange", got[0].handle, 0)
            with pytest.raises(PopError) as spent:
                await pop.ack(address, "PopChange", got[0].handle)
            assert spent.value.code == ResponseCode.NO_MESSAGE

            async def back() -> list[PoppedMessage]:
                return (await pop.pop(address, "PopChange", invisible_ms=60_000)).messages

            returned = await async_wait_until(back, "the changed message comes back")
            assert _ids(returned) == _ids(got[:1])
            with pytest.raises(PopError):
                await pop.ack(address, "PopChange", new_handle)  # revived meanwhile
            await pop.ack(address, "PopChange", returned[0].handle)
            await pop.ack(address, "PopChange", got[1].handle)
            # A forged handle names nothing handed out; a malformed one does not parse.
            forged = got[1].handle.split(" ")
            forged[1] = str(int(forged[1]) + 1)
            with pytest.raises(PopError) as unknown:
                await pop.ack(address, "PopChange", " ".join(forged))
            assert unknown.value.code == ResponseCode.NO_MESSAGE
            with pytest.raises(PopError) as malformed:
                await pop.ack(address, "PopChange", "0 x 1 2 0 broker-a 0 0")
            assert malformed.value.code == ResponseCode.INVALID_PARAMETER
            assert not await back()
        finally:
            await client.close()

    pocketmq_cluster.call(scenario(), timeout_s=60)


def test_orderly_pop_blocks_the_queue_until_acked(pocketmq_cluster: InProcessCluster) -> None:
    address = pocketmq_cluster.broker_addr

    async def scenario() -> None:
        await _topic(pocketmq_cluster, "PopOrder", queues=1)
        sent = await _send(pocketmq_cluster, "PopOrder", 6)
        client = RemotingClient()
        try:
            pop = PopClient(client, GROUP, broker_name="broker-a")
            batch = (
                await pop.pop(address, "PopOrder", max_nums=3, invisible_ms=1500, order=True)
            ).messages
            assert _ids(batch) == sent[:3]
            # Blocked while the batch is in flight.
            blocked = await pop.pop(address, "PopOrder", max_nums=3, invisible_ms=1500, order=True)
            assert not blocked.messages
            await pop.ack(address, "PopOrder", batch[0].handle)

            # Not acked in time: the rest of the batch again, in order, counted as a retry.
            async def again() -> list[PoppedMessage]:
                result = await pop.pop(
                    address, "PopOrder", max_nums=3, invisible_ms=60_000, order=True
                )
                return result.messages

            redelivered = await async_wait_until(again, "the batch comes back", timeout_s=10)
            assert _ids(redelivered) == sent[1:4]
            for message in redelivered:
                await pop.ack(address, "PopOrder", message.handle)
            rest = await pop.pop(address, "PopOrder", max_nums=3, invisible_ms=60_000, order=True)
            assert _ids(rest.messages) == sent[4:]
        finally:
            await client.close()

    pocketmq_cluster.call(scenario(), timeout_s=60)


def test_a_long_polling_pop_wakes_when_a_message_arrives(
    pocketmq_cluster: InProcessCluster,
) -> None:
    address = pocketmq_cluster.broker_addr

    async def scenario() -> None:
        await _topic(pocketmq_cluster, "PopPoll")
        client = RemotingClient()
        try:
            pop = PopClient(client, GROUP, broker_name="broker-a")
            waiting = asyncio.create_task(
                pop.pop(address, "PopPoll", invisible_ms=60_000, poll_ms=15_000)
            )
            sent = await _send(pocketmq_cluster, "PopPoll", 1)
            result = await asyncio.wait_for(waiting, 10)
            assert _ids(result.messages) == sent
        finally:
            await client.close()

    pocketmq_cluster.call(scenario(), timeout_s=60)
