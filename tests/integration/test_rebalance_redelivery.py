"""Redelivery on a rebalance stays within what was in flight, and offsets never go backwards.

When a queue moves between members of a group, the old owner stops pulling, drops what it
prefetched, lets its running listener calls end, commits, and only then lets the new owner
read the offset to start from. So a join or a leave redelivers at most what was being consumed
on the moved queues (at most one pull batch per queue while the listener keeps up), not the
thousand messages a consumer may hold per queue.

A `pocketmq up` process serves an 8-queue topic filled before the consumers start
(CONSUME_FROM_FIRST_OFFSET, a listener taking about 5 ms a call). Three shapes: a second
consumer process joins a draining group; two consumers start together in one process; a third
joins while one of two leaves. Meanwhile a sampler reads the group's committed offset of every
queue over and over: no sample may be lower than an earlier one, nor above a message that had
not been consumed when it was taken.

POCKETMQ_REDELIVERY_JOIN_MESSAGES (default 20,000) sizes the first shape; the others send 3,000.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import (
    ConsumeFromWhere,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
)
from pocketmq.testing import async_wait_until
from pocketmq.testing.processes import ServerProcess

log = logging.getLogger(__name__)

JOIN_MESSAGES = int(os.environ.get("POCKETMQ_REDELIVERY_JOIN_MESSAGES", "20000"))
SMALL_MESSAGES = 3000
QUEUES = 8
PULL_BATCH = 32
"""The consumers' `pull_batch_size` (the default)."""
LISTENER_S = 0.005
CALL_BATCH = 4
SCRIPT = Path(__file__).parent / "scripts" / "rebalance_consumer.py"
DRAIN_TIMEOUT_S = 40.0
SAMPLE_EVERY_S = 0.02
WAIT_STEP_S = 0.02
SAMPLE_ROUNDS_MAX = 5000


@dataclass(frozen=True, slots=True)
class Delivery:
    queue_id: int
    offset: int
    at_ns: int
    """`time.monotonic_ns()` after the listener call (before its offset can be committed)."""
    msg_id: str


class Deliveries:
    """Every message handed to a listener, in this process or in consumer processes' files."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._here: list[Delivery] = []
        self._files: list[Path] = []

    def listener(self) -> Callable[[list[MessageExt]], None]:
        def listen(messages: list[MessageExt]) -> None:
            time.sleep(LISTENER_S)
            now = time.monotonic_ns()
            with self._lock:
                self._here.extend(
                    Delivery(m.queue.queue_id, m.queue_offset, now, m.msg_id) for m in messages
                )

        return listen

    def add_file(self, path: Path) -> None:
        self._files.append(path)

    def all(self) -> list[Delivery]:
        with self._lock:
            records = list(self._here)
        for path in self._files:
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                queue_id, offset, at_ns, msg_id = line.split()
                records.append(Delivery(int(queue_id), int(offset), int(at_ns), msg_id))
        return records

    def unique(self) -> int:
        return len({d.msg_id for d in self.all()})


@dataclass(frozen=True, slots=True)
class Sample:
    queue_id: int
    offset: int
    at_ns: int
    """`time.monotonic_ns()` once the broker's answer arrived."""


class OffsetSampler:
    """Reads the group's committed offset of every queue until stopped (bounded rounds)."""

    def __init__(self, admin: AdminClient, address: str, group: str, topic: str) -> None:
        self._admin = admin
        self._address = address
        self._group = group
        self._topic = topic
        self.samples: list[Sample] = []
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task

    async def _run(self) -> None:
        for _ in range(SAMPLE_ROUNDS_MAX):
            if self._stop.is_set():
                return
            for queue_id in range(QUEUES):
                offset = await self._admin.consumer_offset(
                    self._address, self._group, self._topic, queue_id
                )
                if offset is not None:
                    self.samples.append(Sample(queue_id, offset, time.monotonic_ns()))
            await asyncio.sleep(SAMPLE_EVERY_S)

    def problems(self, deliveries: list[Delivery]) -> list[str]:
        """Samples lower than an earlier one, or above a message not consumed by then."""
        first: dict[tuple[int, int], int] = {}
        for d in deliveries:
            key = (d.queue_id, d.offset)
            first[key] = min(first.get(key, d.at_ns), d.at_ns)
        found = []
        last: dict[int, Sample] = {}
        for sample in self.samples:
            before = last.get(sample.queue_id)
            if before is not None and sample.offset < before.offset:
                found.append(f"queue {sample.queue_id} went back from {before.offset} to {sample}")
            last[sample.queue_id] = sample
            for offset in range(before.offset if before else 0, sample.offset):
                consumed = first.get((sample.queue_id, offset))
                if consumed is None or consumed > sample.at_ns:
                    found.append(f"queue {sample.queue_id}: {sample} skips unconsumed {offset}")
                    break
        return found


