"""Flushing: making appended bytes durable without ever blocking the event loop on fsync.

- `ASYNC_FLUSH`: a background task flushes the CommitLog every `flushIntervalCommitLog` ms;
  a put is acknowledged once its bytes are in the page cache.
- `SYNC_FLUSH` with group commit: a put waits until an `fdatasync` that started after its
  append has returned. One flush thread runs one sync at a time; every writer that appended
  while a sync was running is released by the next one, so N concurrent writers share one
  fsync instead of paying N. A writer not released within `syncFlushTimeout` gets
  FLUSH_DISK_TIMEOUT (its bytes may still become durable later, as in RocketMQ).
- A failed sync is final: the kernel may have dropped the dirty pages it could not write, so a
  later sync that succeeds proves nothing about them. Every writer waiting is released as not
  durable, the flusher stops, and `on_failure` tells the store to refuse writes until a
  restart (whose recovery syncs everything it finds again).

Consume queues, index and the checkpoint are flushed on their own, slower, interval, on a
thread of their own, as RocketMQ's FlushConsumeQueueService runs beside its GroupCommitService:
with thousands of queues that flush syncs thousands of files, and group commit must not wait
behind it.
"""

from __future__ import annotations

import asyncio
import enum
import heapq
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from pocketmq.runtime.event_loop import cancel_and_wait, resolve_after

log = logging.getLogger(__name__)


class FlushOutcome(enum.Enum):
    """What a writer waiting for durability learns."""

    DURABLE = "DURABLE"  # a sync that started after the append returned
    TIMEOUT = "TIMEOUT"  # not yet known durable within the timeout
    FAILED = "FAILED"  # never will be: a sync failed, or the bytes were truncated away


class GroupCommitFlusher:
    """Releases each writer once the log is durable up to its end offset."""

    def __init__(
        self,
        flush: Callable[[], int],
        wrote_offset: Callable[[], int],
        executor: ThreadPoolExecutor,
        on_failure: Callable[[OSError], None] = lambda error: None,
    ) -> None:
        self._flush = flush  # blocking: syncs all written bytes, returns the durable offset
        self._wrote_offset = wrote_offset
        self._executor = executor
        self._on_failure = on_failure
        self.failure: OSError | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[bool | None]]] = []
        self._sequence = 0
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.flushed_offset = 0
        self.syncs = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="group-commit")

    async def wait_durable(self, end_offset: int, timeout_s: float) -> FlushOutcome:
        """Waits until the log is durable up to `end_offset`."""
        if self.failure is not None:
            return FlushOutcome.FAILED
        if end_offset <= self.flushed_offset:
            return FlushOutcome.DURABLE
        future: asyncio.Future[bool | None] = asyncio.get_running_loop().create_future()
        self._sequence += 1
        heapq.heappush(self._waiters, (end_offset, self._sequence, future))
        self._wakeup.set()
        expiry = resolve_after(timeout_s, future, None)  # None: not released in time
        try:
            durable = await future
        finally:
            expiry.cancel()
        if durable is None:
            return FlushOutcome.TIMEOUT
        return FlushOutcome.DURABLE if durable else FlushOutcome.FAILED

    def _release(self, *, durable_through: int | None) -> None:
        """Answers the waiters up to `durable_through` as durable; all of them as failed when
        it is None."""
        waiters = self._waiters
        while waiters and (durable_through is None or waiters[0][0] <= durable_through):
            _, _, future = heapq.heappop(waiters)
            if not future.done():
                future.set_result(durable_through is not None)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._waiters:
                try:
                    self.flushed_offset = await loop.run_in_executor(self._executor, self._flush)
                except OSError as error:
                    log.error(
                        "commit log sync failed (%s): %d writers answered as not durable; "
                        "writes are refused until a restart",
                        error,
                        len(self._waiters),
                    )
                    self.failure = error
                    self._release(durable_through=None)
                    self._on_failure(error)
                    return
                self.syncs += 1
                self._release(durable_through=self.flushed_offset)
                if self._waiters and self._waiters[0][0] > self._wrote_offset():
                    # Only possible after a truncation: those bytes will never be durable.
                    log.warning(
                        "%d writers waited for bytes past the end of the log (truncated): "
                        "answered as not durable",
                        len(self._waiters),
                    )
                    self._release(durable_through=None)

    async def stop(self) -> None:
        """Stops the loop after a last flush that releases every writer still waiting."""
        if self._task is None:
            return
        await cancel_and_wait(self._task)
        self._task = None
        if self._waiters and self.failure is None:
            try:
                self.flushed_offset = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._flush
                )
            except OSError as error:
                self.failure = error
                self._on_failure(error)
            else:
                self._release(durable_through=self.flushed_offset)
        self._release(durable_through=None)


