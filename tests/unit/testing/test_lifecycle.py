"""started(): clients run for the block and are stopped however it ends."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.testing import started


class AsyncClient:
    def __init__(self, name: str, log: list[str], fail: str = "") -> None:
        self.name, self.log, self.fail = name, log, fail

    async def start(self) -> None:
        if self.fail == "start":
            raise RuntimeError(f"{self.name} cannot start")
        self.log.append(f"start {self.name}")

    async def close(self) -> None:
        self.log.append(f"close {self.name}")
        if self.fail == "close":
            raise RuntimeError(f"{self.name} cannot close")


class BlockingStopOnly:
    """Like an AdminClient: nothing to start; stopping is a plain `shutdown`."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def shutdown(self) -> None:
        self.log.append("shutdown admin")


def test_clients_start_in_order_and_stop_in_reverse() -> None:
    log: list[str] = []

    async def scenario() -> None:
        async with started(AsyncClient("a", log), BlockingStopOnly(log), AsyncClient("b", log)):
            log.append("body")

    asyncio.run(scenario())
    assert log == ["start a", "start b", "body", "close b", "shutdown admin", "close a"]


def test_a_failing_body_still_stops_every_client() -> None:
    log: list[str] = []

    async def scenario() -> None:
        async with started(AsyncClient("a", log)):
            raise KeyError("boom")

    with pytest.raises(KeyError):
        asyncio.run(scenario())
    assert log == ["start a", "close a"]


def test_a_failed_start_stops_the_clients_already_started() -> None:
    log: list[str] = []

    async def scenario() -> None:
        async with started(AsyncClient("a", log), AsyncClient("b", log, fail="start")):
            log.append("body")

    with pytest.raises(RuntimeError, match="b cannot start"):
        asyncio.run(scenario())
    assert log == ["start a", "close a"]


def test_a_failing_stop_does_not_keep_the_others_running() -> None:
    log: list[str] = []

    async def scenario() -> None:
        async with started(AsyncClient("a", log), AsyncClient("b", log, fail="close")):
            pass

    with pytest.raises(RuntimeError, match="b cannot close"):
        asyncio.run(scenario())
    assert log == ["start a", "start b", "close b", "close a"]


def test_an_object_that_cannot_stop_is_refused_before_anything_starts() -> None:
    log: list[str] = []

    async def scenario() -> None:
        async with started(AsyncClient("a", log), object()):
            pass

    with pytest.raises(TypeError, match="close, shutdown, stop"):
        asyncio.run(scenario())
    assert log == []
