"""No acknowledged message lost when a master dies: Master/Slave replication under SIGKILL.

A master and a slave run as real processes. In each round, producers send at load, the master
is killed with SIGKILL at a random moment, and the slave is read at once: with SYNC_MASTER every
acknowledged message must be there with its exact bytes (read back by CommitLog offset), and a
push consumer keeps receiving from the slave while the master is away; then the master comes
back and the next round begins. With ASYNC_MASTER the acknowledged-but-not-yet-replicated window
at each kill is measured and printed, not hidden; nothing acknowledged is lost once the master
returns. At the end master and slave are compared byte for byte.

`POCKETMQ_HA_ROUNDS` sets the rounds (CI default 10); `POCKETMQ_HA_SEED` replays a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from dataclasses import dataclass, field

import pytest

from pocketmq.client.aio import (
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    RocketMQError,
    SendResult,
    SendStatus,
)
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.message_id import decode_offset_msg_id
from pocketmq.common.stored_message import decode_record
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from tests.integration.replication import BrokerGroup
from tests.integration.test_master_slave import commit_log_digest, wait_until_slaves_caught_up

pytestmark = [pytest.mark.fault]

ROUNDS = int(os.environ.get("POCKETMQ_HA_ROUNDS", "10"))
SEED = int(os.environ.get("POCKETMQ_HA_SEED", str(random.randrange(1 << 30))))
TOPIC = "Durable"
SENDERS = 4
WAIT_S = 30.0


@dataclass
class Ledger:
    """What the producers were told, and what the consumer received."""

    acked: dict[bytes, SendResult] = field(default_factory=dict)
    received: dict[bytes, MessageExt] = field(default_factory=dict)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def listener(self, messages: list[MessageExt]) -> None:
        for message in messages:
            self.received.setdefault(message.body, message)
        self.arrived.set()

    async def wait_received(self, bodies: set[bytes], timeout_s: float) -> set[bytes]:
        """Waits until every body arrived; returns those still missing after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while not bodies <= self.received.keys() and time.monotonic() < deadline:
            self.arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), deadline - time.monotonic())
        return bodies - self.received.keys()


async def produce(producer: Producer, ledger: Ledger, prefix: str, stop: asyncio.Event) -> None:
    """Sends unique bodies until `stop`; records every SEND_OK."""
    sequence = 0
    while not stop.is_set():
        body = f"{prefix}-{sequence}-".encode() + os.urandom(200).hex().encode()
        sequence += 1
        try:
            result = await producer.send(Message(TOPIC, body, keys=prefix))
        except RocketMQError:
            await asyncio.sleep(0.05)  # the master is gone: nothing was acknowledged
            continue
        if result.status is SendStatus.SEND_OK:
            ledger.acked[body] = result


async def read_on(address: str, results: list[SendResult]) -> dict[str, bytes | None]:
    """Each acknowledged message's body as stored at `address` (None when absent), by message
    id, read by its CommitLog offset."""
    client = RemotingClient()
    found: dict[str, bytes | None] = {}
    try:
        for result in results:
            _, offset = decode_offset_msg_id(result.offset_msg_id)
            request = RemotingCommand.request(
                RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}
            )
            response = await client.invoke(address, request, 5)
            if response.code != ResponseCode.SUCCESS:
                found[result.msg_id] = None
                continue
            found[result.msg_id] = decode_record(response.body).body
    finally:
        await client.close()
    return found


