"""Rebalance under churn: consumers join and leave (gracefully and by SIGKILL) while messages
flow, and every acknowledged message is consumed at least once.

A `pocketmq up` process serves an 8-queue topic. Consumers are separate OS processes running
the blocking PushConsumer (scripts/churn_consumer.py), each appending received message ids to
its own file before acknowledging. One producer in this process sends 1 KiB messages at a
steady pace while consumers start, stop (SIGTERM: close and commit) and die (SIGKILL: no
commit, so their unfinished queues are redelivered). At the end the union of the files must
hold every id a send acknowledged; duplicates are counted and reported, not failed on.

POCKETMQ_CHURN_MESSAGES (default 50,000) sizes the run.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Message, Producer
from pocketmq.testing.processes import ServerProcess

log = logging.getLogger(__name__)

MESSAGES = int(os.environ.get("POCKETMQ_CHURN_MESSAGES", "50000"))
TOPIC = "ChurnTopic"
GROUP = "churn-group"
SCRIPT = Path(__file__).parent / "scripts" / "churn_consumer.py"
WINDOW = 256
DRAIN_TIMEOUT_S = 90.0
# (fraction of messages sent, action, consumer): the schedule of joins and leaves.
SCHEDULE = [
    (0.10, "start", "c2"),
    (0.20, "start", "c3"),
    (0.35, "term", "c1"),
    (0.50, "kill", "c2"),
    (0.60, "start", "c4"),
    (0.75, "term", "c3"),
    (0.85, "start", "c5"),
]


class ConsumerProcesses:
    """The consumer subprocesses, each with its output file."""

    def __init__(self, namesrv: str, directory: Path) -> None:
        self.namesrv = namesrv
        self.directory = directory
        self.running: dict[str, subprocess.Popen[str]] = {}
        self.finished: list[subprocess.Popen[str]] = []

    def start(self, name: str) -> None:
        process = subprocess.Popen(
            [
                sys.executable,
                str(SCRIPT),
                self.namesrv,
                GROUP,
                TOPIC,
                str(self.directory / f"{name}.ids"),
                name,
            ],
            stdout=subprocess.PIPE,
            stderr=open(self.directory / f"{name}.log", "w"),  # noqa: SIM115 - the child owns it
            text=True,
        )
        assert process.stdout is not None
        line = process.stdout.readline()  # blocks until started (or the child died)
        assert line.strip() == "ready", f"consumer {name} did not start: {self.log(name)}"
        self.running[name] = process

    def stop(self, name: str, sig: signal.Signals) -> None:
        process = self.running.pop(name)
        process.send_signal(sig)
        process.wait(timeout=40)
        self.finished.append(process)

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name, signal.SIGTERM)

    def kill_all(self) -> None:
        for process in [*self.running.values(), *self.finished]:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return path.read_text() if path.exists() else ""

    def received(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for path in self.directory.glob("*.ids"):
            counts.update(line for line in path.read_text().splitlines() if line)
        return counts


async def _produce(namesrv: str, consumers: ConsumerProcesses) -> set[str]:
    sent: set[str] = set()
    schedule = list(SCHEDULE)
    async with Producer("churn-producer", namesrv=namesrv) as producer:
        window = asyncio.Semaphore(WINDOW)

        async def send(i: int) -> None:
            async with window:
                result = await producer.send(Message(TOPIC, b"%08d" % i + b"x" * 1016))
                sent.add(result.msg_id)

        tasks = set()
        for i in range(MESSAGES):
            while schedule and i >= schedule[0][0] * MESSAGES:
                _, action, name = schedule.pop(0)
                log.info("churn at message %d: %s %s", i, action, name)
                if action == "start":
                    await asyncio.to_thread(consumers.start, name)
                else:
                    sig = signal.SIGTERM if action == "term" else signal.SIGKILL
                    await asyncio.to_thread(consumers.stop, name, sig)
            await window.acquire()  # a steady pace: at most WINDOW sends in flight
            window.release()
            task = asyncio.ensure_future(send(i))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await asyncio.gather(*tasks)
    return sent


def test_every_message_is_consumed_while_consumers_join_and_leave(
    pocketmq_process_cluster: ServerProcess, tmp_path: Path
) -> None:
    namesrv = pocketmq_process_cluster.address

    async def create_topic() -> None:
        async with AdminClient([namesrv]) as admin:
            await admin.create_topic(
                TopicSettings(TOPIC, read_queue_nums=8, write_queue_nums=8),
                cluster="DefaultCluster",
            )
            assert await admin.wait_for_route(TOPIC)

    asyncio.run(create_topic())
    consumers = ConsumerProcesses(namesrv, tmp_path)
    try:
        consumers.start("c1")
        sent = asyncio.run(_produce(namesrv, consumers))
        assert len(sent) == MESSAGES
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        received = consumers.received()
        while time.monotonic() < deadline and not sent <= received.keys():
            time.sleep(0.5)
            received = consumers.received()
        consumers.stop_all()
        received = consumers.received()
    finally:
        consumers.kill_all()
    missing = sent - received.keys()
    duplicates = sum(count - 1 for msg_id, count in received.items() if msg_id in sent)
    log.info(
        "churn: %d sent, %d consumed, %d redelivered, %d missing",
        len(sent),
        len(sent & received.keys()),
        duplicates,
        len(missing),
    )
    assert not missing, (
        f"{len(missing)} of {len(sent)} acknowledged messages were never consumed "
        f"({duplicates} redeliveries); consumer logs: "
        + " | ".join(f"{n}: {consumers.log(n)[-500:]}" for n in ("c1", "c2", "c3", "c4", "c5"))
    )
