"""`pocketmq bench consumer`: consume load from a cluster, like RocketMQ's benchmark Consumer.

A push consumer of `--topic` counts what it receives for `--count` messages or `--duration`
seconds (a new group from now on, or from the first offset with `--fromFirst`; a group with
committed offsets from those). One line per
second: consume TPS, average and max end-to-end latency (B2C: from the message's born time, set
by the producer as it sends) and store-to-consume (S2C); a summary with p50/p99/p99.9 at the
end, or as JSON with `--json`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from typing import Any

from pocketmq.bench.latency import LatencyHistogram
from pocketmq.bench.report import every_second, latency_text, print_summary
from pocketmq.client.aio import ConsumeFromWhere, MessageExt, PushConsumer
from pocketmq.runtime.event_loop import run as run_loop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namesrvAddr", default=os.environ.get("NAMESRV_ADDR"))
    parser.add_argument("-t", "--topic", default="BenchmarkTest", help="(BenchmarkTest)")
    parser.add_argument("-g", "--group", default=None, help="(benchmark_consumer_<pid>)")
    parser.add_argument("-q", "--count", type=int, default=0, help="messages, 0: by duration")
    parser.add_argument("-d", "--duration", type=float, default=10.0, help="seconds (10)")
    parser.add_argument("--fromFirst", action="store_true", help="start at the first offset")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


class Counter:
    """What arrived, per interval and in total."""

    def __init__(self) -> None:
        self.total_b2c = LatencyHistogram()
        self.interval_b2c = LatencyHistogram()
        self.interval_s2c = LatencyHistogram()
        self.received = 0
        self.interval_received = 0
        self.done = asyncio.Event()
        self.limit = 0

    async def listener(self, messages: list[MessageExt]) -> None:
        now_ms = time.time() * 1000
        for message in messages:
            b2c_us = max(0.0, now_ms - message.born_timestamp_ms) * 1000
            self.total_b2c.record(b2c_us)
            self.interval_b2c.record(b2c_us)
            self.interval_s2c.record(max(0.0, now_ms - message.store_timestamp_ms) * 1000)
        self.received += len(messages)
        self.interval_received += len(messages)
        if self.limit and self.received >= self.limit:
            self.done.set()

    def line(self, seconds: float) -> str:
        text = (
            f"{time.strftime('%H:%M:%S')} | Consume TPS: {self.interval_received / seconds:,.0f}"
            f" | Average(B2C) RT(ms): {self.interval_b2c.mean_us / 1000:.3f}"
            f" | Average(S2C) RT(ms): {self.interval_s2c.mean_us / 1000:.3f}"
            f" | MAX(B2C) RT(ms): {self.interval_b2c.max_us / 1000:.3f}"
            f" | MAX(S2C) RT(ms): {self.interval_s2c.max_us / 1000:.3f}"
        )
        self.interval_b2c.reset()
        self.interval_s2c.reset()
        self.interval_received = 0
        return text


async def run(args: argparse.Namespace, out: Any = sys.stdout) -> dict[str, Any]:
    """One consumer run; returns the summary (also printed unless `--json`)."""
    if not args.namesrvAddr:
        raise SystemExit("pocketmq bench consumer: give the NameServer with -n host:port")
    counter = Counter()
    counter.limit = args.count
    consumer = PushConsumer(
        args.group or f"benchmark_consumer_{os.getpid()}",
        namesrv=args.namesrvAddr,
        # A new group reads from now on (not the backlog a young topic would give it), or
        # everything with --fromFirst.
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        if args.fromFirst
        else ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
        consume_timestamp_ms=int(time.time() * 1000),
        consume_batch_max_size=32,
    )
    consumer.subscribe(args.topic)
    consumer.register_listener(counter.listener)

    async with consumer:
        started = time.monotonic()
        async with every_second(lambda: counter.line(1.0), out, quiet=args.json):
            timeout = None if args.count else args.duration
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(counter.done.wait(), timeout)
        elapsed = time.monotonic() - started
    summary: dict[str, Any] = {
        "messages": counter.received,
        "seconds": round(elapsed, 3),
        "msgs_per_s": round(counter.received / elapsed, 1) if elapsed else 0.0,
        "end_to_end": counter.total_b2c.summary(),
    }
    text = (
        f"{counter.received:,} consumed in {elapsed:.2f} s, {summary['msgs_per_s']:,.0f} msgs/s"
        f" | end-to-end(ms) {latency_text(summary['end_to_end'])}"
    )
    print_summary(summary, text, out, as_json=args.json)
    return summary


def run_from_args(args: argparse.Namespace) -> int:
    run_loop(run(args))
    return 0
