"""pocketmq's Python client next to the official C++ client, in one run against `pocketmq up`.

Starts `pocketmq up` on free loopback ports with data in a temporary directory, then measures
1 KiB messages (`--size`):

- C++ client (PyPI `rocketmq==0.4.4`, its own virtualenv, see docs/interop.md): sync sends one at
  a time, then a push consumer draining them (its wrapper has no reliable pipelined send);
- pocketmq's client, in a process of its own: sync sends one at a time (throughput and latency
  p50/p99/p99.9), pipelined sends (`send` with up to `--window` in flight), the automatic
  batcher (`auto_batch=True`), then a push consumer draining everything with an `async def`
  listener and one with a plain-function listener (thread pool).

`python benchmarks/client_bench.py [--messages N] [--size BYTES] [--window N] [--json]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop.conftest import Driver, ensure_cpp_client  # noqa: E402

from pocketmq.testing import start_server_process  # noqa: E402


def _percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * fraction))]


async def _ours(namesrv: str, messages: int, size: int, window: int) -> dict[str, Any]:
    from pocketmq.client.aio import ConsumeFromWhere, Message, Producer, PushConsumer

    body = b"x" * size
    figures: dict[str, Any] = {}
    async with Producer("bench-ours", namesrv=namesrv) as producer:
        await producer.send(Message("BenchOurs", body))  # route and connection warm-up
        latencies = []
        started = time.perf_counter()
        for _ in range(messages):
            sent_at = time.perf_counter()
            await producer.send(Message("BenchOurs", body))
            latencies.append(time.perf_counter() - sent_at)
        elapsed = time.perf_counter() - started
        latencies.sort()
        figures["sync_msgs_per_s"] = messages / elapsed
        for name, fraction in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
            figures[f"sync_{name}_us"] = _percentile(latencies, fraction) * 1e6
        slots = asyncio.Semaphore(window)

        async def send_one() -> None:
            async with slots:
                await producer.send(Message("BenchOurs", body))

        started = time.perf_counter()
        await asyncio.gather(*(send_one() for _ in range(messages)))
        figures["pipelined_msgs_per_s"] = messages / (time.perf_counter() - started)
    async with Producer("bench-ours-batched", namesrv=namesrv, auto_batch=True) as producer:
        started = time.perf_counter()
        await asyncio.gather(
            *[producer.send_async(Message("BenchOurs", body)) for _ in range(messages)]
        )
        figures["auto_batch_msgs_per_s"] = messages / (time.perf_counter() - started)
    stored = 3 * messages + 1

    async def drain(group: str, asynchronous: bool) -> float:
        count = 0
        done = asyncio.Event()
        loop = asyncio.get_running_loop()

        def note(n: int) -> None:
            nonlocal count
            count += n
            if count >= stored:
                done.set()

        async def on_messages_async(batch: list[Any]) -> None:
            note(len(batch))

        def on_messages(batch: list[Any]) -> None:
            loop.call_soon_threadsafe(note, len(batch))

        consumer = PushConsumer(
            group,
            namesrv=namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("BenchOurs")
        consumer.register_listener(on_messages_async if asynchronous else on_messages)
        started = time.perf_counter()
        async with consumer:
            await asyncio.wait_for(done.wait(), 600)
            return stored / (time.perf_counter() - started)

    figures["consume_async_msgs_per_s"] = await drain("bench-ours-async", True)
    figures["consume_threads_msgs_per_s"] = await drain("bench-ours-threads", False)
    return figures


def _cpp(python: Path, namesrv: str, messages: int, size: int, work: Path) -> dict[str, Any]:
    producer = Driver(
        python, "cpp_produce.py", [namesrv, "BenchCpp", str(messages), "--size", str(size)], work
    )
    sent = producer.finish(timeout_s=900)
    consumer = Driver(
        python,
        "cpp_push_consume.py",
        [namesrv, "CG_BENCH_CPP", "BenchCpp", str(messages), "900", "--summary-only"],
        work,
    )
    got = consumer.finish(timeout_s=900, stop=False)
    return {
        "sync_msgs_per_s": sent["sent"] / sent["seconds"],
        "consume_msgs_per_s": got["received"] / got["seconds"],
    }


def _table(cpp: dict[str, Any], ours: dict[str, Any], size: int, window: int) -> str:
    rows = [
        (
            "sync sends, one at a time",
            f"{cpp['sync_msgs_per_s']:,.0f}",
            f"{ours['sync_msgs_per_s']:,.0f}",
        ),
        (
            "sync send latency p50 / p99 / p99.9",
            f"{1e6 / cpp['sync_msgs_per_s']:,.0f} us (mean)",
            f"{ours['sync_p50_us']:,.0f} / {ours['sync_p99_us']:,.0f} / "
            f"{ours['sync_p999_us']:,.0f} us",
        ),
        (f"pipelined sends ({window} in flight)", "n/a", f"{ours['pipelined_msgs_per_s']:,.0f}"),
        ("automatic batching", "n/a", f"{ours['auto_batch_msgs_per_s']:,.0f}"),
        (
            "push consumer drain",
            f"{cpp['consume_msgs_per_s']:,.0f}",
            f"{ours['consume_async_msgs_per_s']:,.0f} (async listener), "
            f"{ours['consume_threads_msgs_per_s']:,.0f} (thread pool)",
        ),
    ]
    lines = [
        f"| {size} B messages, msgs/s | C++ client 0.4.4 | pocketmq client |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--ours-only", metavar="NAMESRV", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ours_only:
        import uvloop

        figures = uvloop.run(_ours(args.ours_only, args.messages, args.size, args.window))
        print(json.dumps(figures), flush=True)
        return
    python = ensure_cpp_client()
    with tempfile.TemporaryDirectory(prefix="pocketmq-client-bench-") as work:
        work_dir = Path(work)
        up = start_server_process(
            ["up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", work + "/up"],
            work_dir / "up.log",
        )
        try:
            print(f"C++ client: {args.messages:,} sync sends, then a push consumer ...", flush=True)
            cpp = _cpp(python, up.address, args.messages, args.size, work_dir)
            print(
                "pocketmq client: sync, pipelined, batched sends, then two drains ...", flush=True
            )
            run = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--ours-only",
                    up.address,
                    "--messages",
                    str(args.messages),
                    "--size",
                    str(args.size),
                    "--window",
                    str(args.window),
                ],
                capture_output=True,
                text=True,
                timeout=1800,
                check=True,
            )
            ours = json.loads(run.stdout.strip().splitlines()[-1])
        finally:
            up.stop()
    if args.json:
        print(json.dumps({"cpp": cpp, "pocketmq": ours}, indent=2))
    else:
        print(_table(cpp, ours, args.size, args.window))


if __name__ == "__main__":
    main()
