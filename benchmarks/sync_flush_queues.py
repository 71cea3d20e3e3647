"""SYNC_FLUSH puts across many queues, in process: throughput and put latency.

`python benchmarks/sync_flush_queues.py [--queues 4096] [--seconds 8] [--writers 16]`

Every queue gets a message and a flush first, so the run measures the steady state, not the
creation of the queues' files. Then `--writers` concurrent writers put 1 KiB messages round
robin over the queues for `--seconds`, each put waiting for group commit. With thousands of
queues the store's periodic flush of queues syncs a file for each queue written since the
last one; what this shows is whether group commit, and so every SYNC_FLUSH put, waits for it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time

from pocketmq.bench.store import make_messages
from pocketmq.store.config import FlushDiskType, MessageStoreConfig
from pocketmq.store.message_store import MessageStore


async def run(queues: int, seconds: float, writers: int, directory: str | None) -> str:
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-", dir=directory) as root:
        config = MessageStoreConfig(
            store_path_root_dir=root, flush_disk_type=FlushDiskType.SYNC_FLUSH
        )
        store = MessageStore(config)
        store.load()
        await store.start()
        await asyncio.gather(*(store.put_message(m) for m in make_messages(queues, 1024, queues)))
        store.dispatch_now()
        await asyncio.to_thread(store.consume_queues.flush)
        messages = make_messages(max(queues, 50_000), 1024, queues)
        latencies: list[float] = []
        stop = time.perf_counter() + seconds

        async def writer(first: int) -> None:
            index = first
            while time.perf_counter() < stop:
                start = time.perf_counter()
                result = await store.put_message(messages[index % len(messages)])
                latencies.append(time.perf_counter() - start)
                if not result.ok:
                    raise RuntimeError(f"put failed: {result.status}")
                index += writers

        began = time.perf_counter()
        await asyncio.gather(*(writer(first) for first in range(writers)))
        elapsed = time.perf_counter() - began
        await store.shutdown()
    latencies.sort()

    def ms(share: float) -> float:
        return latencies[int(share * (len(latencies) - 1))] * 1000

    rate = len(latencies) / elapsed
    return (
        f"{queues:,} queues, SYNC_FLUSH, {writers} writers: {rate:,.0f} msgs/s, "
        f"put p50 {ms(0.5):.2f} ms, p99 {ms(0.99):.2f} ms, max {ms(1.0):.1f} ms"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queues", type=int, default=4096)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument("--dir", default=None, help="where the temporary store goes")
    args = parser.parse_args()
    logging.getLogger("pocketmq.store").setLevel(logging.WARNING)
    print(asyncio.run(run(args.queues, args.seconds, args.writers, args.dir)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
