"""The event loop behind the blocking facade: one thread running asyncio, and calls into it.

Each blocking client owns one (or shares one passed in). Calls block the caller until the
coroutine finishes on the loop thread; exceptions come back as they were raised. The loop
thread is a daemon, so a program that forgets `close()` still exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, Self, TypeVar

from pocketmq.runtime.event_loop import new_event_loop, run_until_stopped

T = TypeVar("T")


class BackgroundLoop:
    """An asyncio loop on its own thread; `call` runs a coroutine there and waits."""

    def __init__(self, name: str = "pocketmq-client") -> None:
        self.loop = new_event_loop()
        self._thread = threading.Thread(
            target=run_until_stopped, args=(self.loop,), name=name, daemon=True
        )
        self._thread.start()
        self._users = 0
        self._lock = threading.Lock()

    def acquire(self) -> BackgroundLoop:
        """Counts one more client using this loop (`release` stops it after the last)."""
        with self._lock:
            self._users += 1
        return self

    def release(self) -> None:
        """One client is done; the last one stops the loop and joins its thread."""
        with self._lock:
            self._users -= 1
            last = self._users <= 0
        if last and self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            if threading.current_thread() is not self._thread:
                self._thread.join(timeout=10)

    def call(self, coroutine: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Runs `coroutine` on the loop and returns its result (or raises its exception).

        Raises:
            RuntimeError: called from the loop's own thread (it would wait for itself).
            TimeoutError: `timeout_s` passed; the coroutine is cancelled.
        """
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError(
                "a blocking client was called from its own event loop thread (for example "
                "from an async listener): use pocketmq.client.aio there"
            )
        future = self.submit(coroutine)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"no result within {timeout_s} s") from None

    def run(self, function: Callable[..., T], *args: Any) -> T:
        """Calls a plain function on the loop thread (for state only the loop may touch)."""

        async def on_loop() -> T:
            return function(*args)

        return self.call(on_loop())

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Starts `coroutine` on the loop; the future resolves with its outcome."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)


class _Startable(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


C = TypeVar("C", bound=_Startable)


class BlockingClient(Generic[C]):
    """What every blocking client shares: its loop, `start`, `close` and `with`."""

    aio: C

    def __init__(self, loop: BackgroundLoop | None) -> None:
        self._background = (loop or BackgroundLoop()).acquire()

    def start(self) -> None:
        """Connects and joins the cluster."""
        self._background.call(self.aio.start())

    def close(self) -> None:
        """Leaves the cluster (see the asyncio client's `close`), then stops the loop."""
        try:
            self._background.call(self.aio.close())
        finally:
            self._background.release()

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            # `with` calls no `__exit__` when entering fails: the loop would be left running.
            with contextlib.suppress(Exception):
                self.close()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
