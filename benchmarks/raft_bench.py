"""Raft on three local processes: committed proposals per second and commit latency, with and
without batching.

Starts three `pocketmq raftkv` nodes (fsync per round of the Raft loop) on free loopback ports
with data in a temporary directory. For each mode, `--clients` concurrent clients each write
one key at a time for `--seconds`; an answer means the leader applied the command, after a
majority had it on disk. Batching: every proposal waiting when the loop turns goes into one
append and one fsync. Without (`raftkv --no-batching`): one command per append and per fsync.

`python benchmarks/raft_bench.py [--clients N] [--seconds S] [--size BYTES]`
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pocketmq.raftkv.client import RaftKVClient  # noqa: E402
from pocketmq.testing import ServerProcess, start_server_process  # noqa: E402


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def start_cluster(work: Path, batching: bool) -> list[ServerProcess]:
    ports = free_ports(3)
    peers = ",".join(f"{i + 1}=127.0.0.1:{port}" for i, port in enumerate(ports))
    extra = [] if batching else ["--no-batching"]
    return [
        start_server_process(
            ["raftkv", "--id", str(i), "--peers", peers, "--data-dir", str(work / f"n{i}"), *extra],
            work / f"n{i}.log",
        )
        for i in (1, 2, 3)
    ]


async def measure(
    addresses: list[str], clients: int, seconds: float, size: int
) -> dict[str, float]:
    value = "x" * size
    latencies: list[float] = []
    warm = RaftKVClient(addresses, timeout_s=30)
    await warm.put("warm-up", value)  # waits out the first election
    await warm.close()
    deadline = time.perf_counter() + seconds

    async def client(number: int) -> None:
        kv = RaftKVClient(addresses, timeout_s=30)
        sequence = 0
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await kv.put(f"c{number}-{sequence}", value)
            latencies.append(time.perf_counter() - started)
            sequence += 1
        await kv.close()

    started = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "per_s": len(latencies) / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)],
        "mean_ms": 1000 * statistics.fmean(latencies),
        "count": len(latencies),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--size", type=int, default=100, help="value bytes per command")
    args = parser.parse_args()
    rows = []
    for batching in (True, False):
        for clients in (1, args.clients):
            with tempfile.TemporaryDirectory() as work:
                nodes = start_cluster(Path(work), batching)
                try:
                    addresses = [node.address for node in nodes]
                    result = asyncio.run(measure(addresses, clients, args.seconds, args.size))
                finally:
                    for node in nodes:
                        node.stop()
            mode = "batching" if batching else "no batching"
            rows.append((mode, clients, result))
            print(
                f"{mode:12} clients {clients:3}: {result['per_s']:8,.0f} committed/s  "
                f"p50 {result['p50_ms']:6.2f} ms  p99 {result['p99_ms']:6.2f} ms  "
                f"({result['count']:,} commands)",
                flush=True,
            )
    print("\n| mode | clients | committed/s | p50 ms | p99 ms |\n|---|---:|---:|---:|---:|")
    for mode, clients, r in rows:
        print(f"| {mode} | {clients} | {r['per_s']:,.0f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |")


if __name__ == "__main__":
    main()
