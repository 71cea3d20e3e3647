"""Offset requests against a real store (wire reference section 3.3, checklist item 11)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.broker.offset_handlers import OffsetHandlers
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetResult, GetStatus
from pocketmq.store.message_store import MessageStore
from tests.unit.broker.pull_support import (
    GROUP,
    TOPIC,
    open_store,
    put,
    topic_table,
    trim_oldest_commit_log_file,
)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(now_ms=1_700_000_000_000)


@pytest.fixture
def store(tmp_path: Path, clock: ManualClock) -> Iterator[MessageStore]:
    opened = open_store(tmp_path / "store", clock)
    yield opened
    opened.close()


@pytest.fixture
def offsets() -> ConsumerOffsetTable:
    return ConsumerOffsetTable()


@pytest.fixture
def handlers(store: MessageStore, offsets: ConsumerOffsetTable) -> OffsetHandlers:
    return OffsetHandlers(store, offsets, topic_table())


def answer(handlers: OffsetHandlers, request: RemotingCommand) -> RemotingCommand:
    async def handle() -> RemotingCommand:
        return await handlers.routes()[request.code](request, None)

    response = asyncio.run(handle())
    assert response.is_response
    return response


def call(handlers: OffsetHandlers, code: RequestCode, /, **ext: str) -> RemotingCommand:
    return answer(handlers, RemotingCommand.request(code, ext))


def query(handlers: OffsetHandlers, queue_id: int = 0, **extra: str) -> RemotingCommand:
    return call(
        handlers,
        RequestCode.QUERY_CONSUMER_OFFSET,
        consumerGroup=GROUP,
        topic=TOPIC,
        queueId=str(queue_id),
        **extra,
    )


# -- QUERY_CONSUMER_OFFSET / UPDATE_CONSUMER_OFFSET ---------------------------------------------
def test_committed_offset_is_returned(
    handlers: OffsetHandlers, offsets: ConsumerOffsetTable
) -> None:
    offsets.commit(GROUP, TOPIC, 1, 42)
    response = query(handlers, 1)
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"offset": "42"}


def test_new_group_on_a_young_queue_starts_at_zero(
    handlers: OffsetHandlers, store: MessageStore
) -> None:
    """The "offset 0 still in memory" rule: the C++ client skips old messages without it."""
    put(store, 5)
    response = query(handlers)
    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields["offset"] == "0"


def test_new_group_on_an_empty_queue_starts_at_zero(handlers: OffsetHandlers) -> None:
    response = query(handlers, 3)
    assert (response.code, response.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")


def test_set_zero_if_not_found_false_turns_the_rule_off(
    handlers: OffsetHandlers, store: MessageStore
) -> None:
    put(store)
    response = query(handlers, setZeroIfNotFound="false")
    assert response.code == ResponseCode.QUERY_NOT_FOUND
    assert "offset" not in response.ext_fields
    assert query(handlers, setZeroIfNotFound="TRUE").code == ResponseCode.SUCCESS


def test_queue_that_no_longer_starts_at_zero_is_not_found(
    handlers: OffsetHandlers, store: MessageStore
) -> None:
    put(store, 150, body_bytes=1000)
    trim_oldest_commit_log_file(store)
    assert store.get_min_offset_in_queue(TOPIC, 0) > 0
    assert query(handlers).code == ResponseCode.QUERY_NOT_FOUND


def test_first_message_far_behind_the_head_is_not_found(
    handlers: OffsetHandlers, store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(store)

    def far_behind(*args: object, **kwargs: object) -> GetResult:
        return GetResult(GetStatus.FOUND, 1, 0, 1, [b"x"], [0], 1, suggest_slave=True)

    monkeypatch.setattr(store, "get_message", far_behind)
    assert query(handlers).code == ResponseCode.QUERY_NOT_FOUND


def test_update_commits_the_offset(handlers: OffsetHandlers, offsets: ConsumerOffsetTable) -> None:
    response = call(
        handlers,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        consumerGroup=GROUP,
        topic=TOPIC,
        queueId="2",
        commitOffset="17",
    )
    assert response.code == ResponseCode.SUCCESS
    assert offsets.query(GROUP, TOPIC, 2) == 17
    assert query(handlers, 2).ext_fields["offset"] == "17"


def test_oneway_update_commits_too(handlers: OffsetHandlers, offsets: ConsumerOffsetTable) -> None:
    ext = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "5"}
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, ext, oneway=True)
    answer(handlers, request)  # the transport drops the answer to a oneway request
    assert offsets.query(GROUP, TOPIC, 0) == 5


def test_update_for_an_unknown_topic_is_topic_not_exist(
    handlers: OffsetHandlers, offsets: ConsumerOffsetTable
) -> None:
    response = call(
        handlers,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        consumerGroup=GROUP,
        topic="Nope",
        queueId="0",
        commitOffset="5",
    )
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert offsets.query(GROUP, "Nope", 0) is None


def test_update_without_commit_offset_is_a_system_error(handlers: OffsetHandlers) -> None:
    response = call(
        handlers, RequestCode.UPDATE_CONSUMER_OFFSET, consumerGroup=GROUP, topic=TOPIC, queueId="0"
    )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "<commitOffset>" in (response.remark or "")


# -- queue bounds ------------------------------------------------------------------------------
def test_max_and_min_offsets_of_a_queue(handlers: OffsetHandlers, store: MessageStore) -> None:
    put(store, 4, queue_id=1)
    max_offset = call(handlers, RequestCode.GET_MAX_OFFSET, topic=TOPIC, queueId="1")
    assert (max_offset.code, max_offset.ext_fields) == (ResponseCode.SUCCESS, {"offset": "4"})
    min_offset = call(handlers, RequestCode.GET_MIN_OFFSET, topic=TOPIC, queueId="1")
    assert min_offset.ext_fields == {"offset": "0"}
    committed = call(
        handlers, RequestCode.GET_MAX_OFFSET, topic=TOPIC, queueId="1", committed="false"
    )
    assert committed.ext_fields == {"offset": "4"}


def test_bounds_of_an_unknown_queue_are_zero(handlers: OffsetHandlers) -> None:
    for code in (RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET):
        assert call(handlers, code, topic="Nope", queueId="0").ext_fields == {"offset": "0"}


def test_min_offset_follows_retention(handlers: OffsetHandlers, store: MessageStore) -> None:
    put(store, 150, body_bytes=1000)
    trim_oldest_commit_log_file(store)
    response = call(handlers, RequestCode.GET_MIN_OFFSET, topic=TOPIC, queueId="0")
    assert int(response.ext_fields["offset"]) == store.get_min_offset_in_queue(TOPIC, 0) > 0


def test_bad_queue_id_is_a_system_error(handlers: OffsetHandlers) -> None:
    response = call(handlers, RequestCode.GET_MAX_OFFSET, topic=TOPIC, queueId="one")
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "<queueId>" in (response.remark or "")


def test_search_by_timestamp_lower_and_upper_boundaries(
    handlers: OffsetHandlers, store: MessageStore, clock: ManualClock
) -> None:
    start = clock.now_ms()
    for _ in range(3):  # offsets 0, 1, 2 at start; 3, 4, 5 at start+1000; 6, 7, 8 at start+2000
        put(store, 3)
        clock.advance(1.0)

    def search(timestamp_ms: int, boundary: str | None = None) -> int:
        ext = {"topic": TOPIC, "queueId": "0", "timestamp": str(timestamp_ms)}
        if boundary is not None:
            ext["boundaryType"] = boundary
        response = call(handlers, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, **ext)
        assert response.code == ResponseCode.SUCCESS
        return int(response.ext_fields["offset"])

    assert search(start + 1000) == 3
    assert search(start + 1000, "LOWER") == 3
    assert search(start + 500) == 3
    assert search(start + 1000, "UPPER") == 5
    assert search(start + 1500, "upper") == 5
    assert search(start - 1) == 0
    assert search(start - 1, "UPPER") == 0
    assert search(start + 9000) == 9
    assert search(start + 9000, "UPPER") == 8


def test_earliest_message_store_time(
    handlers: OffsetHandlers, store: MessageStore, clock: ManualClock
) -> None:
    first = clock.now_ms()
    put(store)
    clock.advance(5.0)
    put(store)
    response = call(handlers, RequestCode.GET_EARLIEST_MSG_STORETIME, topic=TOPIC, queueId="0")
    assert (response.code, response.ext_fields) == (ResponseCode.SUCCESS, {"timestamp": str(first)})
    empty = call(handlers, RequestCode.GET_EARLIEST_MSG_STORETIME, topic=TOPIC, queueId="3")
    assert empty.ext_fields == {"timestamp": "-1"}


def test_routes_cover_the_six_offset_request_codes(handlers: OffsetHandlers) -> None:
    assert set(handlers.routes()) == {
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
        RequestCode.GET_MAX_OFFSET,
        RequestCode.GET_MIN_OFFSET,
        RequestCode.GET_EARLIEST_MSG_STORETIME,
    }
