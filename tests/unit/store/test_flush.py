"""Group commit: many writers share one fsync; a writer not released in time gets a timeout;
a failed sync or a truncation never answers a writer as durable."""

from __future__ import annotations

import asyncio
import errno
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from pocketmq.store.flush import FlushOutcome, FlushServices, GroupCommitFlusher


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

    async def run() -> list[FlushOutcome]:
        with ThreadPoolExecutor(1) as executor:
            flusher = GroupCommitFlusher(fake.flush, lambda: fake.wrote, executor)
            flusher.start()

            async def writer() -> FlushOutcome:
                fake.wrote += 100
                return await flusher.wait_durable(fake.wrote, 5.0)

            results = await asyncio.gather(*(writer() for _ in range(64)))
            await flusher.stop()
            return list(results)

    results = asyncio.run(run())
    assert set(results) == {FlushOutcome.DURABLE}
    assert fake.flushes <= 3  # 64 writers, not 64 fsyncs


def test_writer_times_out_when_flush_stalls() -> None:
    fake = FakeLog(flush_s=0)
    fake.blocked.clear()

    async def run() -> FlushOutcome:
        with ThreadPoolExecutor(1) as executor:
            flusher = GroupCommitFlusher(fake.flush, lambda: fake.wrote, executor)
            flusher.start()
            fake.wrote = 10
            durable = await flusher.wait_durable(10, 0.05)
            fake.blocked.set()
            await flusher.stop()
            return durable

    assert asyncio.run(run()) is FlushOutcome.TIMEOUT


def test_failed_sync_fails_every_writer_and_stays_failed() -> None:
    """After an fsync error the pages may be gone: no later success may be trusted."""
    calls = []
    failures: list[OSError] = []

    def flush() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.EIO, "I/O error")
        return 1_000

    async def run() -> list[FlushOutcome]:
        with ThreadPoolExecutor(1) as executor:
            flusher = GroupCommitFlusher(flush, lambda: 1_000, executor, failures.append)
            flusher.start()
            first = await asyncio.gather(*(flusher.wait_durable(n, 5.0) for n in (10, 20)))
            later = await flusher.wait_durable(30, 5.0)
            await flusher.stop()
            return [*first, later]

    assert asyncio.run(run()) == [FlushOutcome.FAILED] * 3
    assert len(calls) == 1  # never retried
    assert [f.errno for f in failures] == [errno.EIO]


def test_writers_past_a_truncated_end_are_not_durable() -> None:
    wrote = 100

    def flush() -> int:
        return wrote

    async def run() -> FlushOutcome:
        nonlocal wrote
        with ThreadPoolExecutor(1) as executor:
            flusher = GroupCommitFlusher(flush, lambda: wrote, executor)
            flusher.start()
            wrote = 50  # the log was cut back before the sync ran
            outcome = await flusher.wait_durable(100, 5.0)
            await flusher.stop()
            return outcome

    assert asyncio.run(run()) is FlushOutcome.FAILED


def test_stop_returns_only_after_a_queue_flush_in_progress_ends() -> None:
    """The queue flush runs on a thread of its own; a stop that cancelled it while it synced
    must wait for it, or the store would close files under it."""
    started, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def flush_derived() -> None:
        started.set()
        release.wait(10)
        ended.append("queue flush")

    async def scenario() -> None:
        services = FlushServices(
            sync_flush=False,
            flush_commit_log=lambda: 0,
            flush_derived=flush_derived,
            wrote_offset=lambda: 0,
            commit_log_interval_ms=3_600_000,
            derived_interval_ms=1,
            where="test",
        )
        services.start()
        assert await asyncio.to_thread(started.wait, 10)
        asyncio.get_running_loop().call_later(0.2, release.set)
        await services.stop()
        assert ended == ["queue flush"]
        services.shutdown()

    asyncio.run(scenario())
