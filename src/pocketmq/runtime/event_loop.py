"""Event loop helpers: running a server's loop (uvloop where installed), a loop thread's run
and close, starting a coroutine at once, stopping tasks, timed waits."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
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


def run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    """Runs `loop` (on the calling thread, a loop thread's target) until `loop.stop()`, then
    closes it: what is still pending is cancelled and awaited, and the loop's file descriptors
    (its selector, wake-up pipe and, with uvloop, io_uring and eventfd) are released now.
    A stopped loop left open holds them until it is collected, if ever: a program that makes
    and closes a blocking client per job ran out of descriptors."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def start_eagerly(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, None]
) -> asyncio.Task[None] | None:
    """Runs `coroutine` now, up to its first wait; returns None when it ended without one,
    else a task that carries it on from that wait (Python 3.12's eager task start).

    For the requests a server answers without waiting (most sends and pulls): a task for each
    would cost more than some of them take (its creation, a turn of the loop before it starts,
    its registration and done callback). The part run now is not in a task: it must not ask
    for the current task (`asyncio.timeout`, `asyncio.current_task`) nor set context variables.
    Exceptions it raises before its first wait propagate from here.
    """
    try:
        awaited = coroutine.send(None)
    except StopIteration:
        return None
    return loop.create_task(_carry_on(coroutine, awaited))


@types.coroutine
def _carry_on(coroutine: Coroutine[Any, Any, None], awaited: Any) -> Generator[Any, Any, None]:
    """Hands what `coroutine` waits on to the task running this, and passes each wake-up (or
    exception, a cancellation included) back to it, as the task would to its own coroutine."""
    while True:
        try:
            sent = yield awaited
        except GeneratorExit:
            coroutine.close()
            raise
        except BaseException as exc:  # noqa: BLE001 - what the wait raised, passed on
            try:
                awaited = coroutine.throw(exc)
            except StopIteration:
                return
        else:
            try:
                awaited = coroutine.send(sent)
            except StopIteration:
                return


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
