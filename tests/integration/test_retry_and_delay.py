"""Delay levels, consumer send-back with growing delays, dead letters, and delayed messages
across a broker crash, with pocketmq's own clients against real brokers on 127.0.0.1.

Delays are measured with wall-clock timestamps the messages carry (born time from the producer,
store time from the broker, on the same machine), so bounds do not depend on test scheduling.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client.admin import AdminClient
from pocketmq.client.aio import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from pocketmq.testing import (
    MessageRecorder,
    ServerProcess,
    async_wait_until,
    started,
    wait_ports_free,
)
from pocketmq.testing.cluster import InProcessCluster, start_cluster

ServerFactory = Callable[..., ServerProcess]

# Level n waits LEVEL_S[n - 1] seconds: level 1 is 1 s, and retries (levels 3, 4, 5, ...)
# wait 1 s, 2 s, 3 s, ...
LEVEL_S = [1, 1, 1, 2, 3, *range(4, 17)]
LEVELS = " ".join(f"{s}s" for s in LEVEL_S)
# Time from due to the listener: a poll of the schedule (<= 0.1 s), a held pull woken at
# once, and slack for a loaded test machine.
LATE_S_MAX = 1.5


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessCluster]:
    started = start_cluster(tmp_path_factory.mktemp("store"), message_delay_level=LEVELS)
    try:
        yield started
    finally:
        started.stop()


def _consumer(
    namesrv: str, group: str, topic: str, listener: object, **options: object
) -> PushConsumer:
    consumer = PushConsumer(
        group,
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        **options,  # type: ignore[arg-type]
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)  # type: ignore[arg-type]
    return consumer


def test_a_delayed_message_arrives_after_its_delay_and_not_much_later(
    cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = cluster.namesrv_addr
        recorder = MessageRecorder()
        consumer = _consumer(namesrv, "g-delay", "Delayed", recorder)
        async with started(consumer):
            async with Producer("delay-producer", namesrv=namesrv) as producer:
                await producer.send(
                    Message("Delayed", b"later", tags="t", keys="k1", delay_level=1)
                )
            received_at, message = await recorder.wait_for_arrival(b"later", 10)
        born_s = message.born_timestamp_ms / 1000
        assert message.store_timestamp_ms - message.born_timestamp_ms >= 1000
        assert received_at - born_s < 1 + LATE_S_MAX
        assert message.body == b"later"
        assert message.topic == "Delayed"
        assert (message.tags, message.keys) == ("t", ["k1"])
        assert "DELAY" not in message.properties
        assert message.reconsume_times == 0

    asyncio.run(scenario())


def test_a_failing_listener_sees_each_retry_later_than_the_one_before(
    cluster: InProcessCluster,
) -> None:
    failures = 3

    async def scenario() -> None:
        namesrv = cluster.namesrv_addr
        deliveries: list[tuple[float, MessageExt]] = []
        succeeded = asyncio.Event()

        async def listener(messages: list[MessageExt]) -> ConsumeResult:
            deliveries.append((time.time(), messages[0]))
            if len(deliveries) <= failures:
                return ConsumeResult.RECONSUME_LATER
            succeeded.set()
            return ConsumeResult.SUCCESS

        consumer = _consumer(namesrv, "g-retry", "Retried", listener)
        async with started(consumer):
            async with Producer("retry-producer", namesrv=namesrv) as producer:
                sent = await producer.send(
                    Message("Retried", b"fails", keys="k1", properties={"p": "v"})
                )
            await asyncio.wait_for(succeeded.wait(), 18)
        assert [m.reconsume_times for _, m in deliveries] == list(range(failures + 1))
        for _, message in deliveries:
            assert message.topic == "Retried"
            assert message.msg_id == sent.msg_id
            assert (message.body, message.keys, message.properties["p"]) == (
                b"fails",
                ["k1"],
                "v",
            )
        gaps = [b - a for (a, _), (b, _) in itertools.pairwise(deliveries)]
        assert gaps == sorted(gaps), gaps
        # Retry n waits level 3 + n at least (1 s, 2 s, 3 s here), and not much more.
        for n, gap in enumerate(gaps):
            assert LEVEL_S[2 + n] - 0.05 <= gap < LEVEL_S[2 + n] + LATE_S_MAX, gaps

    asyncio.run(scenario())


def test_after_max_reconsume_times_the_message_is_a_dead_letter_with_its_properties(
    cluster: InProcessCluster,
) -> None:
    async def scenario() -> None:
        namesrv = cluster.namesrv_addr
        deliveries: list[MessageExt] = []

        async def always_fails(messages: list[MessageExt]) -> ConsumeResult:
            deliveries.extend(messages)
            return ConsumeResult.RECONSUME_LATER

        consumer = _consumer(namesrv, "g-dead", "Dead", always_fails, max_reconsume_times=2)
        await consumer.start()
        async with AdminClient([namesrv]) as admin:
            try:
                async with Producer("dead-producer", namesrv=namesrv) as producer:
                    sent = await producer.send(
                        Message("Dead", b"always fails", tags="t", keys="k", properties={"p": "v"})
                    )
                dead = await _first_message(admin, cluster.broker_addr, "%DLQ%g-dead", 15)
                retry_copies = await admin.max_offset(cluster.broker_addr, "%RETRY%g-dead", 0)
            finally:
                await consumer.close()
        assert [m.reconsume_times for m in deliveries] == [0, 1, 2]
        assert retry_copies == 2  # no third retry: the message is not delivered again
        assert dead.topic == "%DLQ%g-dead"
        assert dead.body == b"always fails"
        assert dead.reconsume_times == 3
        properties = dead.properties
        assert {k: properties.get(k) for k in ("p", "TAGS", "KEYS", "UNIQ_KEY", "RETRY_TOPIC")} == {
            "p": "v",
            "TAGS": "t",
            "KEYS": "k",
            "UNIQ_KEY": sent.msg_id,
            "RETRY_TOPIC": "Dead",
        }
        assert properties.get("ORIGIN_MESSAGE_ID")
        assert "DELAY" not in properties
        await _redrive_brings_it_back(namesrv)

    asyncio.run(scenario())


async def _first_message(admin: AdminClient, address: str, topic: str, timeout_s: float) -> Any:
    """The first message of queue 0 of `topic`, read with the admin client once it is there."""

    async def first() -> Any:
        if await admin.max_offset(address, topic, 0) > 0:
            batch = await admin.pull(address, topic, 0, 0, 1)
            if batch.messages:
                return batch.messages[0]
        return None

    return await async_wait_until(first, f"a message in {topic}", timeout_s=timeout_s, poll_s=0.1)


def _admin(namesrv: str, *args: str) -> Any:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


async def _redrive_brings_it_back(namesrv: str) -> None:
    listed = await asyncio.to_thread(_admin, namesrv, "queryDlqMessages", "-g", "g-dead")
    # A group that never dead-lettered anything has no DLQ topic: an empty list, no error.
    assert await asyncio.to_thread(_admin, namesrv, "queryDlqMessages", "-g", "g-fine") == []
    assert [(d["originTopic"], d["properties"]["p"]) for d in listed] == [("Dead", "v")]
    dry = await asyncio.to_thread(_admin, namesrv, "redriveDlqMessages", "-g", "g-dead", "--dryRun")
    assert [d["outcome"] for d in dry] == ["would resend"]
    returned: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()

    async def on_returned(messages: list[MessageExt]) -> None:
        if not returned.done():
            returned.set_result(messages[0])

    reader = _consumer(namesrv, "g-after-redrive", "Dead", on_returned)
    async with started(reader):
        first = await asyncio.wait_for(returned, 15)  # the original message, from the start
        assert first.body == b"always fails"
        returned = asyncio.get_running_loop().create_future()
        done = await asyncio.to_thread(
            _admin, namesrv, "redriveDlqMessages", "-g", "g-dead", "--rate", "10"
        )
        assert [d["outcome"] for d in done] == ["resent"]
        again = await asyncio.wait_for(returned, 15)
    assert again.body == b"always fails"
    assert again.properties["p"] == "v"
    assert again.properties["REDRIVEN_FROM"] == str(listed[0]["msgId"])


# -- across a crash -------------------------------------------------------------------------

RESTART_TOPIC = "DelayedAcrossCrash"


def _write_properties(path: Path, settings: dict[str, str]) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return str(path)


async def _stored_count(admin: AdminClient, address: str, topic: str) -> int:
    """Messages stored in `topic` on one broker: the sum of its queues' max offsets."""
    counts = [await admin.max_offset(address, topic, queue_id) for queue_id in range(8)]
    return sum(counts)


