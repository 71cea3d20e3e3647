"""PullHoldService: held pulls wake on arrival, expire on their deadline, and clean up."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine

import pytest

from pocketmq.broker.long_polling import PullHoldService
from pocketmq.common.constants import TRANSACTION_PREPARED_TYPE
from pocketmq.store.dispatch import DispatchRequest

QueueKey = tuple[str, int]
LONG_S = 30.0  # a hold that must be ended by a wake-up, never by its deadline


class Queues:
    """Max offsets by queue, moved by hand; `arrive` also notifies like the dispatcher."""

    def __init__(self) -> None:
        self.max_offsets: dict[QueueKey, int] = {}
        self.service = PullHoldService(self.max_offset_of, max_held=8)

    def max_offset_of(self, topic: str, queue_id: int) -> int:
        return self.max_offsets.get((topic, queue_id), 0)

    def arrive(self, topic: str, queue_id: int, count: int = 1) -> int:
        key = (topic, queue_id)
        self.max_offsets[key] = self.max_offsets.get(key, 0) + count
        return self.service.notify(topic, queue_id, self.max_offsets[key])


async def until(condition: Callable[[], bool]) -> None:
    """Lets other tasks run until `condition` holds (bounded)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


def run(scenario: Callable[[], Coroutine[object, object, None]]) -> None:
    asyncio.run(scenario())


def test_returns_at_once_when_the_queue_is_already_past_the_offset() -> None:
    queues = Queues()
    queues.max_offsets[("T", 0)] = 3

    async def scenario() -> None:
        assert await queues.service.hold("T", 0, 2, LONG_S)
        assert queues.service.held_count == 0

    run(scenario)


def test_arrival_wakes_a_held_pull_long_before_its_deadline() -> None:
    queues = Queues()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        task = asyncio.create_task(queues.service.hold("T", 0, 0, LONG_S))
        await until(lambda: queues.service.held_count == 1)
        assert queues.arrive("T", 0) == 1
        assert await task is True
        assert loop.time() - started < 1.0
        assert queues.service.held_count == 0

    run(scenario)


def test_hold_expires_at_its_deadline_and_answers_false() -> None:
    queues = Queues()

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await queues.service.hold("T", 0, 0, 0.02) is False
        assert loop.time() - started >= 0.015
        assert queues.service.held_count == 0
        assert queues.service.notify("T", 0, 10) == 0  # nothing left registered

    run(scenario)


def test_zero_timeout_does_not_wait() -> None:
    queues = Queues()

    async def scenario() -> None:
        assert await queues.service.hold("T", 0, 0, 0) is False
        assert await queues.service.hold("T", 0, 0, -5) is False

    run(scenario)


def test_notify_wakes_only_waiters_below_the_new_max_offset_of_that_queue() -> None:
    queues = Queues()
    service = queues.service

    async def scenario() -> None:
        at0 = asyncio.create_task(service.hold("T", 0, 0, LONG_S))
        at1 = asyncio.create_task(service.hold("T", 0, 1, LONG_S))
        other_queue = asyncio.create_task(service.hold("T", 1, 0, LONG_S))
        other_topic = asyncio.create_task(service.hold("U", 0, 0, LONG_S))
        await until(lambda: service.held_count == 4)
        assert queues.arrive("T", 0) == 1  # max offset 1: only the waiter for offset 0
        assert await at0 is True
        await asyncio.sleep(0)
        assert not at1.done()
        assert not other_queue.done()
        assert not other_topic.done()
        assert queues.arrive("T", 0) == 1
        assert await at1 is True
        assert service.held_count == 2
        service.close()
        assert await other_queue is False
        assert await other_topic is False

    run(scenario)


