"""A transactional producer killed with SIGKILL in the middle of its local transaction.

The producer runs in a subprocess (this file, run as a script): it sends a half message, says so
on stdout, and blocks in `execute_local_transaction`. The test kills it there, so no
END_TRANSACTION is ever sent. A new producer of the same group, whose checker answers COMMIT,
is then asked by the broker's check-back and commits; the message reaches the consumer exactly
once, and not before the commit.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.transaction.half_messages import HALF_TOPIC, TRANSACTION_GROUP
from pocketmq.client.aio import (
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from pocketmq.testing import MessageRecorder, async_wait_until, started
from pocketmq.testing.cluster import InProcessCluster, start_cluster

pytestmark = [pytest.mark.fault]

TOPIC = "TxKilled"
GROUP = "pg-tx-killed"
BODY = b"survives its producer"
READY_TIMEOUT_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    started = start_cluster(
        tmp_path / "store", transaction_check_interval_ms=500, transaction_timeout_ms=1000
    )
    try:
        yield started
    finally:
        started.stop()


def start_doomed_producer(namesrv: str, log_path: Path) -> tuple[subprocess.Popen[str], str]:
    """Runs this file as a producer; returns it once its half is stored, with the half's id."""
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, __file__, namesrv, TOPIC, GROUP],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], READY_TIMEOUT_S)
    line = process.stdout.readline() if ready else ""
    parts = line.split()
    if len(parts) != 2 or parts[0] != "HALF":
        process.kill()
        process.wait(timeout=30)
        raise AssertionError(
            f"the producer did not report its half: {line!r}\n{log_path.read_text()}"
        )
    return process, parts[1]


class Checker:
    """The new member of the group: says COMMIT to every check-back and remembers them."""

    def __init__(self) -> None:
        self.checked: list[MessageExt] = []

    async def execute_local_transaction(self, message: Message, arg: object) -> Any:
        raise AssertionError("the new producer sends nothing")

    async def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
        self.checked.append(message)
        return LocalTransactionState.COMMIT_MESSAGE


def test_a_new_producer_of_the_group_commits_the_half_of_a_killed_one(
    cluster: InProcessCluster, tmp_path: Path
) -> None:
    namesrv = cluster.namesrv_addr
    received = MessageRecorder()

    async def checks_behind() -> int:
        async def behind() -> int:
            store = cluster.broker.store
            assert store is not None
            end = store.get_max_offset_in_queue(HALF_TOPIC, 0)
            return end - (cluster.broker.offsets.query(TRANSACTION_GROUP, HALF_TOPIC, 0) or 0)

        future = asyncio.run_coroutine_threadsafe(behind(), cluster.loop)
        return await asyncio.wrap_future(future)

    async def scenario() -> tuple[str, Checker]:
        consumer = PushConsumer(
            "g-tx-killed",
            namesrv=namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(TOPIC)
        consumer.register_listener(received)
        async with Producer("pg-warmup", namesrv=namesrv) as plain:
            await plain.send(Message(TOPIC, b"warm-up"))
        checker = Checker()
        async with started(consumer):
            await received.wait_for_body(b"warm-up")
            doomed, half_id = await asyncio.to_thread(
                start_doomed_producer, namesrv, tmp_path / "producer.log"
            )
            try:
                doomed.send_signal(signal.SIGKILL)
            finally:
                await asyncio.to_thread(doomed.wait, 30)
                if doomed.stdout is not None:
                    doomed.stdout.close()
            assert doomed.returncode == -signal.SIGKILL
            assert BODY not in received.bodies()
            async with TransactionProducer(
                GROUP, checker, namesrv=namesrv, check_topics=[TOPIC]
            ) as successor:
                assert successor.group == GROUP
                committed = await received.wait_for_body(BODY)

                # Once the check-back has passed every half, no second check can come.
                async def checks_settled() -> bool:
                    return await checks_behind() == 0

                await async_wait_until(checks_settled, "the check-back passed every half")
                assert await checks_behind() == 0
            assert committed.msg_id == half_id
        return half_id, checker

    half_id, checker = asyncio.run(scenario())
    assert [m.msg_id for m in checker.checked] == [half_id]
    assert checker.checked[0].topic == TOPIC
    assert checker.checked[0].body == BODY
    assert received.bodies().count(BODY) == 1


# -- the doomed producer (run as a script) -------------------------------------------------


def run_doomed_producer(namesrv: str, topic: str, group: str) -> None:
    """Sends one transactional message and blocks forever in its local transaction."""

    class Blocking:
        async def execute_local_transaction(self, message: Message, arg: object) -> Any:
            sys.stdout.write(f"HALF {message.properties['__transactionId__']}\n")
            sys.stdout.flush()
            await asyncio.Event().wait()  # the test kills the process here

        async def check_local_transaction(self, message: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

    async def run() -> None:
        async with TransactionProducer(group, Blocking(), namesrv=namesrv) as producer:
            await producer.send_in_transaction(Message(topic, BODY, keys="killed-1"))

    asyncio.run(run())


if __name__ == "__main__":
    run_doomed_producer(*sys.argv[1:4])