class PeriodicFlusher:
    """Runs a blocking flush function on the flush thread every `interval_ms`."""

    def __init__(
        self,
        name: str,
        flush: Callable[[], object],
        interval_ms: int,
        executor: ThreadPoolExecutor,
        on_failure: Callable[[OSError], None] = lambda error: None,
    ) -> None:
        self._name = name
        self._flush = flush
        self._interval_s = interval_ms / 1000
        self._executor = executor
        self._on_failure = on_failure
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
            except OSError as error:
                # Final, as for group commit: a retry that succeeds proves nothing.
                log.error("%s failed (%s); writes are refused until a restart", self._name, error)
                self._on_failure(error)
                return

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None


class FlushServices:
    """The store's flushing as `flushDiskType` chooses it: group commit (SYNC_FLUSH) or a
    periodic CommitLog flush (ASYNC_FLUSH) on the CommitLog's flush thread, and the periodic
    flush of queues, index and checkpoint on another. `disk_error` says why writes are refused
    once any sync failed."""

    def __init__(
        self,
        *,
        sync_flush: bool,
        flush_commit_log: Callable[[], int],
        flush_derived: Callable[[], object],
        wrote_offset: Callable[[], int],
        commit_log_interval_ms: int,
        derived_interval_ms: int,
        where: str,
    ) -> None:
        self.executor = ThreadPoolExecutor(1, "pocketmq-flush")
        self._derived_executor = ThreadPoolExecutor(1, "pocketmq-flush-queues")
        self.disk_error: str | None = None
        self._where = where
        self.group_commit: GroupCommitFlusher | None = None
        self._flushers: list[PeriodicFlusher] = []
        if sync_flush:
            self.group_commit = GroupCommitFlusher(
                flush_commit_log, wrote_offset, self.executor, self.refuse_writes
            )
        else:
            self._flushers.append(
                PeriodicFlusher(
                    "commit-log-flush",
                    flush_commit_log,
                    commit_log_interval_ms,
                    self.executor,
                    self.refuse_writes,
                )
            )
        self._flushers.append(
            PeriodicFlusher(
                "queue-flush",
                flush_derived,
                derived_interval_ms,
                self._derived_executor,
                self.refuse_writes,
            )
        )

    def start(self) -> None:
        if self.group_commit is not None:
            self.group_commit.start()
        for flusher in self._flushers:
            flusher.start()

    def refuse_writes(self, error: OSError) -> None:
        """Records the first disk failure: nothing written since is known durable."""
        if self.disk_error is None:
            self.disk_error = (
                f"the store's disk failed ({error.strerror or error}): this broker refuses "
                "writes until it is restarted; check the disk and its free space"
            )
            log.error("store at %s: %s", self._where, self.disk_error)

    async def stop(self) -> None:
        """Stops every service; group commit releases its writers with a last flush."""
        if self.group_commit is not None:
            await self.group_commit.stop()
        for flusher in self._flushers:
            await flusher.stop()
        # A cancelled flush goes on in its thread: wait for it, so that nothing flushes after.
        loop = asyncio.get_running_loop()
        for executor in (self.executor, self._derived_executor):
            await loop.run_in_executor(executor, _idle)

    def shutdown(self) -> None:
        """Ends the flush threads, once `stop` returned; blocking."""
        self.executor.shutdown(wait=True)
        self._derived_executor.shutdown(wait=True)


def _idle() -> None:
    """Nothing: run on a flush thread, it returns once the work before it is done."""
