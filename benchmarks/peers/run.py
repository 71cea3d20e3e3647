"""pocketmq next to Redis Streams, Kafka, Apache RocketMQ, NATS JetStream and RabbitMQ, same
machine, same run.

One command: `python benchmarks/peers/run.py` (or `make bench-peers`). Installs Redis, NATS and
RabbitMQ from Debian's packages if missing and Kafka's and RocketMQ's jars from Maven Central
(cached under `~/.cache/pocketmq-reference/`), starts each on loopback with its data in a
temporary directory, runs the same four workloads against each with its usual Python client
(pocketmq's own, redis-py with hiredis, confluent-kafka, rocketmq-python-client through
RocketMQ's proxy, nats-py, aio-pika), stops what it started, and prints markdown tables (also
written to `--out`):

  (a) pipelined produce of `--messages` 1 KiB messages, up to 1,000 unacknowledged;
  (b) one-at-a-time sync sends, `--sync-messages`, latency p50/p99/p99.9;
  (c) draining `--messages` stored messages with acks or offset commits (pocketmq's clock
      stops after the consumer's closing offset commit was answered);
  (d) end-to-end latency at a fixed `--rate` msgs/s for `--seconds`.

Each workload runs `--rounds` times on a fresh topic, stream or queue: the tables give the median
with min-max, and the CPU seconds the broker and the client process used (medians).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kafka_peer import start_kafka  # noqa: E402
from rocketmq_peer import start_rocketmq  # noqa: E402
from servers import (  # noqa: E402
    Server,
    ensure_installed,
    start_nats,
    start_pocketmq,
    start_rabbitmq,
    start_redis,
)


@dataclass(frozen=True)
class Row:
    system: str
    durability: str
    start: Callable[[Path], Server]
    variant: str = "classic"
    max_messages: int | None = None
    """A cap on `--messages` and `--sync-messages` for a client too slow for the full count."""


ROWS = [
    Row("pocketmq", "async flush (page cache)", lambda w: start_pocketmq(w, "ASYNC_FLUSH")),
    Row(
        "pocketmq",
        "fsync per write (SYNC_FLUSH, group commit)",
        lambda w: start_pocketmq(w, "SYNC_FLUSH"),
    ),
    Row("redis", "AOF, appendfsync everysec", lambda w: start_redis(w, "everysec")),
    Row("redis", "AOF, appendfsync always", lambda w: start_redis(w, "always")),
    Row("kafka", "acks=all, page cache (Kafka's default flush)", start_kafka),
    Row(
        "rocketmq",
        "Apache RocketMQ 5.5.0, async flush, 5.x proxy and gRPC client",
        start_rocketmq,
        max_messages=20_000,
    ),
    Row("nats", "JetStream, file storage", start_nats),
    Row("rabbitmq", "durable classic queue, persistent, confirms", start_rabbitmq, "classic"),
    Row("rabbitmq", "quorum queue, persistent, confirms", start_rabbitmq, "quorum"),
]


HEADER = "| system | durability | result | broker CPU s | client CPU s |"


def run_workload(
    row: Row, server: Server, workload: str, tag: str, args: argparse.Namespace
) -> dict[str, Any]:
    messages = args.sync_messages if workload == "sync" else args.messages
    if row.max_messages is not None:
        messages = min(messages, row.max_messages)
    command = [
        sys.executable, str(HERE / "workloads.py"), row.system, workload, server.address,
        "--variant", row.variant, "--tag", tag, "--messages", str(messages),
        "--rate", str(args.rate), "--seconds", str(args.seconds),
    ]  # fmt: skip
    before = server.cpu_seconds()
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["broker_cpu_s"] = server.cpu_seconds() - before
    return result


def spread(values: list[float], render: Callable[[float], str]) -> str:
    if not values:
        return "failed"
    middle = statistics.median(values)
    if len(values) == 1:
        return render(middle)
    return f"{render(middle)} ({render(min(values))}-{render(max(values))})"


def tables(results: dict[tuple[int, str], list[dict[str, Any]]], args: argparse.Namespace) -> str:
    def rate(v: float) -> str:
        return f"{v:,.0f}"

    def micros(v: float) -> str:
        return f"{v:,.0f} us" if v < 10_000 else f"{v / 1000:,.1f} ms"

    sections = [
        ("produce", f"(a) pipelined produce, {args.messages:,} x 1 KiB, 1,000 in flight: msgs/s",
         lambda r: [r["msgs_per_s"]], rate),
        ("sync", f"(b) sync sends one at a time, {args.sync_messages:,}: latency p50 / p99 / p99.9",
         None, micros),
        ("drain", f"(c) drain {args.messages:,} stored messages with acks/commits: msgs/s",
         lambda r: [r["msgs_per_s"]], rate),
        ("e2e", f"(d) end-to-end latency at {args.rate:,.0f} msgs/s for {args.seconds:.0f} s:"
         " p50 / p99 / p99.9", None, micros),
    ]  # fmt: skip
    out = []
    for workload, title, _, render in sections:
        out += [
            f"### {title}",
            "",
            "| system | durability | result | broker CPU s | client CPU s |",
        ]
        out.append("| --- | --- | ---: | ---: | ---: |")
        for index, row in enumerate(ROWS):
            if (index, workload) not in results:
                continue  # not asked for in this run
            runs = [r for r in results[(index, workload)] if "error" not in r]
            if not runs:
                errors = [r.get("error", "") for r in results.get((index, workload), [])]
                out.append(f"| {row.system} | {row.durability} | failed: {errors[:1]} | | |")
                continue
            if workload in ("sync", "e2e"):
                cell = " / ".join(
                    spread([r[key] for r in runs], render)
                    for key in ("p50_us", "p99_us", "p999_us")
                )
                if workload == "e2e":
                    lost = sum(r["sent"] - r["received"] for r in runs)
                    cell += f" ({lost} not received in 10 s)" if lost else ""
            else:
                cell = spread([r["msgs_per_s"] for r in runs], render)
            count = args.sync_messages if workload == "sync" else args.messages
            durability = row.durability
            if workload != "e2e" and row.max_messages is not None and row.max_messages < count:
                durability += f"; {row.max_messages:,} messages"
            broker = statistics.median(r["broker_cpu_s"] for r in runs)
            client = statistics.median(r["client_cpu_s"] for r in runs)
            out.append(f"| {row.system} | {durability} | {cell} | {broker:.1f} | {client:.1f} |")
        out.append("")
    return "\n".join(out)


def one_round(row: Row, workload: str, round_no: int, args: argparse.Namespace) -> dict[str, Any]:
    """One round on a fresh server. A server that fails to start is tried once more, then the
    round is recorded as failed: the table goes on without it."""
    for attempt in (1, 2):
        with tempfile.TemporaryDirectory(prefix=f"peers-{row.system}-") as tmp:
            try:
                server = row.start(Path(tmp))
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                print(f"{row.system}: did not start (attempt {attempt}): {exc}",
                      file=sys.stderr, flush=True)  # fmt: skip
                if attempt == 2:
                    return {"error": f"did not start: {exc}"}
                continue
            try:
                tag = f"{workload}{round_no}{int(time.time())}"
                return run_workload(row, server, workload, tag, args)
            finally:
                server.stop()
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--sync-messages", type=int, default=5_000)
    parser.add_argument("--rate", type=float, default=5_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--systems", default="pocketmq,redis,kafka,rocketmq,nats,rabbitmq")
    parser.add_argument("--workloads", default="produce,sync,drain,e2e")
    parser.add_argument("--out", type=Path, help="also write the tables here")
    args = parser.parse_args()
    systems = args.systems.split(",")
    ensure_installed(systems)
    results: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for index, row in enumerate(ROWS):
        if row.system not in systems:
            continue
        for workload in args.workloads.split(","):
            for round_no in range(args.rounds):
                result = one_round(row, workload, round_no, args)
                results.setdefault((index, workload), []).append(result)
                print(f"{row.system} [{row.durability}] {workload} #{round_no + 1}: {result}",
                      file=sys.stderr, flush=True)  # fmt: skip
    header = (
        f"Peers, {time.strftime('%Y-%m-%d')}, {__import__('os').cpu_count()} cores; "
        f"`python benchmarks/peers/run.py --rounds {args.rounds}`\n\n"
    )
    report = header + tables(results, args)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")


if __name__ == "__main__":
    main()
