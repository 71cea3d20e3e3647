"""POP under SIGKILL of the broker at random moments, with a consumer that pops and acks.

One `pocketmq up` process on fixed loopback ports is killed with SIGKILL and started again on
the same data `POCKETMQ_POP_CRASH_ROUNDS` times (20 by default) while a producer sends and the
consumer pops and acks (and leaves some messages unacked, to have them revived). Then the
consumer drains the topic.

What must hold: every message sent is acked in the end (nothing lost, the unacked ones came
back after their invisible time, across restarts), and no message is handed out by a pop sent
after an ack of that message was acknowledged (an acknowledged ack survives the crash).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Producer
from pocketmq.client.errors import RocketMQError
from pocketmq.client.message import Message
from pocketmq.client.pop import PopClient, PopError
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import async_wait_until, free_port_pair
from pocketmq.testing.processes import ServerProcess, start_server_process

pytestmark = [pytest.mark.fault]
log = logging.getLogger(__name__)

ROUNDS = int(os.environ.get("POCKETMQ_POP_CRASH_ROUNDS", "20"))
MESSAGES = 100
"""Sent before the first fault; more follow during the rounds."""
SEND_PAUSE_S = 0.01
TOPIC = "PopCrash"
GROUP = "pop-crash"
INVISIBLE_MS = 2_000
SKIP_ACK = 0.15
"""Share of popped messages the consumer does not ack: they must come back."""
DRAIN_TIMEOUT_S = 60.0


class Broker:
    """`pocketmq up` on fixed ports, killed and started again on the same data."""

    def __init__(self, data_dir: Path, logs: Path) -> None:
        self.data_dir = data_dir
        self.logs = logs
        self.namesrv_port = free_port_pair()
        self.broker_port = free_port_pair()
        self.starts = 0
        self.process: ServerProcess | None = None

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    def start(self) -> None:
        self.starts += 1
        self.process = start_server_process(
            [
                "up",
                *("--namesrv-port", str(self.namesrv_port)),
                *("--broker-port", str(self.broker_port)),
                *("--data-dir", str(self.data_dir)),
            ],
            self.logs / f"up-{self.starts}.log",
            timeout_s=60,
        )

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()


class Ledger:
    """What the consumer saw: each delivery with when its pop was sent, each acknowledged ack
    with when its answer came."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[str, float]] = []
        self.acked: dict[str, float] = {}

    def redelivered_after_ack(self) -> list[str]:
        return [
            msg_id
            for msg_id, pop_sent in self.deliveries
            if msg_id in self.acked and self.acked[msg_id] < pop_sent
        ]


async def consume(
    broker: Broker, ledger: Ledger, rng: random.Random, stop: asyncio.Event, *, skip: float
) -> None:
    client = RemotingClient()
    pop = PopClient(client, GROUP, broker_name="broker-a", timeout_s=3)
    try:
        while not stop.is_set():
            sent_at = time.monotonic()
            try:
                result = await pop.pop(
                    broker.broker_addr, TOPIC, max_nums=8, invisible_ms=INVISIBLE_MS, poll_ms=300
                )
            except (PopError, RemotingError, OSError):
                await asyncio.sleep(0.05)
                continue
            for popped in result.messages:
                msg_id = popped.message.properties["UNIQ_KEY"]
                ledger.deliveries.append((msg_id, sent_at))
                if rng.random() < skip:
                    continue
                try:
                    await pop.ack(broker.broker_addr, TOPIC, popped.handle)
                except (PopError, RemotingError, OSError):
                    continue
                ledger.acked.setdefault(msg_id, time.monotonic())
    finally:
        await client.close()


async def produce(broker: Broker, sent: list[str], stop: asyncio.Event) -> None:
    """Sends until stopped; `sent` gets the ids of the sends the broker acknowledged."""
    async with Producer("pop-crash-producer", namesrv=broker.namesrv_addr) as producer:
        while not stop.is_set():
            try:
                result = await producer.send(Message(TOPIC, b"m%d" % len(sent)))
            except (RocketMQError, RemotingError, OSError):
                await asyncio.sleep(0.05)
                continue
            sent.append(result.msg_id)
            await asyncio.sleep(SEND_PAUSE_S)


def test_acks_survive_sigkill_and_nothing_is_lost(tmp_path: Path) -> None:
    seed = int(os.environ.get("POCKETMQ_POP_CRASH_SEED", str(random.randrange(2**32))))
    log.info("seed %d, %d rounds", seed, ROUNDS)
    rng = random.Random(seed)
    broker = Broker(tmp_path / "data", tmp_path)
    broker.start()
    ledger = Ledger()

    async def scenario() -> list[str]:
        async with AdminClient([broker.namesrv_addr]) as admin:
            await admin.create_topic(
                TopicSettings(TOPIC, read_queue_nums=4, write_queue_nums=4),
                cluster="DefaultCluster",
            )
            assert await admin.wait_for_route(TOPIC)
        async with Producer("pop-crash-producer", namesrv=broker.namesrv_addr) as producer:
            sent = [
                (await producer.send(Message(TOPIC, b"first%d" % i))).msg_id
                for i in range(MESSAGES)
            ]
        stop = asyncio.Event()
        producing = asyncio.create_task(produce(broker, sent, stop))
        consumer = asyncio.create_task(consume(broker, ledger, rng, stop, skip=SKIP_ACK))
        for round_no in range(ROUNDS):
            await asyncio.sleep(rng.uniform(0.1, 1.2))
            broker.kill()
            await asyncio.to_thread(broker.start)
            log.info("round %d: %d sent, %d acked", round_no + 1, len(sent), len(ledger.acked))
        stop.set()
        await asyncio.gather(producing, consumer)
        # Drain without faults: everything unacked comes back once its invisible time ran out.
        stop = asyncio.Event()
        drain = asyncio.create_task(consume(broker, ledger, rng, stop, skip=0))
        with contextlib.suppress(AssertionError):  # reported below, with the seed
            await async_wait_until(
                lambda: not set(sent) - set(ledger.acked),
                "every message sent is acked",
                timeout_s=DRAIN_TIMEOUT_S,
            )
        stop.set()
        await drain
        return sent

    try:
        sent = asyncio.run(scenario())
    finally:
        broker.kill()
    missing = set(sent) - set(ledger.acked)
    assert not missing, f"{len(missing)} messages never came back (seed {seed})"
    again = ledger.redelivered_after_ack()
    assert not again, f"delivered after an acknowledged ack: {again[:5]} (seed {seed})"
    assert len(ledger.deliveries) > len(sent)  # some were revived
