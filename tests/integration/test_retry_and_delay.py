"""Delay levels, consumer send-back with growing delays, and the dead-letter queue."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pocketmq.client.aio import (
    ConsumeFromWhere,
    ConsumeResult,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from pocketmq.testing.cluster import start_cluster

# Short levels keep the test fast; level n waits n * 100 ms.
LEVELS = " ".join(f"{100 * n}ms" for n in range(1, 19))


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


def test_delay_retries_and_dead_letters(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "store", message_delay_level=LEVELS)
    try:

        async def scenario() -> None:
            namesrv = cluster.namesrv_addr
            async with Producer("delay-producer", namesrv=namesrv) as producer:
                sent_at = time.monotonic()
                await producer.send(Message("Delayed", b"later", delay_level=5))  # 500 ms
                await producer.send(Message("Retried", b"fails", keys="k1", properties={"p": "v"}))
                await producer.send(Message("Dead", b"always fails", properties={"p": "v"}))

            delayed = asyncio.get_running_loop().create_future()

            async def on_delayed(messages: list[MessageExt]) -> None:
                if not delayed.done():
                    delayed.set_result(time.monotonic() - sent_at)

            deliveries: list[tuple[float, int]] = []
            retried_ok = asyncio.Event()

            async def on_retried(messages: list[MessageExt]) -> ConsumeResult:
                deliveries.append((time.monotonic(), messages[0].reconsume_times))
                if len(deliveries) <= 3:
                    return ConsumeResult.RECONSUME_LATER
                assert messages[0].topic == "Retried"
                assert messages[0].keys == ["k1"]
                assert messages[0].properties["p"] == "v"
                retried_ok.set()
                return ConsumeResult.SUCCESS

            async def on_dead(messages: list[MessageExt]) -> ConsumeResult:
                return ConsumeResult.RECONSUME_LATER

            dead_letters: list[MessageExt] = []
            dead_arrived = asyncio.Event()

            async def on_dlq(messages: list[MessageExt]) -> None:
                dead_letters.extend(messages)
                dead_arrived.set()

            consumers = [
                _consumer(namesrv, "g-delay", "Delayed", on_delayed),
                _consumer(namesrv, "g-retry", "Retried", on_retried),
                _consumer(namesrv, "g-dead", "Dead", on_dead, max_reconsume_times=2),
            ]
            for consumer in consumers:
                await consumer.start()
            try:
                waited = await asyncio.wait_for(delayed, 10)
                assert 0.5 <= waited < 3.0, waited
                await asyncio.wait_for(retried_ok.wait(), 15)
                assert [r for _, r in deliveries] == [0, 1, 2, 3]
                gaps = [b - a for (a, _), (b, _) in itertools.pairwise(deliveries)]
                # Retry n waits at least level 3 + n (here (3 + n) * 100 ms): growing delays.
                for n, gap in enumerate(gaps):
                    assert gap >= (3 + n) * 0.1 - 0.02, gaps
                dlq = _consumer(namesrv, "g-dlq-reader", "%DLQ%g-dead", on_dlq)
                await dlq.start()  # its topic appears with the last failure; it waits for it
                consumers.append(dlq)
                await asyncio.wait_for(dead_arrived.wait(), 15)
                assert dead_letters[0].body == b"always fails"
                assert dead_letters[0].properties["p"] == "v"
                assert dead_letters[0].properties["RETRY_TOPIC"] == "Dead"
                assert dead_letters[0].reconsume_times == 3
                await _redrive_brings_it_back(namesrv, consumers)
            finally:
                for consumer in consumers:
                    await consumer.close()

        asyncio.run(scenario())
    finally:
        cluster.stop()


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


async def _redrive_brings_it_back(namesrv: str, consumers: list[PushConsumer]) -> None:
    listed = await asyncio.to_thread(_admin, namesrv, "queryDlqMessages", "-g", "g-dead")
    assert [(d["originTopic"], d["properties"]["p"]) for d in listed] == [("Dead", "v")]
    dry = await asyncio.to_thread(_admin, namesrv, "redriveDlqMessages", "-g", "g-dead", "--dryRun")
    assert [d["outcome"] for d in dry] == ["would resend"]
    returned = asyncio.get_running_loop().create_future()

    async def on_returned(messages: list[MessageExt]) -> None:
        if not returned.done():
            returned.set_result(messages[0])

    reader = _consumer(namesrv, "g-after-redrive", "Dead", on_returned)
    await reader.start()
    consumers.append(reader)
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
    assert again.properties["REDRIVEN_FROM"] == dead_id(listed[0])


def dead_id(document: dict[str, Any]) -> str:
    return str(document["msgId"])