async def _wait_stored(admin: AdminClient, address: str, topic: str, count: int) -> None:
    async def stored() -> bool:
        return await _stored_count(admin, address, topic) >= count

    await async_wait_until(stored, f"{count} messages in {topic}", timeout_s=10, poll_s=0.02)


def test_a_delayed_message_pending_when_the_broker_is_killed_arrives_once(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    namesrv_config = _write_properties(
        tmp_path / "namesrv.properties", {"bindAddress": "127.0.0.1"}
    )
    namesrv = run_server("namesrv", "-c", namesrv_config, "--port", "0", name="namesrv").address
    broker_config = _write_properties(
        tmp_path / "broker.properties",
        {
            "bindAddress": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            # Level 1 is delivered before the crash, level 2 is pending across it.
            "messageDelayLevel": "1s 3s " + " ".join(["1s"] * 16),
        },
    )
    data_dir = str(tmp_path / "broker-store")
    broker_args = ("broker", "-c", broker_config, "--data-dir", data_dir, "-n", namesrv)
    broker = run_server(*broker_args, "--port", "0", name="broker")
    address = broker.address

    async def before_the_crash() -> None:
        async with Producer("crash-producer", namesrv=namesrv) as producer:
            await producer.send(Message(RESTART_TOPIC, b"early", delay_level=1))
            await producer.send(Message(RESTART_TOPIC, b"pending", delay_level=2))
        async with AdminClient([namesrv]) as admin:
            await _wait_stored(admin, address, RESTART_TOPIC, 1)

    asyncio.run(before_the_crash())
    broker.kill()
    wait_ports_free(broker.port, broker.port + 1)  # the listener's and the HA service's
    restarted = run_server(*broker_args, "--port", str(broker.port), name="broker")
    assert restarted.address == address

    async def after_the_restart() -> None:
        recorder = MessageRecorder()
        consumer = _consumer(namesrv, "g-crash", RESTART_TOPIC, recorder)
        async with started(consumer):
            await recorder.wait_for_body(b"pending", 15)
            await recorder.wait_for_bodies({b"early", b"pending"}, 5)
            async with AdminClient([namesrv]) as admin:
                stored = await _stored_count(admin, address, RESTART_TOPIC)
        assert stored == 2  # each delivered once into its topic, none twice
        assert sorted(recorder.bodies()) == [b"early", b"pending"]
        [late] = [m for m in recorder.messages if m.body == b"pending"]
        assert late.store_timestamp_ms - late.born_timestamp_ms >= 3000

    asyncio.run(after_the_restart())