async def run_rounds(broker_group: BrokerGroup, *, sync: bool) -> list[tuple[int, int]]:
    """The rounds; returns (acknowledged, not on the slave at the kill) per round."""
    rng = random.Random(SEED)
    slave = broker_group.brokers["slave"]
    ledger = Ledger()
    windows: list[tuple[int, int]] = []
    consumer = PushConsumer(
        "durable-readers",
        namesrv=broker_group.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(ledger.listener)
    async with consumer:
        for round_no in range(ROUNDS):
            if broker_group.brokers["master"].process is None:
                await asyncio.to_thread(broker_group.start, "master")
            before = set(ledger.acked)
            stop = asyncio.Event()
            async with Producer(
                f"durable-{round_no}",
                namesrv=broker_group.namesrv_addr,
                send_timeout_s=2,
                retry_times=0,
            ) as producer:
                # The round starts once the (re)started master has its slave back.
                await producer.send(Message(TOPIC, b"warm-up"))
                await asyncio.to_thread(wait_until_slaves_caught_up, broker_group)
                senders = [
                    asyncio.create_task(produce(producer, ledger, f"r{round_no}s{i}", stop))
                    for i in range(SENDERS)
                ]
                await asyncio.sleep(rng.uniform(0.3, 2.0))
                await asyncio.to_thread(broker_group.kill, "master")
                stop.set()
                await asyncio.gather(*senders)
            new = {b: ledger.acked[b] for b in ledger.acked.keys() - before}
            on_slave = await read_on(slave.address, list(new.values()))
            missing = [r for r in new.values() if on_slave[r.msg_id] is None]
            windows.append((len(new), len(missing)))
            if sync:
                assert new, f"round {round_no}: nothing was acknowledged (seed {SEED})"
                assert not missing, (
                    f"round {round_no}: {len(missing)} of {len(new)} acknowledged messages are "
                    f"not on the slave; replay with POCKETMQ_HA_SEED={SEED}"
                )
                wrong = [body for body, r in new.items() if on_slave[r.msg_id] != body]
                assert not wrong, f"round {round_no}: bytes differ on the slave for {wrong[:3]}"
                # Consumers go on from the slave while the master is down.
                late = await ledger.wait_received(set(ledger.acked), WAIT_S)
                assert not late, f"round {round_no}: {len(late)} acknowledged not consumed"
        await asyncio.to_thread(broker_group.start, "master")
        lost = await ledger.wait_received(set(ledger.acked), WAIT_S)
        assert not lost, f"{len(lost)} acknowledged messages never consumed (seed {SEED})"
    for body, result in ledger.acked.items():
        assert ledger.received[body].msg_id == result.msg_id
    return windows


def settle_and_compare(broker_group: BrokerGroup) -> None:
    """Waits until the slave has the master's whole log, stops both, compares the bytes."""
    wait_until_slaves_caught_up(broker_group)
    broker_group.stop("master")
    broker_group.stop("slave")
    master = commit_log_digest(broker_group.brokers["master"].data_dir)
    assert master == commit_log_digest(broker_group.brokers["slave"].data_dir)


def test_sync_master_killed_repeatedly_loses_no_acknowledged_message(
    broker_group: BrokerGroup,
) -> None:
    print(f"POCKETMQ_HA_SEED={SEED} POCKETMQ_HA_ROUNDS={ROUNDS}")  # noqa: T201
    broker_group.add("master", "broker-a", 0, "SYNC_MASTER", flushDiskType="SYNC_FLUSH")
    broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("slave")
    windows = asyncio.run(run_rounds(broker_group, sync=True))
    print("acknowledged per round:", [n for n, _ in windows])  # noqa: T201
    settle_and_compare(broker_group)


def test_async_master_window_of_unreplicated_acknowledgements_is_measured(
    broker_group: BrokerGroup,
) -> None:
    print(f"POCKETMQ_HA_SEED={SEED} POCKETMQ_HA_ROUNDS={ROUNDS}")  # noqa: T201
    broker_group.add("master", "broker-a", 0, "ASYNC_MASTER")
    broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("slave")
    windows = asyncio.run(run_rounds(broker_group, sync=False))
    acked = sum(n for n, _ in windows)
    behind = sum(m for _, m in windows)
    # Reported, not asserted: ASYNC_MASTER acknowledges before the slave has the bytes.
    print(  # noqa: T201
        f"ASYNC_MASTER: {behind} of {acked} acknowledged messages were not on the slave when the"
        f" master was killed; per round (acked, not on slave): {windows}"
    )
    settle_and_compare(broker_group)
