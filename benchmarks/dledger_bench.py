"""DLedger mode next to Master/Slave: send latency and pipelined throughput of one broker group.

Starts `pocketmq namesrv` and, one setup at a time, on free loopback ports with data in a
temporary directory:

- `SYNC_MASTER`: a SYNC_MASTER and a SLAVE (a send waits for the slave), ASYNC_FLUSH;
- `DLedger ASYNC_FLUSH`: three DLedger replicas (a send waits for a majority, in memory);
- `DLedger SYNC_FLUSH`: the same, a majority has fsynced each send.

For each: `--latency-messages` one-at-a-time sends (p50 / p99), then `--messages` sends of
`--size` bytes with up to `--window` in flight (msgs/s), from pocketmq's asyncio producer.

`python benchmarks/dledger_bench.py [--messages N] [--size BYTES] [--window N]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pocketmq.client.admin import AdminClient  # noqa: E402
from pocketmq.client.aio import Message, Producer  # noqa: E402
from pocketmq.testing import ServerProcess, free_port_pair, start_server_process  # noqa: E402

SETUPS = ("SYNC_MASTER", "DLedger ASYNC_FLUSH", "DLedger SYNC_FLUSH")


def start_brokers(work: Path, namesrv: str, setup: str) -> list[ServerProcess]:
    common = f"brokerName=broker-a\nbrokerIP1=127.0.0.1\nnamesrvAddr={namesrv}\n"
    if setup == "SYNC_MASTER":
        configs = [
            ("master", "brokerId=0\nbrokerRole=SYNC_MASTER\n"),
            ("slave", "brokerId=1\nbrokerRole=SLAVE\n"),
        ]
    else:
        flush = setup.split()[1]
        ports = [free_port_pair() for _ in range(3)]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        configs = [
            (
                f"n{i}",
                f"enableDLegerCommitLog=true\ndLegerPeers={peers}\ndLegerSelfId=n{i}\n"
                f"flushDiskType={flush}\n",
            )
            for i in range(3)
        ]
    brokers = []
    for name, text in configs:
        config = work / f"{name}.properties"
        config.write_text(
            common + text + f"listenPort={free_port_pair()}\nstorePathRootDir={work / name}\n"
        )
        brokers.append(start_server_process(["broker", "-c", str(config)], work / f"{name}.log"))
    return brokers


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


async def wait_for_master(namesrv: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    async with AdminClient([namesrv]) as admin:
        while time.monotonic() < deadline:
            info = await admin.cluster_info()
            data = info.broker_addr_table.get("broker-a")
            if data is not None and 0 in data.broker_addrs and len(data.broker_addrs) > 1:
                return
            await asyncio.sleep(0.05)
    raise RuntimeError("no master with a replica registered")


async def measure(namesrv: str, args: argparse.Namespace, topic: str) -> dict[str, Any]:
    await wait_for_master(namesrv)
    body = b"x" * args.size
    figures: dict[str, Any] = {}
    async with Producer(f"bench-{len(topic)}", namesrv=namesrv) as producer:
        for _ in range(100):  # warm up: route, connections, the slave's link
            await producer.send(Message(topic, body))
        latencies = []
        replicas = 0
        for _ in range(args.latency_messages):
            started = time.perf_counter()
            result = await producer.send(Message(topic, body))
            latencies.append((time.perf_counter() - started) * 1e6)
            replicas += result.replicas or 0
        figures["sync_send_us"] = [percentile(latencies, f) for f in (0.5, 0.99)]
        figures["replicas_mean"] = replicas / max(1, args.latency_messages)
        figures["durability"] = result.durability
        window = asyncio.Semaphore(args.window)

        async def one() -> None:
            async with window:
                await producer.send(Message(topic, body))

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(args.messages)))
        figures["pipelined_msgs_per_s"] = args.messages / (time.perf_counter() - started)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--latency-messages", type=int, default=2_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for setup in SETUPS:
        with tempfile.TemporaryDirectory(prefix="pocketmq-dledger-") as tmp:
            work = Path(tmp)
            namesrv = start_server_process(["namesrv", "--port", "0"], work / "namesrv.log")
            brokers = start_brokers(work, namesrv.address, setup)
            try:
                print(f"{setup}: measuring ...", file=sys.stderr)
                results[setup] = asyncio.run(measure(namesrv.address, args, "BenchTopic"))
            finally:
                for broker in brokers:
                    broker.stop()
                namesrv.stop()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"| {args.size} B messages | " + " | ".join(SETUPS) + " |")
    print("| --- |" + " ---: |" * len(SETUPS))

    def row(name: str, render: Any) -> None:
        print(f"| {name} | " + " | ".join(render(results[s]) for s in SETUPS) + " |")

    row("sync send p50 / p99", lambda r: " / ".join(f"{v:,.0f} us" for v in r["sync_send_us"]))
    row("receipt: durability, replicas (mean)",
        lambda r: f"{r['durability']}, {r['replicas_mean']:.2f}")  # fmt: skip
    row(
        f"pipelined ({args.window} in flight)", lambda r: f"{r['pipelined_msgs_per_s']:,.0f} msgs/s"
    )
    base = results["SYNC_MASTER"]["pipelined_msgs_per_s"]
    row("pipelined, against SYNC_MASTER", lambda r: f"{r['pipelined_msgs_per_s'] / base:.2f}x")


if __name__ == "__main__":
    main()
