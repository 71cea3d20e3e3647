"""wait_until and async_wait_until: return the first true value, fail with what was awaited."""

from __future__ import annotations

import asyncio
import time

import pytest

from pocketmq.testing import DEFAULT_WAIT_S, async_wait_until, wait_until
from pocketmq.testing.waiting import MAX_POLL_S


def test_the_default_wait_covers_the_longest_wait_the_suite_had() -> None:
    assert DEFAULT_WAIT_S >= 30.0


def test_wait_until_returns_the_first_true_value() -> None:
    answers = iter([0, None, "", "ready", "later"])
    assert wait_until(lambda: next(answers), "an answer", poll_s=0.001) == "ready"


def test_wait_until_fails_with_what_was_awaited_and_the_last_state() -> None:
    calls = []

    def never() -> bool:
        calls.append(1)
        return False

    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"not within 0.1 s: the moon; last state: 3 probes"):
        wait_until(never, "the moon", timeout_s=0.1, poll_s=0.01, describe=lambda: "3 probes")
    assert time.monotonic() - started < 2
    assert 2 <= len(calls) <= 12  # bounded in count as well as in time


def test_wait_until_checks_once_even_with_no_time() -> None:
    assert wait_until(lambda: 7, "seven", timeout_s=0)
    with pytest.raises(AssertionError):
        wait_until(lambda: 0, "zero", timeout_s=0)


def test_wait_until_retries_only_the_named_exceptions() -> None:
    answers = iter([ConnectionError(), ConnectionError(), 5])

    def flaky() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_until(flaky, "five", poll_s=0.001, retry_on=(ConnectionError,)) == 5
    with pytest.raises(KeyError):
        wait_until(lambda: {}["x"], "x", poll_s=0.001)


def test_wait_until_refuses_nonsense_limits() -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        wait_until(lambda: True, "x", timeout_s=-1)
    with pytest.raises(ValueError, match="poll_s"):
        wait_until(lambda: True, "x", poll_s=0)


def test_a_long_poll_interval_is_capped() -> None:
    answers = iter([False, True])
    started = time.monotonic()
    assert wait_until(lambda: next(answers), "x", poll_s=60)
    assert time.monotonic() - started < MAX_POLL_S + 0.5


def test_async_wait_until_awaits_coroutine_conditions() -> None:
    state = {"n": 0}

    async def grows() -> int:
        state["n"] += 1
        return state["n"] if state["n"] >= 3 else 0

    assert asyncio.run(async_wait_until(grows, "three", poll_s=0.001)) == 3


def test_async_wait_until_takes_plain_conditions_and_lets_the_loop_run() -> None:
    async def scenario() -> None:
        done = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, done.set)
        await async_wait_until(done.is_set, "the timer", timeout_s=5, poll_s=0.01)

    asyncio.run(scenario())


def test_async_wait_until_fails_with_the_last_state() -> None:
    with pytest.raises(AssertionError, match=r"not within 0.05 s: nothing; last state: empty"):
        asyncio.run(
            async_wait_until(
                lambda: None, "nothing", timeout_s=0.05, poll_s=0.01, describe=lambda: "empty"
            )
        )
