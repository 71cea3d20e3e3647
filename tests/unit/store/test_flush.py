"""Group commit: many writers share one fsync; a writer not released in time gets a timeout."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from pocketmq.store.flush import GroupCommitFlusher


class FakeLog:
    """A log whose flush takes a while and counts calls; offsets move by `append`."""

    def __init__(self, flush_s: float) -> None:
        self.wrote = 0
        self.flushes = 0
        self.flush_s = flush_s
        self.blocked = threading.Event()
        self.blocked.set()

    def flush(self) -> int:
        target = self.wrote
        self.blocked.wait(5)
        time.sleep(self.flush_s)
        self.flushes += 1
        return target


def test_concurrent_writers_share_fsyncs() -> None:
    fake = FakeLog(flush_s=0.002)

    async def run() -> list[bool]:
        with ThreadPoolExecutor(1) as executor:
            flusher = GroupCommitFlusher(fake.flush, lambda: fake.wrote, executor)
            flusher.start()

            async def writer() -> bool:
                fake.wrote += 100
                return await flusher.wait_durable(fake.wrote, 5.0)

            results = await asyncio.gather(*(writer() for _ in range(64)))
            await flusher.stop()
            return list(results)

    results = asyncio.run(run())
    assert all(results)
    assert fake.flushes <= 3  # 64 writers, not 64 fsyncs


def test_writer_times_out_when_flush_stalls() -> None:
    fake = FakeLog(flush_s=0)
    fake.blocked.clear()

    async def run() -> bool:
        with ThreadPoolExecutor(1) as executor:
            flusher = GroupCommitFlusher(fake.flush, lambda: fake.wrote, executor)
            flusher.start()
            fake.wrote = 10
            durable = await flusher.wait_durable(10, 0.05)
            fake.blocked.set()
            await flusher.stop()
            return durable

    assert asyncio.run(run()) is False
