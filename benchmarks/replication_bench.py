"""Master/Slave replication: send throughput and latency with ASYNC_MASTER and SYNC_MASTER, the
slave's lag under load, and how fast a slave catches up with a backlog.

Starts `pocketmq namesrv`, a master and a slave (`pocketmq broker`, ASYNC_FLUSH) on free
loopback ports with data in a temporary directory, for each role:

1. one-at-a-time sync sends (`--latency-messages`): latency p50/p99/p99.9 and `replicas`;
2. pipelined sends of `--messages` messages of `--size` bytes, up to `--window` in flight:
   throughput, and the slave's lag sampled every 50 ms from `haStatus` (bytes behind, and age
   of the oldest message the slave lacks), then the time until it has everything;
3. (ASYNC_MASTER) catch-up: the slave stopped, `--backlog-mb` written, the slave started
   again: MB/s until it has the master's whole CommitLog.

`python benchmarks/replication_bench.py [--messages N] [--size BYTES] [--window N]`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
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


def start_broker(work: Path, namesrv: str, name: str, broker_id: int, role: str) -> ServerProcess:
    config = work / f"{name}.properties"
    config.write_text(
        f"brokerName=broker-a\nbrokerId={broker_id}\nbrokerRole={role}\nbrokerIP1=127.0.0.1\n"
        f"listenPort={free_port_pair()}\nnamesrvAddr={namesrv}\n"
        f"storePathRootDir={work / name}\n"
    )
    return start_server_process(["broker", "-c", str(config)], work / f"{name}.log")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


async def link(admin: AdminClient, master: str) -> dict[str, Any] | None:
    connections = (await admin.ha_status(master)).get("haConnectionInfo", [])
    return connections[0] if connections else None


async def wait_caught_up(admin: AdminClient, master: str, timeout_s: float = 120) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        state = await link(admin, master)
        if state is not None and state["diff"] == 0:
            return time.perf_counter() - started
        await asyncio.sleep(0.01)
    raise RuntimeError("the slave did not catch up")


async def measure(
    namesrv: str, master: str, args: argparse.Namespace, topic: str
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    body = b"x" * args.size
    async with AdminClient([namesrv]) as admin, Producer(f"bench-{topic}", namesrv=namesrv) as p:
        await p.send(Message(topic, body))
        await wait_caught_up(admin, master)
        latencies, replicas = [], []
        for _ in range(args.latency_messages):
            started = time.perf_counter()
            result = await p.send(Message(topic, body))
            latencies.append((time.perf_counter() - started) * 1e6)
            replicas.append(result.replicas or 0)
        figures["sync_send_us"] = [percentile(latencies, f) for f in (0.5, 0.99, 0.999)]
        figures["replicas_mean"] = statistics.fmean(replicas)
        lags_bytes: list[int] = []
        lags_ms: list[int] = []
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                state = await link(admin, master)
                if state is not None:
                    lags_bytes.append(state["diff"])
                    lags_ms.append(max(0, state["lagMs"]))
                await asyncio.sleep(0.05)

        sampler = asyncio.create_task(sample())
        window = asyncio.Semaphore(args.window)

        async def one() -> None:
            async with window:
                await p.send(Message(topic, body))

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(args.messages)))
        elapsed = time.perf_counter() - started
        figures["pipelined_msgs_per_s"] = args.messages / elapsed
        figures["pipelined_mb_per_s"] = args.messages * args.size / elapsed / 1e6
        figures["caught_up_after_s"] = await wait_caught_up(admin, master)
        done.set()
        await sampler
        figures["lag_bytes_p50_p99_max"] = [
            percentile(lags_bytes, 0.5), percentile(lags_bytes, 0.99), max(lags_bytes, default=0)
        ]  # fmt: skip
        figures["lag_ms_p50_p99_max"] = [
            percentile(lags_ms, 0.5), percentile(lags_ms, 0.99), max(lags_ms, default=0)
        ]  # fmt: skip
    return figures


async def catch_up(
    work: Path, namesrv: str, master: str, slave: ServerProcess, backlog_mb: int
) -> dict[str, Any]:
    slave.stop()
    body = b"y" * 4096
    async with Producer("bench-backlog", namesrv=namesrv, auto_batch=True) as producer:
        await asyncio.gather(
            *(producer.send_async(Message("Backlog", body)) for _ in range(backlog_mb * 256))
        )
    restarted = await asyncio.to_thread(start_broker, work, namesrv, "slave", 1, "SLAVE")
    async with AdminClient([namesrv]) as admin:
        state = None
        while state is None:
            state = await link(admin, master)
            await asyncio.sleep(0.01)
        behind = state["diff"]
        seconds = await wait_caught_up(admin, master, timeout_s=600)
    restarted.stop()
    return {"backlog_mb": behind / 1e6, "seconds": seconds, "mb_per_s": behind / 1e6 / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--window", type=int, default=1000)
    parser.add_argument("--latency-messages", type=int, default=5_000)
    parser.add_argument("--backlog-mb", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, Any] = {}
    for role in ("ASYNC_MASTER", "SYNC_MASTER"):
        with tempfile.TemporaryDirectory(prefix="pocketmq-repl-") as tmp:
            work = Path(tmp)
            namesrv = start_server_process(["namesrv", "--port", "0"], work / "namesrv.log")
            master = start_broker(work, namesrv.address, "master", 0, role)
            slave = start_broker(work, namesrv.address, "slave", 1, "SLAVE")
            try:
                print(f"{role}: measuring ...", file=sys.stderr)
                results[role] = asyncio.run(measure(namesrv.address, master.address, args, role))
                if role == "ASYNC_MASTER":
                    print(f"catch-up of {args.backlog_mb} MB ...", file=sys.stderr)
                    results["catch_up"] = asyncio.run(
                        catch_up(work, namesrv.address, master.address, slave, args.backlog_mb)
                    )
            finally:
                slave.stop()
                master.stop()
                namesrv.stop()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"| {args.size} B messages | ASYNC_MASTER | SYNC_MASTER |")
    print("| --- | ---: | ---: |")
    a, s = results["ASYNC_MASTER"], results["SYNC_MASTER"]

    def row(name: str, render: Any) -> None:
        print(f"| {name} | {render(a)} | {render(s)} |")

    row(
        "sync send p50 / p99 / p99.9",
        lambda r: " / ".join(f"{v:,.0f} us" for v in r["sync_send_us"]),
    )
    row("replicas in the send result (mean)", lambda r: f"{r['replicas_mean']:.2f}")
    row(
        f"pipelined ({args.window} in flight)", lambda r: f"{r['pipelined_msgs_per_s']:,.0f} msgs/s"
    )
    row("slave lag under that load, bytes p50 / p99 / max",
        lambda r: " / ".join(f"{v:,.0f}" for v in r["lag_bytes_p50_p99_max"]))  # fmt: skip
    row("slave lag, age of oldest missing message p50 / p99 / max",
        lambda r: " / ".join(f"{v:,.0f} ms" for v in r["lag_ms_p50_p99_max"]))  # fmt: skip
    row(
        "slave has everything, after the last ack",
        lambda r: f"{r['caught_up_after_s'] * 1000:,.0f} ms",
    )
    c = results["catch_up"]
    print(
        f"\ncatch-up: a slave {c['backlog_mb']:,.1f} MB behind caught up in {c['seconds']:.2f} s"
        f" ({c['mb_per_s']:,.1f} MB/s)"
    )


if __name__ == "__main__":
    main()
