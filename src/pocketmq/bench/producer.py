"""`pocketmq bench producer`: send load against a cluster, like RocketMQ's benchmark Producer.

Keeps `--window` sends in flight (or paces them at `--rate` per second), of `--size`-byte
messages, singly or `--batch` at a time, for `--count` messages or `--duration` seconds. Prints
one line per second (send TPS, average and max RT, failures) and a summary with p50/p99/p99.9;
`--json` prints the summary as JSON instead of the lines.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from pocketmq.bench.latency import LatencyHistogram
from pocketmq.bench.report import every_second, latency_text, print_summary
from pocketmq.client.aio import Message, Producer
from pocketmq.client.errors import RocketMQError
from pocketmq.runtime.event_loop import run as run_loop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namesrvAddr", default=os.environ.get("NAMESRV_ADDR"))
    parser.add_argument("-t", "--topic", default="BenchmarkTest", help="(BenchmarkTest)")
    parser.add_argument("-s", "--messageSize", type=int, default=1024, help="bytes (1024)")
    parser.add_argument("-w", "--window", type=int, default=1000, help="sends in flight (1000)")
    parser.add_argument("-b", "--batch", type=int, default=1, help="messages per send (1)")
    parser.add_argument("-q", "--count", type=int, default=0, help="messages, 0: by duration")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds (10)")
    parser.add_argument("-r", "--rate", type=float, default=0.0, help="msgs/s, 0: as fast")
    parser.add_argument("-k", "--keyEnable", action="store_true", help="a key per message")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


@dataclass
class SendStats:
    """Counters of one run: per interval and in total."""

    interval: LatencyHistogram = field(default_factory=LatencyHistogram)
    total: LatencyHistogram = field(default_factory=LatencyHistogram)
    sent: int = 0
    interval_sent: int = 0
    failed: int = 0
    interval_failed: int = 0
    last_error: str = ""

    def ok(self, micros: float, messages: int) -> None:
        self.interval.record(micros)
        self.total.record(micros)
        self.sent += messages
        self.interval_sent += messages

    def failure(self, error: Exception) -> None:
        self.failed += 1
        self.interval_failed += 1
        self.last_error = str(error)

    def line(self, seconds: float) -> str:
        text = (
            f"{time.strftime('%H:%M:%S')} | Send TPS: {self.interval_sent / seconds:,.0f} | "
            f"Max RT(ms): {self.interval.max_us / 1000:.3f} | "
            f"Average RT(ms): {self.interval.mean_us / 1000:.3f} | "
            f"Send Failed: {self.interval_failed}"
        )
        if self.interval_failed:
            text += f" | last error: {self.last_error}"
        self.interval.reset()
        self.interval_sent = self.interval_failed = 0
        return text


async def run(args: argparse.Namespace, out: Any = sys.stdout) -> dict[str, Any]:
    """One producer run; returns the summary (also printed unless `--json`)."""
    if not args.namesrvAddr:
        raise SystemExit("pocketmq bench producer: give the NameServer with -n host:port")
    body = os.urandom(args.messageSize // 2 + 1).hex().encode()[: args.messageSize]
    stats = SendStats()
    limit = args.count or None
    deadline = None if limit else time.monotonic() + args.duration
    window = asyncio.Semaphore(max(1, args.window))
    interval_s = args.batch / args.rate if args.rate else 0.0
    async with Producer("benchmark_producer", namesrv=args.namesrvAddr) as producer:

        def messages(start: int) -> list[Message]:
            return [
                Message(args.topic, body, keys=f"key-{start + i}" if args.keyEnable else None)
                for i in range(args.batch)
            ]

        async def send_one(start: int) -> None:
            try:
                batch = messages(start)
                began = time.perf_counter()
                if len(batch) == 1:
                    await producer.send(batch[0])
                else:
                    await producer.send_batch(batch)
                stats.ok((time.perf_counter() - began) * 1e6, len(batch))
            except RocketMQError as exc:
                stats.failure(exc)
            finally:
                window.release()

        tasks: set[asyncio.Task[None]] = set()
        started = time.monotonic()
        next_at = started
        issued = 0
        async with every_second(lambda: stats.line(1.0), out, quiet=args.json):
            while (limit is None or issued < limit) and (
                deadline is None or time.monotonic() < deadline
            ):
                if interval_s:
                    next_at += interval_s
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await window.acquire()
                task = asyncio.create_task(send_one(issued))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                issued += args.batch
            if tasks:
                await asyncio.gather(*tasks)
        elapsed = time.monotonic() - started
    summary: dict[str, Any] = {
        "messages": stats.sent,
        "failed": stats.failed,
        "last_error": stats.last_error or None,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(stats.sent / elapsed, 1) if elapsed else 0.0,
        "message_size": args.messageSize,
        "batch": args.batch,
        "send_rt": stats.total.summary(),
    }
    text = (
        f"{stats.sent:,} sent, {stats.failed} failed in {elapsed:.2f} s, "
        f"{summary['msgs_per_s']:,.0f} msgs/s | RT(ms) {latency_text(summary['send_rt'])}"
    )
    print_summary(summary, text, out, as_json=args.json)
    return summary


def run_from_args(args: argparse.Namespace) -> int:
    summary = run_loop(run(args))
    return 1 if summary["failed"] and not summary["messages"] else 0
