"""Event loop helpers: running a server's loop (uvloop where installed), stopping tasks."""

from __future__ import annotations

import asyncio
import contextlib
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


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancels a background task and waits until it has stopped."""
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
