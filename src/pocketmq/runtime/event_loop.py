"""Event loop helpers: running a server's loop (uvloop where installed), stopping tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """Runs `main` to completion on a new event loop (uvloop when available)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop (uvloop when available), not yet running."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


RECANCEL_S = 0.2


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancels a background task and waits until it has stopped; re-raises what it failed
    with, if anything other than the cancellation.

    The cancellation is repeated until the task ends: on Python 3.11 `asyncio.wait_for` drops a
    cancellation that arrives as the awaited operation completes, and a task in a retry loop
    would then run on and keep its canceller waiting forever.
    """
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=RECANCEL_S)
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        raise error


def resolve_after(delay_s: float, future: asyncio.Future[T], value: T) -> asyncio.TimerHandle:
    """Sets `value` as `future`'s result in `delay_s` seconds unless it is done by then; cancel
    the handle once the future is done otherwise.

    For waits on hot paths (a SYNC_FLUSH send, a held pull): `asyncio.timeout` looks up the
    task and runs a context manager each time, about five times the cost of this timer."""
    return asyncio.get_running_loop().call_later(delay_s, _resolve, future, value)


def _resolve(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)
