"""How reading a backlog costs, for pocketmq and Apache RocketMQ: draining warm and cold data.

`python benchmarks/backlog.py [--depths 100000,1000000] [--plots DIR] [--out FILE]`

For each depth and server: a fresh server, a topic of 4 queues loaded with that many 1 KiB
messages (pocketmq's Python producer, batches of 500), a graceful stop, and a start on the
same store. "warm" drains at once; "cold" first drops the store's files from the page cache
(`fsync`, then `posix_fadvise(DONTNEED)` on every file, once before the start and once after
it, which leaves only the pages that recovery mapped: the last three CommitLog files, 64 MiB
each in both servers), so the other reads come from the disk. The group's offsets are
committed at 0 after the start, then one consumer drains the backlog: pocketmq's Python push
consumer against both servers (it speaks RocketMQ's protocol), pulls of 32, RocketMQ's
default, and counts every message. RocketMQ's benchmark Consumer would be the neutral tool,
but it prints a moving-average rate and no count, and the offsets it commits lag by a pull
per queue until its 5 s persist, so neither says when a backlog is drained. The table gives
the drain time and rate from the first message received; the PNG
(`docs/perf/scaling-backlog.png`, with matplotlib) plots the rate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent))

from tests.conformance.benchmark_tools import BenchmarkSettings, create_topic  # noqa: E402
from tests.conformance.reference import ApacheRocketMQ  # noqa: E402

from pocketmq.client.admin import (  # noqa: E402
    AdminClient,
    SubscriptionGroupSettings,
)
from pocketmq.client.aio import ConsumeFromWhere, Message, Producer, PushConsumer  # noqa: E402
from pocketmq.testing.processes import ServerProcess, start_up_process  # noqa: E402

ROCKETMQ_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC"]


SETTINGS = BenchmarkSettings(topic="Backlog", group="backlog", queues=4)
BATCH = 500
BODY = b"x" * 1024
STATES = ("warm", "cold")
COMMIT_LOG_FILE_BYTES = 64 * 1024 * 1024
"""The reference runs RocketMQ with 64 MiB CommitLog files; pocketmq gets the same. A start
after a clean stop reads the last three files (both servers, as RocketMQ's normal recovery):
with the 1 GiB default, that would warm 3 GiB again before the first read."""
SERVERS = ("pocketmq", "Apache RocketMQ 5.5.0")


@dataclass(frozen=True)
class Drain:
    seconds: float
    """From the first delivery seen to the last."""
    messages: int
    """Delivered in that time (the depth, less what the first look already found)."""

    @property
    def rate(self) -> float:
        return self.messages / self.seconds if self.seconds > 0 else float("nan")


class Restartable:
    """A server that can stop gracefully and start again on the same store."""

    def __init__(self, name: str, work: Path) -> None:
        self.name, self.work = name, work
        self._pocketmq: ServerProcess | None = None
        self._rocketmq = ApacheRocketMQ(work, jvm=ROCKETMQ_JVM) if name != "pocketmq" else None

    def start(self) -> str:
        if self._rocketmq is not None:
            self._rocketmq.start()
            return self._rocketmq.namesrv_addr
        config = self.work / "broker.properties"
        config.write_text(f"mappedFileSizeCommitLog={COMMIT_LOG_FILE_BYTES}\n")
        process = start_up_process(
            self.work / "data", self.work / "pocketmq.log", "--metrics-port", "0", "-c", str(config)
        )
        self._pocketmq = process
        return str(process.address)

    def stop(self) -> None:
        if self._rocketmq is not None:
            # SIGTERM, not the reference's kill: a clean stop, so that the next start recovers
            # as after any planned restart.
            for process in reversed(self._rocketmq.processes):
                process.terminate()
                process.wait(90)
            self._rocketmq.processes.clear()
        elif self._pocketmq is not None:
            self._pocketmq.stop()
            self._pocketmq = None

    def store(self) -> Path:
        return self.work / ("data" if self._rocketmq is None else "store")


def evict(folder: Path) -> None:
    """Writes back and drops every file under `folder` from the page cache; pages that a
    process maps stay."""
    for path in folder.rglob("*"):
        if not path.is_file():
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


async def load(namesrv: str, depth: int) -> None:
    await create_topic(namesrv, SETTINGS)
    async with Producer("backlog-loader", namesrv=namesrv) as producer:
        for start in range(0, depth, BATCH * 4):
            sizes = [min(BATCH, depth - at) for at in range(start, start + BATCH * 4, BATCH)]
            await asyncio.gather(
                *(
                    producer.send_batch([Message(SETTINGS.topic, BODY) for _ in range(size)])
                    for size in sizes
                    if size > 0
                )
            )


async def rewind(namesrv: str) -> None:
    """The group starts at offset 0 of every queue (the tool would start a new group at the
    end of a backlog that is not in memory)."""
    async with AdminClient([namesrv]) as admin:
        if not await admin.wait_for_route(SETTINGS.topic, timeout_s=30):
            raise RuntimeError(f"no route for {SETTINGS.topic} after the restart")
        await admin.update_subscription_group(
            SubscriptionGroupSettings(SETTINGS.group), cluster="DefaultCluster"
        )
        route = await admin.topic_route(SETTINGS.topic)
        for broker in route.broker_datas:
            address = broker.broker_addrs[0]
            for queue_id in range(SETTINGS.queues):
                await admin.update_consumer_offset(
                    address, SETTINGS.group, SETTINGS.topic, queue_id, 0
                )


async def drain(namesrv: str, depth: int) -> Drain:
    """Consumes the backlog from offset 0; the clock runs from the first message received (the
    consumer's start and rebalance stay outside it) to the last."""
    received = 0
    first: tuple[float, int] | None = None
    done = asyncio.Event()

    async def listener(messages: list[Any]) -> None:
        nonlocal received, first
        if first is None:
            first = (time.perf_counter(), len(messages))
        received += len(messages)
        if received >= depth:
            done.set()

    consumer = PushConsumer(
        SETTINGS.group,
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        consume_batch_max_size=32,
    )
    consumer.subscribe(SETTINGS.topic)
    consumer.register_listener(listener)
    async with consumer:
        await asyncio.wait_for(done.wait(), 120 + depth / 1000)
        assert first is not None
        return Drain(time.perf_counter() - first[0], received - first[1])


def measure(server: str, depth: int, state: str, work: Path) -> Drain:
    target = Restartable(server, work)
    namesrv = target.start()
    try:
        asyncio.run(load(namesrv, depth))
    finally:
        target.stop()
    if state == "cold":
        evict(target.store())
    namesrv = target.start()
    try:
        if state == "cold":
            evict(target.store())
        asyncio.run(rewind(namesrv))
        return asyncio.run(drain(namesrv, depth))
    finally:
        target.stop()


def table(points: dict[tuple[str, int, str], Drain], depths: list[int]) -> str:
    lines = [
        "| backlog, messages | data | server | drain s | drain msgs/s |",
        "| ---: | --- | --- | ---: | ---: |",
    ]
    for depth in depths:
        for state in STATES:
            for server in SERVERS:
                found = points.get((server, depth, state))
                if found is None:
                    lines.append(f"| {depth:,} | {state} | {server} | did not run | |")
                    continue
                lines.append(
                    f"| {depth:,} | {state} | {server} | {found.seconds:.1f} | {found.rate:,.0f} |"
                )
    return "\n".join(lines)


def plot(points: dict[tuple[str, int, str], Drain], depths: list[int], folder: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("matplotlib is not installed (the `peers` extra): no plot\n")
        return
    figure, axis = plt.subplots(figsize=(6, 4))
    for server in SERVERS:
        for state, style in zip(STATES, ("-", "--"), strict=True):
            xs = [d for d in depths if (server, d, state) in points]
            ys = [points[server, d, state].rate for d in xs]
            axis.plot(xs, ys, style, marker="o", label=f"{server}, {state}")
    axis.set_xscale("log")
    axis.set_xlabel("backlog, 1 KiB messages")
    axis.set_ylabel("drain, msgs/s")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.suptitle("Draining a backlog with RocketMQ's benchmark Consumer")
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    figure.savefig(folder / "scaling-backlog.png", dpi=100)
    plt.close(figure)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="100000,1000000")
    parser.add_argument("--servers", default="pocketmq,rocketmq")
    parser.add_argument("--plots", type=Path, default=HERE.parent / "docs" / "perf")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    chosen = {"pocketmq": SERVERS[0], "rocketmq": SERVERS[1]}
    servers = [chosen[s] for s in args.servers.split(",")]
    points: dict[tuple[str, int, str], Drain] = {}
    report: Callable[[str], int] = sys.stderr.write
    for depth in depths:
        for state in STATES:
            for server in servers:
                began = time.monotonic()
                try:
                    with tempfile.TemporaryDirectory(prefix="pocketmq-backlog-") as work:
                        got = measure(server, depth, state, Path(work))
                except Exception as exc:  # noqa: BLE001
                    # A point that cannot run is a gap in the table, not the end of the run.
                    report(f"{depth:,} {state}, {server}: failed: {str(exc).splitlines()[0]}\n")
                    continue
                points[server, depth, state] = got
                report(
                    f"{depth:,} {state}, {server}: drained at {got.rate:,.0f} msgs/s "
                    f"({got.seconds:.1f} s; the point took {time.monotonic() - began:.0f} s)\n"
                )
    text = table(points, depths)
    plot(points, depths, args.plots)
    sys.stdout.write(text + "\n")
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
