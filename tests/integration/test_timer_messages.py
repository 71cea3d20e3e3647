"""5.x timer messages end to end with pocketmq's own clients against real brokers on 127.0.0.1:
an arbitrary delivery time, the limit on it, recall, and a pending timer across a SIGKILL.

Lateness is measured against the wall clock the test and the broker share; a message is never
received before its delivery time, and with the default 1 s precision it is received at most a
precision step (plus a pull) after it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pocketmq import client as blocking
from pocketmq.client.admin import AdminClient
from pocketmq.client.aio import (
    ConsumeFromWhere,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
)
from pocketmq.client.errors import MessageError, RocketMQError
from pocketmq.testing import (
    MessageRecorder,
    ServerProcess,
    async_wait_until,
    started,
    wait_ports_free,
)
from pocketmq.testing.cluster import InProcessCluster, start_cluster

ServerFactory = Callable[..., ServerProcess]

# A slot ends at most one precision step (1 s) after the time asked for; the rest is a held
# pull woken at once, and slack for a loaded test machine.
LATE_S_MAX = 1.5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessCluster]:
    started = start_cluster(
        tmp_path_factory.mktemp("store"), recall_message_enable=True, timer_max_delay_sec=3600
    )
    try:
        yield started
    finally:
        started.stop()


async def _consuming(namesrv: str, group: str, topic: str, inbox: MessageRecorder) -> PushConsumer:
    """A started consumer that has received a first message of `topic` (so the topic exists
    and the consumer owns its queues before any timer fires)."""
    async with Producer(f"{group}-warm", namesrv=namesrv) as producer:
        await producer.send(Message(topic, b"warm-up"))
    consumer = PushConsumer(
        group, namesrv=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(topic)
    consumer.register_listener(inbox)
    await consumer.start()
    await inbox.wait_for_body(b"warm-up", 10)
    return consumer


def test_a_message_for_an_arbitrary_time_arrives_not_before_it_and_not_much_after(
    cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        inbox = MessageRecorder()
        consumer = await _consuming(cluster.namesrv_addr, "g-timer", "Timed", inbox)
        try:
            async with Producer("timer-producer", namesrv=cluster.namesrv_addr) as producer:
                deliver_ms = int(time.time() * 1000) + 2000 + 337  # not on a slot boundary
                sent = await producer.send(
                    Message("Timed", b"at-time", tags="t", keys="k", deliver_time_ms=deliver_ms)
                )
                before_relative_ms = time.time() * 1000  # the broker counts from its receipt
                relative = await producer.send(Message("Timed", b"relative", delay_ms=1500))
            arrived, message = await inbox.wait_for_arrival(b"at-time", 8)
            other_arrived, _ = await inbox.wait_for_arrival(b"relative", 8)
        finally:
            await consumer.close()
        assert sent.recall_handle is not None
        assert relative.recall_handle is not None
        assert arrived * 1000 >= deliver_ms
        assert message.store_timestamp_ms >= deliver_ms
        assert arrived - deliver_ms / 1000 < LATE_S_MAX
        assert other_arrived * 1000 >= before_relative_ms + 1500
        assert message.topic == "Timed"
        assert message.msg_id == sent.msg_id
        assert (message.tags, message.keys) == ("t", ["k"])
        assert message.properties["TIMER_DELIVER_MS"] == str(deliver_ms)
        assert "REAL_TOPIC" not in message.properties
        assert inbox.bodies().count(b"at-time") == 1

    asyncio.run(scenario())


def test_a_time_beyond_the_limit_is_refused_with_a_clear_error(
    cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        async with Producer("far-producer", namesrv=cluster.namesrv_addr) as producer:
            await producer.send(Message("TimedFar", b"create the topic"))
            far = int(time.time() * 1000) + 3600 * 1000 + 60_000
            with pytest.raises(MessageError) as refused:
                await producer.send(Message("TimedFar", b"too far", deliver_time_ms=far))
        text = str(refused.value)
        assert "MESSAGE_ILLEGAL" in text
        assert "beyond the broker's limit of 3600000 ms (timerMaxDelaySec=3600)" in text

    asyncio.run(scenario())


def test_a_recalled_message_is_not_delivered_and_its_slot_neighbour_is(
    cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        inbox = MessageRecorder()
        consumer = await _consuming(cluster.namesrv_addr, "g-recall", "Recalled", inbox)
        try:
            async with Producer("recall-producer", namesrv=cluster.namesrv_addr) as producer:
                deliver_ms = int(time.time() * 1000) + 2500
                doomed = await producer.send(
                    Message("Recalled", b"recalled", deliver_time_ms=deliver_ms)
                )
                await producer.send(Message("Recalled", b"kept", deliver_time_ms=deliver_ms))
                assert doomed.recall_handle is not None
                assert await producer.recall("Recalled", doomed.recall_handle) == doomed.msg_id
                with pytest.raises(RocketMQError, match="handle is for topic Recalled"):
                    await producer.recall("TimedFar", doomed.recall_handle)
                # Slots are delivered in time order, and a queue in store order: by the time a
                # message of a later slot in the recalled one's queue is consumed, the recalled
                # one would have been.
                after = Message("Recalled", b"next slot", deliver_time_ms=deliver_ms + 1000)
                await producer.send(after, queue=doomed.queue)
            await inbox.wait_for_body(b"kept", 8)  # the slot was delivered
            await inbox.wait_for_body(b"next slot", 8)
        finally:
            await consumer.close()
        assert b"recalled" not in inbox.bodies()

    asyncio.run(scenario())


def test_the_blocking_producer_sends_and_recalls_a_timer(cluster: InProcessCluster) -> None:
    with blocking.Producer("recall-blocking", namesrv=cluster.namesrv_addr) as producer:
        later = Message("RecalledBlocking", b"never", delay_ms=60_000)
        result = producer.send(later)
        assert result.recall_handle is not None
        assert producer.recall("RecalledBlocking", result.recall_handle) == result.msg_id
        with pytest.raises(MessageError, match="retry and dead-letter"):
            producer.recall("%RETRY%g", result.recall_handle)


# -- across a crash -------------------------------------------------------------------------


def _write_properties(path: Path, settings: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return str(path)


async def _stored(admin: AdminClient, address: str, topic: str) -> int:
    return sum([await admin.max_offset(address, topic, queue_id) for queue_id in range(8)])


def test_a_pending_timer_survives_a_broker_sigkill_and_arrives_once(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    namesrv_config = _write_properties(tmp_path / "ns.properties", {"bindAddress": "127.0.0.1"})
    namesrv = run_server("namesrv", "-c", namesrv_config, "--port", "0", name="namesrv").address
    broker_config = _write_properties(
        tmp_path / "broker.properties", {"bindAddress": "127.0.0.1", "brokerIP1": "127.0.0.1"}
    )
    data_dir = str(tmp_path / "broker-store")
    broker_args = ("broker", "-c", broker_config, "--data-dir", data_dir, "-n", namesrv)
    broker = run_server(*broker_args, "--port", "0", name="broker")
    address = broker.address
    topic = "TimedAcrossCrash"
    pending_ms = 0
    queue: MessageQueue | None = None  # all in one queue, delivered in order

    async def before_the_crash() -> None:
        nonlocal pending_ms, queue
        async with Producer("crash-producer", namesrv=namesrv) as producer:
            queue = (await producer.send(Message(topic, b"plain"))).queue
            now_ms = int(time.time() * 1000)
            early = Message(topic, b"early", deliver_time_ms=now_ms + 1000)
            await producer.send(early, queue=queue)
            pending_ms = now_ms + 4500
            await producer.send(Message(topic, b"pending", deliver_time_ms=pending_ms), queue=queue)
        async with AdminClient([namesrv]) as admin:

            async def early_delivered() -> bool:
                return await _stored(admin, address, topic) >= 2

            await async_wait_until(
                early_delivered, "the early timer delivered", timeout_s=10, poll_s=0.02
            )

    asyncio.run(before_the_crash())
    broker.kill()
    wait_ports_free(broker.port, broker.port + 1)  # the listener's and the HA service's
    restarted = run_server(*broker_args, "--port", str(broker.port), name="broker")
    assert restarted.address == address

    async def after_the_restart() -> None:
        inbox = MessageRecorder()
        consumer = PushConsumer(
            "g-crash",
            namesrv=namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic)
        consumer.register_listener(inbox)
        async with started(consumer):
            # A timer of a later slot in the same queue: once it is consumed, every earlier
            # slot has been stored and consumed, a timer delivered twice included.
            async with Producer("crash-producer", namesrv=namesrv) as producer:
                after = Message(topic, b"next slot", deliver_time_ms=pending_ms + 1000)
                await producer.send(after, queue=queue)
            arrived, message = await inbox.wait_for_arrival(b"pending", 12)
            await inbox.wait_for_body(b"early", 5)
            await inbox.wait_for_body(b"next slot", 5)
            async with AdminClient([namesrv]) as admin:
                stored = await _stored(admin, address, topic)
        assert stored == 4  # plain, early, pending and the next slot's: each stored once
        assert sorted(inbox.bodies()) == [b"early", b"next slot", b"pending", b"plain"]
        assert arrived * 1000 >= pending_ms
        assert message.store_timestamp_ms >= pending_ms

    asyncio.run(after_the_restart())
