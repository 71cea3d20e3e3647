"""Waiting in tests for a condition to become true, with one default limit and a clear failure.

A test that waits on a cluster cannot know how long delivery takes on a loaded machine, so
every wait polls with a deadline (never an unbounded loop) and, when the deadline passes,
fails with what it waited for and, through `describe`, the last state it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

T = TypeVar("T")

DEFAULT_WAIT_S = 30.0
"""The default limit of every wait: the longest any pocketmq test needs on a loaded machine."""

DEFAULT_POLL_S = 0.05
MAX_POLL_S = 1.0
"""A caller's poll interval is capped here so a wait notices its condition promptly."""


def _pauses(timeout_s: float, poll_s: float) -> Iterator[float]:
    """The sleeps between the checks of one wait: at most `timeout_s` in all, and a bounded
    count (the first check comes before any sleep). Checks its arguments at once."""
    if timeout_s < 0:
        raise ValueError(f"timeout_s must be >= 0, got {timeout_s}")
    if poll_s <= 0:
        raise ValueError(f"poll_s must be > 0, got {poll_s}")
    interval = min(poll_s, MAX_POLL_S)
    return _sleeps(time.monotonic() + timeout_s, interval, math.ceil(timeout_s / interval))


def _sleeps(deadline: float, interval: float, count: int) -> Iterator[float]:
    for _ in range(count):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        yield min(interval, remaining)


def _failure(what: str, timeout_s: float, describe: Callable[[], object] | None) -> AssertionError:
    message = f"not within {timeout_s} s: {what}"
    if describe is not None:
        message += f"; last state: {describe()}"
    return AssertionError(message)


def wait_until(
    condition: Callable[[], T | None],
    what: str,
    *,
    timeout_s: float = DEFAULT_WAIT_S,
    poll_s: float = DEFAULT_POLL_S,
    describe: Callable[[], object] | None = None,
    retry_on: tuple[type[Exception], ...] = (),
) -> T:
    """Calls `condition` until it returns a true value, and returns that value.

    Args:
        condition: Checked at once, then every `poll_s`.
        what: What is awaited, in words, for the failure message.
        timeout_s: How long to wait before failing.
        poll_s: The pause between checks (at most `MAX_POLL_S`).
        describe: Called once on failure; its result is shown as the last state.
        retry_on: Exceptions of `condition` that count as "not yet" (others propagate).

    Raises:
        AssertionError: `condition` was not true within `timeout_s`.
    """
    pauses = _pauses(timeout_s, poll_s)
    while True:
        value: T | None = None
        with contextlib.suppress(*retry_on):
            value = condition()
        if value:
            return value
        pause = next(pauses, None)
        if pause is None:
            raise _failure(what, timeout_s, describe)
        time.sleep(pause)


async def async_wait_until(
    condition: Callable[[], T | Awaitable[T | None] | None],
    what: str,
    *,
    timeout_s: float = DEFAULT_WAIT_S,
    poll_s: float = DEFAULT_POLL_S,
    describe: Callable[[], object] | None = None,
    retry_on: tuple[type[Exception], ...] = (),
) -> T:
    """`wait_until` for asyncio tests: sleeps without blocking the loop, and `condition` may be
    a coroutine function (awaited at each check).

    Raises:
        AssertionError: `condition` was not true within `timeout_s`.
    """
    pauses = _pauses(timeout_s, poll_s)
    while True:
        value: T | None = None
        with contextlib.suppress(*retry_on):
            outcome = condition()
            value = await outcome if inspect.isawaitable(outcome) else outcome
        if value:
            return value
        pause = next(pauses, None)
        if pause is None:
            raise _failure(what, timeout_s, describe)
        await asyncio.sleep(pause)
