"""Starting clients for the length of a block and shutting them down however it ends."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any

_STOP_METHODS = ("close", "shutdown", "stop")


async def _call(method: Any) -> None:
    outcome = method()
    if inspect.isawaitable(outcome):
        await outcome


def _stop_method(client: object) -> Any:
    for name in _STOP_METHODS:
        method = getattr(client, name, None)
        if callable(method):
            return method
    raise TypeError(f"{type(client).__name__} has none of {', '.join(_STOP_METHODS)}")


@contextlib.asynccontextmanager
async def started(*clients: object) -> AsyncIterator[None]:
    """Starts `clients` in order and, on leaving the block, stops them in reverse order.

    A client without `start` (an `AdminClient`) is only stopped. Stopping calls `close`,
    `shutdown` or `stop`, whichever the client has, awaited when it is a coroutine. If a start
    fails, the clients already started are stopped. Every client is stopped even when another
    one's stop raises; the first such error is raised after the rest were stopped.

        async with started(producer, consumer):
            await producer.send(message)
    """
    stop_methods = [_stop_method(client) for client in clients]  # fail before starting any
    running: list[Any] = []
    try:
        for client, stop in zip(clients, stop_methods, strict=True):
            start = getattr(client, "start", None)
            if callable(start):
                await _call(start)
            running.append(stop)
        yield
    finally:
        errors: list[BaseException] = []
        for stop in reversed(running):
            try:
                await _call(stop)
            except Exception as error:  # noqa: BLE001 - the others must still be stopped
                errors.append(error)
        if errors:
            raise errors[0]