def test_cancelled_hold_leaves_nothing_registered() -> None:
    queues = Queues()
    service = queues.service

    async def scenario() -> None:
        task = asyncio.create_task(service.hold("T", 0, 0, LONG_S))
        await until(lambda: service.held_count == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert service.held_count == 0
        assert queues.arrive("T", 0) == 0

    run(scenario)


def test_past_max_held_a_hold_returns_at_once() -> None:
    queues = Queues()
    service = queues.service

    async def scenario() -> None:
        tasks = [asyncio.create_task(service.hold("T", q % 2, 0, LONG_S)) for q in range(8)]
        await until(lambda: service.held_count == 8)
        assert service.is_full
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await service.hold("T", 0, 0, LONG_S) is False
        assert loop.time() - started < 1.0
        assert service.rejected_count == 1
        assert queues.arrive("T", 0) == 4
        assert queues.arrive("T", 1) == 4
        assert all(await asyncio.gather(*tasks))
        assert service.held_count == 0

    run(scenario)


def test_many_concurrent_holds_each_wake_with_their_own_queue() -> None:
    queues = Queues()
    service = PullHoldService(queues.max_offset_of, max_held=10_000)
    queues.service = service

    async def scenario() -> None:
        tasks = {
            (queue_id, n): asyncio.create_task(service.hold("T", queue_id, 0, LONG_S))
            for queue_id in range(50)
            for n in range(20)
        }
        await until(lambda: service.held_count == 1000)
        for queue_id in range(0, 50, 2):
            assert queues.arrive("T", queue_id) == 20
        await asyncio.sleep(0)
        for (queue_id, _), task in tasks.items():
            assert task.done() == (queue_id % 2 == 0)
        assert service.held_count == 500
        service.close()
        assert sum(await asyncio.gather(*tasks.values())) == 500

    run(scenario)


def test_dispatch_listener_wakes_holders_of_the_dispatched_queue() -> None:
    queues = Queues()
    service = queues.service

    def dispatched(topic: str, queue_id: int, queue_offset: int, sys_flag: int) -> None:
        queues.max_offsets[(topic, queue_id)] = queue_offset + 1
        service.on_dispatched(
            [DispatchRequest(topic, queue_id, 0, 100, 0, 0, queue_offset, "", None, sys_flag, "")]
        )

    async def scenario() -> None:
        task = asyncio.create_task(service.hold("T", 2, 0, LONG_S))
        await until(lambda: service.held_count == 1)
        dispatched("T", 1, 0, 0)
        await asyncio.sleep(0)
        assert not task.done()
        dispatched("T", 2, 0, 0)
        assert await task is True

    run(scenario)


def test_a_run_wakes_each_queue_once_with_its_newest_entry_and_skips_unconsumable_ones() -> None:
    """Dispatch hands its listeners runs of records: every queue of the run with pulls waiting
    hears its newest entry; prepared transactions take no entry and wake nobody."""
    queues = Queues()
    service = queues.service

    def entry(topic: str, queue_id: int, queue_offset: int, sys_flag: int = 0) -> DispatchRequest:
        queues.max_offsets[(topic, queue_id)] = max(
            queues.max_offset_of(topic, queue_id), queue_offset + 1
        )
        return DispatchRequest(topic, queue_id, 0, 100, 0, 0, queue_offset, "", None, sys_flag, "")

    async def scenario() -> None:
        past_two = asyncio.create_task(service.hold("T", 1, 2, LONG_S))
        behind_prepared = asyncio.create_task(service.hold("T", 2, 0, LONG_S))
        elsewhere = asyncio.create_task(service.hold("U", 0, 0, LONG_S))
        await until(lambda: service.held_count == 3)
        run = [entry("T", 1, n) for n in range(3)]
        prepared = DispatchRequest("T", 2, 0, 100, 0, 0, 0, "", None, TRANSACTION_PREPARED_TYPE, "")
        service.on_dispatched([*run, prepared, entry("T", 1, 1)])  # a replay of an older one
        assert await past_two is True
        await asyncio.sleep(0)
        assert not behind_prepared.done()
        assert not elsewhere.done()
        assert service.held_count == 2
        service.close()
        await asyncio.gather(behind_prepared, elsewhere)

    run(scenario)


def test_closed_service_refuses_new_holds() -> None:
    queues = Queues()

    async def scenario() -> None:
        queues.service.close()
        assert await queues.service.hold("T", 0, 0, LONG_S) is False

    run(scenario)
