"""Orderly consumption keeps each sharding key's order while consumers come and go.

A `pocketmq up` process serves an 8-queue topic; producers send every key's messages in
sequence (each send waits for the previous one of its key; keys run concurrently); orderly
consumers of one group are added, closed and restarted mid-run. For every key, the first
delivery of each message must come after the first delivery of its predecessor: a redelivery
after a restart may repeat messages, but nothing ever overtakes an earlier message of its key.

POCKETMQ_ORDERLY_MESSAGES (default 100,000) and POCKETMQ_ORDERLY_KEYS (1,000) size the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass, field

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Message, MessageExt, Producer, PushConsumer
from pocketmq.testing.processes import ServerProcess

log = logging.getLogger(__name__)
MESSAGES = int(os.environ.get("POCKETMQ_ORDERLY_MESSAGES", "100000"))
KEYS = int(os.environ.get("POCKETMQ_ORDERLY_KEYS", "1000"))
TOPIC = "OrderlySteps"
GROUP = "orderly-group"


@dataclass
class Ledger:
    """What every consumer received, per key, in delivery order."""

    expected: int
    seen: dict[str, set[int]] = field(default_factory=dict)
    deliveries: int = 0
    distinct: int = 0
    overtakes: list[str] = field(default_factory=list)
    complete: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, consumer: str, messages: list[MessageExt]) -> None:
        for message in messages:
            key = message.keys[0]
            sequence = int(message.properties["seq"])
            seen = self.seen.setdefault(key, set())
            if sequence not in seen and sequence > 0 and sequence - 1 not in seen:
                self.overtakes.append(
                    f"{consumer}: {key} #{sequence} before #{sequence - 1} (queue "
                    f"{message.queue}, offset {message.queue_offset})"
                )
            if sequence not in seen:
                seen.add(sequence)
                self.distinct += 1
            self.deliveries += 1
        if self.distinct >= self.expected:
            self.complete.set()


def _consumer(namesrv: str, name: str, ledger: Ledger) -> PushConsumer:
    consumer = PushConsumer(
        GROUP,
        namesrv=namesrv,
        instance_name=name,  # its own client id; the consumer closes what it made
        orderly=True,
        consume_batch_max_size=8,
        lock_renew_interval_s=5.0,
    )
    consumer.subscribe(TOPIC)

    async def listener(messages: list[MessageExt]) -> None:
        ledger.record(name, messages)

    consumer.register_listener(listener)
    return consumer


async def _scenario(namesrv: str) -> Ledger:
    async with AdminClient([namesrv]) as admin:
        await admin.create_topic(
            TopicSettings(TOPIC, read_queue_nums=8, write_queue_nums=8), cluster="DefaultCluster"
        )
        assert await admin.wait_for_route(TOPIC)
    per_key = MESSAGES // KEYS
    ledger = Ledger(per_key * KEYS)
    consumers = {"c1": _consumer(namesrv, "c1", ledger)}
    await consumers["c1"].start()
    async with Producer("orderly-producer", namesrv=namesrv) as producer:

        async def send_key(key: int) -> None:
            for sequence in range(per_key):
                message = Message(TOPIC, b"step", keys=f"k{key}", properties={"seq": str(sequence)})
                await producer.send_orderly(message, f"k{key}")

        sending = asyncio.gather(*(send_key(k) for k in range(KEYS)))
        # Churn while the producers run: add a consumer, restart the first, add a third.
        for step, action in enumerate(["add c2", "restart c1", "add c3", "close c2"]):
            await asyncio.sleep(1.0 + step * 0.5)
            verb, name = action.split()
            if verb in ("restart", "close"):
                await consumers.pop(name).close()
            if verb in ("restart", "add"):
                consumers[name] = _consumer(namesrv, name, ledger)
                await consumers[name].start()
        await sending
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(ledger.complete.wait(), 90)
    for consumer in consumers.values():
        await consumer.close()
    return ledger


def test_per_key_order_survives_consumers_joining_and_restarting(
    pocketmq_process_cluster: ServerProcess,
) -> None:
    ledger = asyncio.run(_scenario(pocketmq_process_cluster.address))
    duplicates = ledger.deliveries - ledger.distinct
    log.info(
        "orderly: %d distinct of %d, %d redelivered", ledger.distinct, ledger.expected, duplicates
    )
    assert not ledger.overtakes, f"{len(ledger.overtakes)} overtakes, first: {ledger.overtakes[:5]}"
    assert ledger.distinct == ledger.expected, (
        f"lost {ledger.expected - ledger.distinct} messages ({duplicates} redelivered)"
    )