@dataclass(slots=True)
class Setup:
    namesrv: str
    broker: str
    topic: str
    group: str
    admin: AdminClient


async def _prepare(namesrv: str, name: str, messages: int, admin: AdminClient) -> Setup:
    topic, group = f"Redelivery{name}", f"redelivery-{name.lower()}"
    await admin.create_topic(
        TopicSettings(topic, read_queue_nums=QUEUES, write_queue_nums=QUEUES),
        cluster="DefaultCluster",
    )
    assert await admin.wait_for_route(topic)
    route = await admin.topic_route(topic)
    broker = route.broker_datas[0].broker_addrs[0]
    async with Producer(f"{group}-producer", namesrv=namesrv) as producer:
        window = asyncio.Semaphore(256)

        async def send(i: int) -> None:
            async with window:
                await producer.send(Message(topic, b"%08d" % i + b"x" * 92))

        await asyncio.gather(*(send(i) for i in range(messages)))
    return Setup(namesrv, broker, topic, group, admin)


def _consumer(setup: Setup, name: str, deliveries: Deliveries) -> PushConsumer:
    consumer = PushConsumer(
        setup.group,
        namesrv=setup.namesrv,
        instance_name=name,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_batch_max_size=CALL_BATCH,
        persist_interval_s=0.5,
    )
    consumer.subscribe(setup.topic)
    consumer.register_listener(deliveries.listener())
    return consumer


def _held(consumer: PushConsumer, setup: Setup) -> int:
    return sum(1 for q in consumer.assigned_queues if q.topic == setup.topic)


def _duplicates(deliveries: Deliveries) -> int:
    counts = Counter(d.msg_id for d in deliveries.all())
    return sum(n - 1 for n in counts.values())


def _report(shape: str, setup: Setup, sent: int, deliveries: Deliveries) -> int:
    duplicates = _duplicates(deliveries)
    log.info("redelivery, %s: %d sent, %d redelivered", shape, sent, duplicates)
    assert deliveries.unique() == sent
    return duplicates


def _start_process(setup: Setup, directory: Path, name: str) -> subprocess.Popen[str]:
    output = directory / f"{name}.deliveries"
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), setup.namesrv, setup.group, setup.topic, str(output), name],
        stdout=subprocess.PIPE,
        stderr=open(directory / f"{name}.log", "w"),  # noqa: SIM115 - the child owns it
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # until started (or the child died)
    assert line.strip() == "ready", (directory / f"{name}.log").read_text()[-2000:]
    return process


