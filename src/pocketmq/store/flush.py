"""Flushing: making appended bytes durable without ever blocking the event loop on fsync.

- `ASYNC_FLUSH`: a background task flushes the CommitLog every `flushIntervalCommitLog` ms;
  a put is acknowledged once its bytes are in the page cache.
- `SYNC_FLUSH` with group commit: a put waits until an `fdatasync` that started after its
  append has returned. One flush thread runs one sync at a time; every writer that appended
  while a sync was running is released by the next one, so N concurrent writers share one
  fsync instead of paying N. A writer not released within `syncFlushTimeout` gets
  FLUSH_DISK_TIMEOUT (its bytes may still become durable later, as in RocketMQ).

Consume queues, index and the checkpoint are flushed on their own, slower, interval.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)


class GroupCommitFlusher:
    """Releases each writer once the log is durable up to its end offset."""

    def __init__(
        self,
        flush: Callable[[], int],
        wrote_offset: Callable[[], int],
        executor: ThreadPoolExecutor,
    ) -> None:
        self._flush = flush  # blocking: syncs all written bytes, returns the durable offset
        self._wrote_offset = wrote_offset
        self._executor = executor
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._sequence = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.flushed_offset = 0
        self.syncs = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="group-commit")

    async def wait_durable(self, end_offset: int, timeout_s: float) -> bool:
        """Waits until the log is durable up to `end_offset`; False on timeout."""
        if end_offset <= self.flushed_offset:
            return True
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sequence += 1
        heapq.heappush(self._waiters, (end_offset, self._sequence, future))
        self._wakeup.set()
        try:
            async with asyncio.timeout(timeout_s):
                await future
        except TimeoutError:
            return False
        return True

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._waiters:
                try:
                    self.flushed_offset = await loop.run_in_executor(self._executor, self._flush)
                except OSError:
                    log.exception("commit log flush failed; writers will time out")
                    await asyncio.sleep(0.1)
                    continue
                self.syncs += 1
                waiters = self._waiters
                while waiters and waiters[0][0] <= self.flushed_offset:
                    _, _, future = heapq.heappop(waiters)
                    if not future.done():
                        future.set_result(None)
                if waiters and waiters[0][0] > self._wrote_offset():
                    # Only possible after a truncation: those bytes will never come.
                    log.error("releasing writers waiting past the end of the log")
                    for _, _, future in waiters:
                        if not future.done():
                            future.set_result(None)
                    waiters.clear()

    async def stop(self) -> None:
        """Stops the loop after a last flush that releases every writer still waiting."""
        if self._task is None:
            return
        await cancel_and_wait(self._task)
        self._task = None
        if self._waiters:
            self.flushed_offset = await asyncio.get_running_loop().run_in_executor(
                self._executor, self._flush
            )
            for _, _, future in self._waiters:
                if not future.done():
                    future.set_result(None)
            self._waiters.clear()


class PeriodicFlusher:
    """Runs a blocking flush function on the flush thread every `interval_ms`."""

    def __init__(
        self, name: str, flush: Callable[[], object], interval_ms: int, executor: ThreadPoolExecutor
    ) -> None:
        self._name = name
        self._flush = flush
        self._interval_s = interval_ms / 1000
        self._executor = executor
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)

    async def flush_now(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._executor, self._flush)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.flush_now()
            except OSError:
                log.exception("%s failed; retrying at the next interval", self._name)

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
