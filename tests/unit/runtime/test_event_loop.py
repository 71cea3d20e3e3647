"""`start_eagerly`: a coroutine run at once, carried on by a task only from its first wait, must
behave as if it had been a task from the start."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.runtime.event_loop import start_eagerly


def test_a_coroutine_that_never_waits_ends_before_start_eagerly_returns() -> None:
    seen: list[object] = []

    async def quick() -> None:
        seen.append(asyncio.current_task())

    async def main() -> None:
        assert start_eagerly(asyncio.get_running_loop(), quick()) is None
        assert seen == [asyncio.current_task()]  # ran here, in the caller, not a task of its own

    asyncio.run(main())


def test_a_waiting_coroutine_goes_on_in_a_task_with_what_it_waited_for() -> None:
    steps: list[object] = []

    async def waits(first: asyncio.Future[int], second: asyncio.Future[int]) -> None:
        steps.append("started")
        steps.append(await first)
        await asyncio.sleep(0)  # a bare yield: the task steps it again next turn
        steps.append(await second)
        steps.append(asyncio.current_task() is not None)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first, second = loop.create_future(), loop.create_future()
        task = start_eagerly(loop, waits(first, second))
        assert task is not None
        assert steps == ["started"]
        first.set_result(1)
        loop.call_later(0.01, second.set_result, 2)
        await asyncio.wait_for(task, 5)
        assert steps == ["started", 1, 2, True]

    asyncio.run(main())


def test_an_exception_of_the_awaited_future_reaches_the_coroutine() -> None:
    caught: list[BaseException] = []

    async def waits(future: asyncio.Future[int]) -> None:
        try:
            await future
        except KeyError as exc:
            caught.append(exc)
            raise ValueError("handled and raised on") from exc

    async def main() -> None:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        task = start_eagerly(loop, waits(future))
        assert task is not None
        future.set_exception(KeyError("gone"))
        with pytest.raises(ValueError, match="handled and raised on"):
            await task
        assert [type(exc) for exc in caught] == [KeyError]

    asyncio.run(main())


@pytest.mark.parametrize("future_done", [False, True], ids=["waiting", "woken"])
def test_cancelling_the_task_cancels_the_coroutine_where_it_waits(future_done: bool) -> None:
    """Cancelled while it waits, or after its future is done but before it ran again (the
    task then throws the cancellation in at its next step): either way the coroutine's
    `finally` runs and the task ends cancelled."""
    events: list[str] = []

    async def waits(future: asyncio.Future[int]) -> None:
        try:
            await future
            events.append("resumed")
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        finally:
            events.append("finally")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        task = start_eagerly(loop, waits(future))
        assert task is not None
        await asyncio.sleep(0)  # the task has taken the future over
        if future_done:
            future.set_result(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        assert events == ["cancelled", "finally"]

    asyncio.run(main())
