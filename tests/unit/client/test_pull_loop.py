"""The pull loop shared by the push and the lite pull consumer, the assignment diff, and the
lite pull consumer's poll buffer."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from pocketmq.client.consumer import pull_loop
from pocketmq.client.consumer.assignment import diff, start_timestamp_ms
from pocketmq.client.consumer.poll_buffer import Batch, PollBuffer, PollFeed, QueueState
from pocketmq.client.consumer.pull_request import PullResult, PullStatus
from pocketmq.client.errors import ConnectionFailedError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.subscription import SubscriptionData, parse_subscription

QUEUE = MessageQueue("TopicTest", "broker-a", 0)
OTHER = MessageQueue("TopicTest", "broker-a", 1)


class FakeInstance:
    def __init__(self) -> None:
        self.routes_fetched: list[str] = []

    async def fetch_route(self, topic: str) -> None:
        self.routes_fetched.append(topic)


class RecordingFeed:
    """A feed that stops after `pulls` results and records what it was given."""

    def __init__(self, pulls: int) -> None:
        self.queue = QUEUE
        self.next_offset = 0
        self.pulls_left = pulls
        self.holds = 0
        self.results: list[PullResult] = []
        self.moved: list[PullResult] = []

    @property
    def dropped(self) -> bool:
        return self.pulls_left <= 0

    def hold_s(self) -> float:
        if self.holds:
            self.holds -= 1
            return 0.001
        return 0.0

    def subscription(self) -> SubscriptionData:
        return parse_subscription(QUEUE.topic, "*")

    def commit_offset(self) -> int:
        return 0

    async def found(self, result: PullResult) -> None:
        self.results.append(result)
        self.pulls_left -= 1

    async def offset_moved(self, result: PullResult) -> None:
        self.moved.append(result)
        self.pulls_left -= 1


def _result(status: PullStatus, next_offset: int) -> PullResult:
    return PullResult(status, next_offset, 0, next_offset, [])


def _message(offset: int, queue: MessageQueue = QUEUE) -> MessageExt:
    return cast(MessageExt, _FakeMessage(offset, queue))


class _FakeMessage:
    def __init__(self, offset: int, queue: MessageQueue) -> None:
        self.queue_offset = offset
        self.queue = queue


def test_a_broker_error_backs_off_refreshes_the_route_and_pulls_again(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    answers: list[PullResult | Exception] = [
        ConnectionFailedError("broker gone"),
        _result(PullStatus.NO_NEW_MSG, 5),
        _result(PullStatus.OFFSET_ILLEGAL, 9),
    ]

    async def fake_pull(*args: Any, **kwargs: Any) -> PullResult:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(pull_loop, "pull", fake_pull)
    monkeypatch.setattr(pull_loop, "PULL_DELAY_ON_ERROR_S", 0.0)
    instance = FakeInstance()
    feed = RecordingFeed(pulls=2)
    feed.holds = 2
    asyncio.run(pull_loop.run_pull_loop(cast(ClientInstance, instance), "g", feed, batch_size=32))
    assert instance.routes_fetched == [QUEUE.topic]
    assert [r.next_begin_offset for r in feed.results] == [5]
    assert [r.next_begin_offset for r in feed.moved] == [9]
    assert "pull of" in caplog.text
    assert "broker gone" in caplog.text
    assert "is gone (queue holds" in caplog.text


@pytest.mark.parametrize(
    ("names_delay", "line"),
    [(False, "failed unexpectedly; retrying"), (True, "failed; retrying in 0 s")],
)
def test_a_bug_in_a_pull_is_logged_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    names_delay: bool,
    line: str,
) -> None:
    answers: list[PullResult | Exception] = [ValueError("bug"), _result(PullStatus.FOUND, 3)]

    async def fake_pull(*args: Any, **kwargs: Any) -> PullResult:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(pull_loop, "pull", fake_pull)
    monkeypatch.setattr(pull_loop, "PULL_DELAY_ON_ERROR_S", 0.0)
    feed = RecordingFeed(pulls=1)
    asyncio.run(
        pull_loop.run_pull_loop(
            cast(ClientInstance, FakeInstance()),
            "g",
            feed,
            batch_size=32,
            log_names_delay=names_delay,
        )
    )
    assert len(feed.results) == 1
    assert line in caplog.text


def test_the_diff_sorts_added_queues_and_keeps_the_order_of_removed_ones() -> None:
    a, b, c = (MessageQueue("T", "broker-a", i) for i in range(3))
    added, removed = diff([c, a], {b, OTHER, QUEUE})
    assert added == sorted([b, OTHER, QUEUE])
    assert removed == [c, a]
    assert start_timestamp_ms(None, 10_000_000) == 10_000_000 - 30 * 60 * 1000
    assert start_timestamp_ms(5, 10_000_000) == 5


def test_the_poll_buffer_splits_batches_in_queue_order_and_holds_paused_queues() -> None:
    async def scenario() -> list[list[int]]:
        buffer = PollBuffer(batch_max=2)
        first, second = QueueState(QUEUE, 0), QueueState(OTHER, 0)
        await buffer.put(Batch(first, [_message(0), _message(1), _message(2)], 3))
        await buffer.put(Batch(second, [_message(0, OTHER)], 1))
        buffer.pause([OTHER])
        polls = [[m.queue_offset for m in await buffer.take(0.01, lambda: True)] for _ in range(2)]
        assert first.consumed_offset == 3
        assert first.buffered_count == 0
        assert await buffer.take(0.01, lambda: True) == []
        buffer.resume([OTHER])
        polls.append([m.queue_offset for m in await buffer.take(0.01, lambda: True)])
        stale = QueueState(QUEUE, 3)
        await buffer.put(Batch(stale, [_message(3)], 4))
        stale.dropped = True
        polls.append([m.queue_offset for m in await buffer.take(0.01, lambda: True)])
        return polls

    assert asyncio.run(scenario()) == [[0, 1], [2], [0], []]


def test_a_paused_or_full_queue_is_not_pulled() -> None:
    buffer = PollBuffer(batch_max=2)
    state = QueueState(QUEUE, 0)
    feed = PollFeed(state, buffer, lambda: parse_subscription(QUEUE.topic, "*"), pull_threshold=2)
    assert feed.hold_s() == 0.0
    buffer.pause([QUEUE])
    assert feed.hold_s() > 0
    buffer.resume([QUEUE])
    state.buffered_count = 2
    assert feed.hold_s() == pull_loop.FLOW_CONTROL_DELAY_S
