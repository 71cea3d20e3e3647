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

from pocketmq.broker.pop.service import PROPERTY_REVIVE_OF
from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Producer
from pocketmq.client.errors import RocketMQError
from pocketmq.client.message import Message
from pocketmq.client.pop import PopClient, PopError, PoppedMessage
from pocketmq.common.receipt_handle import RETRY_NONE
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


Stored = tuple[bool, int, int]
"""A stored message as a pop hands it out: (in the retry topic, queue id, queue offset)."""


def stored_of(popped: PoppedMessage) -> Stored:
    fields = popped.handle.split(" ")
    return fields[4] != RETRY_NONE, int(fields[6]), int(fields[7])


def revived_of(popped: PoppedMessage) -> Stored | None:
    """The stored message a retry copy was made from (its POP_REVIVE_OF property)."""
    text = popped.message.properties.get(PROPERTY_REVIVE_OF)
    if text is None:
        return None
    flag, queue_id, _start, _pop_time, queue_offset = text.split(" ")
    return flag != RETRY_NONE, int(queue_id), int(queue_offset)


class Ledger:
    """What the consumer saw: each delivery with when its pop was sent, each acknowledged ack
    with when its answer came.

    Deliveries are told apart by the stored message, not by the message id: a send retried
    after a kill lost its answer can store the same id twice (at-least-once sending), and each
    copy is owed its own ack."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[Stored, Stored | None, str, float]] = []
        self.acked: dict[Stored, float] = {}
        self.acked_ids: set[str] = set()

    def delivered(self, popped: PoppedMessage, pop_sent: float) -> None:
        msg_id = popped.message.properties["UNIQ_KEY"]
        self.deliveries.append((stored_of(popped), revived_of(popped), msg_id, pop_sent))

    def ack_acknowledged(self, popped: PoppedMessage) -> None:
        self.acked.setdefault(stored_of(popped), time.monotonic())
        self.acked_ids.add(popped.message.properties["UNIQ_KEY"])

    def unacked(self) -> set[Stored]:
        """Copies delivered and neither acked nor revived as a retry copy delivered since."""
        delivered = {stored for stored, _, _, _ in self.deliveries}
        revived = {revived for _, revived, _, _ in self.deliveries}
        return delivered - self.acked.keys() - revived

    def redelivered_after_ack(self) -> list[str]:
        """Messages handed out, as themselves or as a retry copy, by a pop sent after an ack of
        them was acknowledged."""
        return [
            f"{msg_id} {acked}"
            for stored, revived, msg_id, pop_sent in self.deliveries
            for acked in (stored, revived)
            if acked in self.acked and self.acked[acked] < pop_sent
        ]

    def stored_twice(self) -> int:
        """Ids stored more than once outside retry topics: sends retried after a kill."""
        copies: dict[str, set[Stored]] = {}
        for stored, revived, msg_id, _ in self.deliveries:
            if revived is None and not stored[0]:
                copies.setdefault(msg_id, set()).add(stored)
        return sum(1 for places in copies.values() if len(places) > 1)


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
                ledger.delivered(popped, sent_at)
                if rng.random() < skip:
                    continue
                try:
                    await pop.ack(broker.broker_addr, TOPIC, popped.handle)
                except (PopError, RemotingError, OSError):
                    continue
                ledger.ack_acknowledged(popped)
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
            log.info("round %d: %d sent, %d acked", round_no + 1, len(sent), len(ledger.acked_ids))
        stop.set()
        await asyncio.gather(producing, consumer)
        # Drain without faults: everything unacked comes back once its invisible time ran out.
        stop = asyncio.Event()
        drain = asyncio.create_task(consume(broker, ledger, rng, stop, skip=0))
        with contextlib.suppress(AssertionError):  # reported below, with the seed
            await async_wait_until(
                lambda: not set(sent) - ledger.acked_ids and not ledger.unacked(),
                "every message sent and every copy delivered is acked",
                timeout_s=DRAIN_TIMEOUT_S,
            )
        stop.set()
        await drain
        return sent

    try:
        sent = asyncio.run(scenario())
    finally:
        broker.kill()
    missing = set(sent) - ledger.acked_ids
    assert not missing, f"{len(missing)} messages never came back (seed {seed})"
    unacked = ledger.unacked()
    assert not unacked, f"{len(unacked)} delivered copies never acked (seed {seed})"
    log.info("%d ids stored twice by retried sends", ledger.stored_twice())
    again = ledger.redelivered_after_ack()
    assert not again, f"delivered after an acknowledged ack: {again[:5]} (seed {seed})"
    assert len(ledger.deliveries) > len(sent)  # some were revived