def test_a_second_consumer_joining_a_draining_group(
    pocketmq_process_cluster: ServerProcess, tmp_path: Path
) -> None:
    namesrv = pocketmq_process_cluster.address
    deliveries = Deliveries()
    deliveries.add_file(tmp_path / "c2.deliveries")

    async def run() -> int:
        async with AdminClient([namesrv]) as admin:
            setup = await _prepare(namesrv, "Join", JOIN_MESSAGES, admin)
            sampler = OffsetSampler(admin, setup.broker, setup.group, setup.topic)
            process: subprocess.Popen[str] | None = None
            async with _consumer(setup, "c1", deliveries) as first:
                sampler.start()
                try:
                    await async_wait_until(
                        lambda: deliveries.unique() >= JOIN_MESSAGES // 10,
                        "a tenth consumed",
                        timeout_s=20,
                        poll_s=WAIT_STEP_S,
                    )
                    process = await asyncio.to_thread(_start_process, setup, tmp_path, "c2")
                    await async_wait_until(
                        lambda: _held(first, setup) == QUEUES // 2,
                        "the rebalance",
                        timeout_s=10,
                        poll_s=WAIT_STEP_S,
                    )
                    assert deliveries.unique() < JOIN_MESSAGES, "drained before the join"
                    await async_wait_until(
                        lambda: deliveries.unique() >= JOIN_MESSAGES,
                        "the drain",
                        timeout_s=DRAIN_TIMEOUT_S,
                        poll_s=WAIT_STEP_S,
                    )
                finally:
                    if process is not None:
                        process.send_signal(signal.SIGTERM)
                        await asyncio.to_thread(process.wait, 30)
                    await sampler.stop()
            assert not (problems := sampler.problems(deliveries.all())), problems[:10]
            assert len(sampler.samples) > QUEUES
            return _report("second process joins", setup, JOIN_MESSAGES, deliveries)

    duplicates = asyncio.run(run())
    assert duplicates <= QUEUES // 2 * PULL_BATCH


def test_two_consumers_started_together(
    pocketmq_process_cluster: ServerProcess, tmp_path: Path
) -> None:
    namesrv = pocketmq_process_cluster.address
    deliveries = Deliveries()

    async def run() -> int:
        async with AdminClient([namesrv]) as admin:
            setup = await _prepare(namesrv, "Together", SMALL_MESSAGES, admin)
            sampler = OffsetSampler(admin, setup.broker, setup.group, setup.topic)
            first = _consumer(setup, "c1", deliveries)
            second = _consumer(setup, "c2", deliveries)
            sampler.start()
            try:
                await asyncio.gather(first.start(), second.start())
                await async_wait_until(
                    lambda: deliveries.unique() >= SMALL_MESSAGES,
                    "the drain",
                    timeout_s=DRAIN_TIMEOUT_S,
                    poll_s=WAIT_STEP_S,
                )
            finally:
                await asyncio.gather(first.close(), second.close())
                await sampler.stop()
            assert not (problems := sampler.problems(deliveries.all())), problems[:10]
            return _report("two start together", setup, SMALL_MESSAGES, deliveries)

    duplicates = asyncio.run(run())
    assert duplicates <= QUEUES * PULL_BATCH


def test_a_third_consumer_joining_while_one_leaves(
    pocketmq_process_cluster: ServerProcess, tmp_path: Path
) -> None:
    namesrv = pocketmq_process_cluster.address
    deliveries = Deliveries()

    async def run() -> int:
        async with AdminClient([namesrv]) as admin:
            setup = await _prepare(namesrv, "Churn", SMALL_MESSAGES, admin)
            sampler = OffsetSampler(admin, setup.broker, setup.group, setup.topic)
            first = _consumer(setup, "c1", deliveries)
            second = _consumer(setup, "c2", deliveries)
            third = _consumer(setup, "c3", deliveries)
            await first.start()
            sampler.start()
            try:
                await second.start()
                await async_wait_until(
                    lambda: _held(first, setup) == _held(second, setup) == QUEUES // 2,
                    "two members sharing the queues",
                    timeout_s=10,
                    poll_s=WAIT_STEP_S,
                )
                await asyncio.gather(third.start(), first.close())
                await async_wait_until(
                    lambda: deliveries.unique() >= SMALL_MESSAGES,
                    "the drain",
                    timeout_s=DRAIN_TIMEOUT_S,
                    poll_s=WAIT_STEP_S,
                )
            finally:
                await asyncio.gather(first.close(), second.close(), third.close())
                await sampler.stop()
            assert not (problems := sampler.problems(deliveries.all())), problems[:10]
            return _report("a third joins while one leaves", setup, SMALL_MESSAGES, deliveries)

    duplicates = asyncio.run(run())
    assert duplicates <= QUEUES * PULL_BATCH
