"""PULL_MESSAGE against a real store on tmp_path: codes, offsets, filters and long polling.

Behaviour follows RocketMQ's `PullMessageProcessor` (wire reference sections 3.2 and 11).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.headers import HeaderError
from pocketmq.broker.long_polling import PullHoldService
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.pull import (
    FLAG_COMMIT_OFFSET,
    FLAG_SUBSCRIPTION,
    FLAG_SUSPEND,
    PullHandler,
    PullHeader,
    PullSettings,
    pull_status_code,
)
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.subscription import parse_subscription
from pocketmq.remoting.command import RemotingCommand
from pocketmq.store.api import GetResult, GetStatus
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore
from tests.unit.broker.pull_support import (
    GROUP,
    TOPIC,
    decode_body,
    open_store,
    pull_request,
    put,
    topic_table,
    trim_oldest_commit_log_file,
)

LONG_MS = 30_000  # a hold that must end by a wake-up, never by its deadline
PUSH_FLAGS = FLAG_SUSPEND | FLAG_SUBSCRIPTION  # what the C++ push consumer sends (6)


class Broker:
    """A store, topics, offsets, a hold service hooked to the dispatcher, and the handler."""

    def __init__(self, store: MessageStore, **handler_options: Any) -> None:
        self.store = store
        self.topics: TopicTable = topic_table()
        self.offsets = ConsumerOffsetTable()
        self.holds = PullHoldService(store.get_max_offset_in_queue)
        store.dispatcher.on_dispatched.append(self.holds.on_dispatched)
        handler_options.setdefault("broker_permission", PERM_READ | PERM_WRITE)
        registered = handler_options.pop("registered_subscription", None)
        self.handler = PullHandler(
            store,
            self.topics,
            self.offsets,
            hold_service=self.holds,
            settings=PullSettings(**handler_options),
            registered_subscription=registered,
        )

    def pull(self, request: RemotingCommand) -> RemotingCommand:
        return asyncio.run(self.handler.handle(request, None))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    opened = open_store(tmp_path / "store")
    yield opened
    opened.close()


@pytest.fixture
def broker(store: MessageStore) -> Broker:
    return Broker(store)


def run(scenario: Callable[[], Coroutine[object, object, None]]) -> None:
    asyncio.run(scenario())


def offsets_of(response: RemotingCommand) -> tuple[int, int, int]:
    ext = response.ext_fields
    return int(ext["nextBeginOffset"]), int(ext["minOffset"]), int(ext["maxOffset"])


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never became true")


# -- reading -----------------------------------------------------------------------------------
def test_found_messages_come_back_as_stored_records_with_all_header_fields(broker: Broker) -> None:
    put(broker.store, 3, queue_id=1)
    response = broker.pull(pull_request(0, queue_id=1))
    assert response.code == ResponseCode.SUCCESS
    assert response.remark == "FOUND"
    assert response.is_response
    assert offsets_of(response) == (3, 0, 3)
    assert response.ext_fields["suggestWhichBrokerId"] == "0"
    assert all(isinstance(value, str) for value in response.ext_fields.values())
    messages = decode_body(response.body)
    assert [m.queue_offset for m in messages] == [0, 1, 2]
    assert [m.body[:2] for m in messages] == [b"m0", b"m1", b"m2"]
    assert {m.topic for m in messages} == {TOPIC}
    stored = broker.store.get_message(TOPIC, 1, 0, 3)
    assert response.body == b"".join(stored.buffers)  # untouched bytes


def test_read_starts_at_the_requested_offset_and_honours_max_msg_nums(broker: Broker) -> None:
    put(broker.store, 10)
    response = broker.pull(pull_request(4, max_msg_nums=3))
    assert response.code == ResponseCode.SUCCESS
    assert [m.queue_offset for m in decode_body(response.body)] == [4, 5, 6]
    assert offsets_of(response) == (7, 0, 10)


def test_one_pull_carries_at_most_the_transfer_count(store: MessageStore) -> None:
    broker = Broker(store, transfer_count_max=5)
    put(store, 8)
    response = broker.pull(pull_request(0, max_msg_nums=1000))
    assert len(decode_body(response.body)) == 5


def test_one_pull_carries_at_most_the_transfer_bytes_but_never_nothing(store: MessageStore) -> None:
    broker = Broker(store, transfer_bytes_max=100)
    put(store, 4, body_bytes=300)
    response = broker.pull(pull_request(0))
    assert response.code == ResponseCode.SUCCESS
    assert len(decode_body(response.body)) == 1
    assert offsets_of(response)[0] == 1


def test_tag_filter_from_the_subscription_field(broker: Broker) -> None:
    for tags in ("TagA", "TagB", "TagC", "TagA", None, "TagB"):
        put(broker.store, tags=tags)
    response = broker.pull(pull_request(0, sys_flag=FLAG_SUBSCRIPTION, subscription="TagA || TagB"))
    assert response.code == ResponseCode.SUCCESS
    messages = decode_body(response.body)
    assert [m.queue_offset for m in messages] == [0, 1, 3, 5]
    assert {m.properties["TAGS"] for m in messages} == {"TagA", "TagB"}
    assert offsets_of(response)[0] == 6


def test_subscription_field_is_ignored_without_the_subscription_flag(broker: Broker) -> None:
    put(broker.store, tags="TagB")
    response = broker.pull(pull_request(0, subscription="TagA"))
    assert response.code == ResponseCode.SUCCESS  # TODO(#3): the heartbeat's subscription
    assert len(decode_body(response.body)) == 1


def test_star_subscription_takes_every_message(broker: Broker) -> None:
    put(broker.store, tags="TagB")
    put(broker.store)
    response = broker.pull(pull_request(0, sys_flag=FLAG_SUBSCRIPTION, subscription="*"))
    assert len(decode_body(response.body)) == 2


def test_all_filtered_out_answers_retry_immediately_past_the_scanned_entries(
    broker: Broker,
) -> None:
    put(broker.store, 4, tags="TagB")
    response = broker.pull(pull_request(0, sys_flag=FLAG_SUBSCRIPTION, subscription="TagA"))
    assert response.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert response.remark == "NO_MATCHED_MESSAGE"
    assert offsets_of(response) == (4, 0, 4)
    assert response.body == b""


# -- nothing to read and offset corrections ----------------------------------------------------
def test_at_the_end_of_the_queue_answers_not_found_at_the_same_offset(broker: Broker) -> None:
    put(broker.store, 2)
    response = broker.pull(pull_request(2))
    assert response.code == ResponseCode.PULL_NOT_FOUND
    assert response.remark == "OFFSET_OVERFLOW_ONE"
    assert offsets_of(response) == (2, 0, 2)
    assert response.ext_fields["suggestWhichBrokerId"] == "0"


def test_empty_queue_from_zero_is_not_found(broker: Broker) -> None:
    response = broker.pull(pull_request(0, queue_id=3))
    assert response.code == ResponseCode.PULL_NOT_FOUND
    assert offsets_of(response) == (0, 0, 0)


def test_empty_queue_from_elsewhere_moves_the_offset_to_zero(broker: Broker) -> None:
    response = broker.pull(pull_request(7, queue_id=3))
    assert response.code == ResponseCode.PULL_OFFSET_MOVED
    assert offsets_of(response)[0] == 0


def test_offset_beyond_the_end_moves_to_the_max_offset(broker: Broker) -> None:
    put(broker.store, 3)
    response = broker.pull(pull_request(50))
    assert response.code == ResponseCode.PULL_OFFSET_MOVED
    assert response.remark == "OFFSET_OVERFLOW_BADLY"
    assert offsets_of(response) == (3, 0, 3)


def test_offset_below_the_min_moves_to_the_min_offset(broker: Broker) -> None:
    store = broker.store
    put(store, 150, body_bytes=1000)  # several 64 KiB CommitLog files
    trim_oldest_commit_log_file(store)
    min_offset = store.get_min_offset_in_queue(TOPIC, 0)
    assert min_offset > 0
    response = broker.pull(pull_request(0))
    assert response.code == ResponseCode.PULL_OFFSET_MOVED
    assert response.remark == "OFFSET_TOO_SMALL"
    assert offsets_of(response) == (min_offset, min_offset, 150)
    assert broker.pull(pull_request(min_offset)).code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("status", "request_offset", "code"),
    [
        (GetStatus.FOUND, 0, ResponseCode.SUCCESS),
        (GetStatus.NO_MATCHED_MESSAGE, 0, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.MESSAGE_WAS_REMOVING, 0, ResponseCode.PULL_RETRY_IMMEDIATELY),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.NO_MESSAGE_IN_QUEUE, 1, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.NO_MATCHED_LOGIC_QUEUE, 5, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_TOO_SMALL, 0, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_OVERFLOW_BADLY, 9, ResponseCode.PULL_OFFSET_MOVED),
        (GetStatus.OFFSET_OVERFLOW_ONE, 9, ResponseCode.PULL_NOT_FOUND),
        (GetStatus.OFFSET_FOUND_NULL, 9, ResponseCode.PULL_NOT_FOUND),
    ],
)
def test_store_status_maps_to_rocketmq_response_code(
    status: GetStatus, request_offset: int, code: ResponseCode
) -> None:
    assert pull_status_code(status, request_offset) is code


def test_every_store_status_has_a_code() -> None:
    for status in GetStatus:
        pull_status_code(status, 1)


def test_far_behind_reader_is_sent_to_a_slave_only_when_slave_read_is_enabled(
    store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(store)

    def far_behind(*args: object, **kwargs: object) -> GetResult:
        return GetResult(GetStatus.FOUND, 1, 0, 1, [b"x" * 4], [0], 4, suggest_slave=True)

    monkeypatch.setattr(store, "get_message", far_behind)
    assert Broker(store).pull(pull_request(0)).ext_fields["suggestWhichBrokerId"] == "0"
    with_slaves = Broker(store, slave_read_enable=True)
    assert with_slaves.pull(pull_request(0)).ext_fields["suggestWhichBrokerId"] == "1"


# -- refusals ----------------------------------------------------------------------------------
def test_unknown_topic_is_topic_not_exist(broker: Broker) -> None:
    response = broker.pull(pull_request(0, topic="Nope"))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert "Nope" in (response.remark or "")


def test_unreadable_topic_is_no_permission(broker: Broker) -> None:
    broker.topics.update(TopicConfig("WriteOnly", 4, 4, PERM_WRITE), 0)
    response = broker.pull(pull_request(0, topic="WriteOnly"))
    assert response.code == ResponseCode.NO_PERMISSION


def test_unreadable_broker_is_no_permission(store: MessageStore) -> None:
    broker = Broker(store, broker_permission=PERM_WRITE)
    assert broker.pull(pull_request(0)).code == ResponseCode.NO_PERMISSION


@pytest.mark.parametrize("queue_id", [-1, 4, 99])
def test_queue_id_outside_the_read_queues_is_a_system_error(broker: Broker, queue_id: int) -> None:
    response = broker.pull(pull_request(0, queue_id=queue_id))
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert f"queueId[{queue_id}] is illegal" in (response.remark or "")


def test_sql92_needs_enable_property_filter(broker: Broker) -> None:
    put(broker.store)
    response = broker.pull(
        pull_request(0, sys_flag=FLAG_SUBSCRIPTION, subscription="a > 1", expression_type="SQL92")
    )
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == "The broker does not support consumer to filter message by SQL92"


def test_sql92_keeps_exactly_the_matching_messages_and_moves_past_the_rest(
    store: MessageStore,
) -> None:
    broker = Broker(store, enable_property_filter=True)
    for tags in ["a", "b", "a", "b", None]:
        put(store, tags=tags)
    response = broker.pull(
        pull_request(
            0, sys_flag=FLAG_SUBSCRIPTION, subscription="TAGS = 'b'", expression_type="SQL92"
        )
    )
    assert response.code == ResponseCode.SUCCESS
    assert [m.queue_offset for m in decode_body(response.body)] == [1, 3]
    assert offsets_of(response)[0] == 5
    none_left = broker.pull(
        pull_request(
            0, sys_flag=FLAG_SUBSCRIPTION, subscription="TAGS = 'zzz'", expression_type="SQL92"
        )
    )
    assert none_left.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert offsets_of(none_left)[0] == 5


def test_bad_sql92_is_subscription_parse_failed_saying_where(store: MessageStore) -> None:
    broker = Broker(store, enable_property_filter=True)
    response = broker.pull(
        pull_request(0, sys_flag=FLAG_SUBSCRIPTION, subscription="a >", expression_type="SQL92")
    )
    assert response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "position 3" in (response.remark or "")


def test_unparsable_subscription_is_subscription_parse_failed(broker: Broker) -> None:
    response = broker.pull(pull_request(0, sys_flag=FLAG_SUBSCRIPTION, subscription="||"))
    assert response.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED


@pytest.mark.parametrize(
    ("field", "value"),
    [("queueOffset", None), ("queueId", "x"), ("maxMsgNums", "1.5"), ("queueOffset", " 1")],
)
def test_bad_header_is_a_system_error_naming_the_field(
    broker: Broker, field: str, value: str | None
) -> None:
    request = pull_request(0)
    if value is None:
        del request.ext_fields[field]
    else:
        request.ext_fields[field] = value
    response = broker.pull(request)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert f"<{field}>" in (response.remark or "")


def test_header_decodes_optional_fields_and_flags() -> None:
    ext = pull_request(
        5, sys_flag=7, commit_offset=3, suspend_timeout_ms=15000, subscription="TagA"
    ).ext_fields
    ext["maxMsgBytes"] = "1024"
    header = PullHeader.decode(ext)
    assert header.queue_offset == 5
    assert header.commit_offset == 3
    assert header.suspend_timeout_ms == 15000
    assert (header.commits_offset, header.may_suspend, header.has_subscription) == (
        True,
        True,
        True,
    )
    assert header.subscription == "TagA"
    assert header.expression_type is None
    assert header.max_msg_bytes == 1024


def test_header_rejects_an_int_field_beyond_32_bits() -> None:
    ext = pull_request(0).ext_fields
    ext["queueId"] = str(1 << 31)
    with pytest.raises(HeaderError):
        PullHeader.decode(ext)


PULL_NUMBER_FIELDS = (
    "queueId",
    "queueOffset",
    "maxMsgNums",
    "sysFlag",
    "commitOffset",
    "suspendTimeoutMillis",
    "subVersion",
)
NUMBER_TEXTS = st.sampled_from(
    ["0", "7", "-1", "+3", "", " 1", "1_0", "٣", "2147483647", "2147483648", "9" * 18, "9" * 19]
) | st.integers(min_value=-(1 << 64), max_value=1 << 64).map(str)


def _decoded(fields: dict[str, str]) -> PullHeader | str:
    try:
        return PullHeader.decode(fields)
    except HeaderError as exc:
        return f"error: {exc}"


def _decoded_carefully(fields: dict[str, str]) -> PullHeader | str:
    try:
        return PullHeader._decode_carefully(fields)
    except HeaderError as exc:
        return f"error: {exc}"


@given(
    st.sampled_from((*PULL_NUMBER_FIELDS, "consumerGroup", "maxMsgBytes")),
    NUMBER_TEXTS | st.none(),
)
def test_the_usual_pull_header_reads_as_the_careful_reading(field: str, value: str | None) -> None:
    """The one-pass reading of the usual header gives the same header, or leaves the field to
    the careful reading, which refuses it: a sign, blanks, other digits, a number beyond its
    Java type, a missing field."""
    fields = dict(pull_request(5, sys_flag=7, commit_offset=3).ext_fields)
    if value is None:
        fields.pop(field, None)
    else:
        fields[field] = value
    assert _decoded(fields) == _decoded_carefully(fields)


# -- commit offset -----------------------------------------------------------------------------
def test_commit_offset_flag_commits_the_consumer_offset(broker: Broker) -> None:
    put(broker.store, 5, queue_id=2)
    broker.pull(pull_request(5, queue_id=2, sys_flag=FLAG_COMMIT_OFFSET, commit_offset=4))
    assert broker.offsets.query(GROUP, TOPIC, 2) == 4


def test_commit_offset_is_ignored_without_the_flag(broker: Broker) -> None:
    broker.pull(pull_request(0, commit_offset=4))
    assert broker.offsets.query(GROUP, TOPIC, 0) is None


def test_refused_pull_commits_nothing(broker: Broker) -> None:
    broker.pull(pull_request(0, queue_id=9, sys_flag=FLAG_COMMIT_OFFSET, commit_offset=4))
    assert broker.offsets.query(GROUP, TOPIC, 9) is None


# -- long polling ------------------------------------------------------------------------------
def test_held_pull_is_answered_by_a_put_long_before_its_timeout(broker: Broker) -> None:
    put(broker.store, 2)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        pull = asyncio.create_task(
            broker.handler.handle(
                pull_request(2, sys_flag=PUSH_FLAGS, suspend_timeout_ms=LONG_MS, subscription="*"),
                None,
            )
        )
        await until(lambda: broker.holds.held_count == 1)
        assert not pull.done()
        put(broker.store)
        response = await pull
        assert loop.time() - started < 1.0
        assert response.code == ResponseCode.SUCCESS
        assert [m.queue_offset for m in decode_body(response.body)] == [2]
        assert offsets_of(response) == (3, 0, 3)

    run(scenario)


def test_held_pull_on_an_empty_queue_wakes_on_its_first_message(broker: Broker) -> None:
    async def scenario() -> None:
        pull = asyncio.create_task(
            broker.handler.handle(
                pull_request(0, queue_id=1, sys_flag=FLAG_SUSPEND, suspend_timeout_ms=LONG_MS),
                None,
            )
        )
        await until(lambda: broker.holds.held_count == 1)
        put(broker.store, queue_id=0)  # another queue: still held
        await asyncio.sleep(0)
        assert not pull.done()
        put(broker.store, queue_id=1)
        response = await pull
        assert response.code == ResponseCode.SUCCESS
        assert len(decode_body(response.body)) == 1

    run(scenario)


def test_held_pull_expires_with_not_found(broker: Broker) -> None:
    put(broker.store, 1)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await broker.handler.handle(
            pull_request(1, sys_flag=PUSH_FLAGS, suspend_timeout_ms=20, subscription="*"), None
        )
        assert loop.time() - started >= 0.015
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert offsets_of(response) == (1, 0, 1)
        assert broker.holds.held_count == 0

    run(scenario)


def test_pull_without_suspend_flag_is_never_held(broker: Broker) -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await broker.handler.handle(
            pull_request(0, sys_flag=FLAG_SUBSCRIPTION, suspend_timeout_ms=LONG_MS), None
        )
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert loop.time() - started < 1.0

    run(scenario)


def test_offset_moved_is_answered_at_once_even_with_suspend(broker: Broker) -> None:
    put(broker.store, 2)

    async def scenario() -> None:
        response = await broker.handler.handle(
            pull_request(9, sys_flag=FLAG_SUSPEND, suspend_timeout_ms=LONG_MS), None
        )
        assert response.code == ResponseCode.PULL_OFFSET_MOVED

    run(scenario)


def test_short_polling_holds_for_short_polling_time_instead(store: MessageStore) -> None:
    broker = Broker(store, long_polling_enable=False, short_polling_ms=20)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await broker.handler.handle(
            pull_request(0, sys_flag=FLAG_SUSPEND, suspend_timeout_ms=LONG_MS), None
        )
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert 0.015 <= loop.time() - started < 1.0

    run(scenario)


def test_held_pull_is_not_answered_by_filtered_out_arrivals(broker: Broker) -> None:
    async def scenario() -> None:
        pull = asyncio.create_task(
            broker.handler.handle(
                pull_request(
                    0, sys_flag=PUSH_FLAGS, suspend_timeout_ms=LONG_MS, subscription="TagA"
                ),
                None,
            )
        )
        await until(lambda: broker.holds.held_count == 1)
        put(broker.store, 2, tags="TagB")
        await until(lambda: broker.holds.held_count == 1)  # woken, re-read, held again
        for _ in range(5):
            await asyncio.sleep(0)
        assert not pull.done()
        put(broker.store, tags="TagA")
        response = await pull
        assert response.code == ResponseCode.SUCCESS
        assert [m.queue_offset for m in decode_body(response.body)] == [2]
        assert offsets_of(response)[0] == 3

    run(scenario)


def test_held_pull_after_filtered_arrivals_expires_past_them(broker: Broker) -> None:
    async def scenario() -> None:
        pull = asyncio.create_task(
            broker.handler.handle(
                pull_request(0, sys_flag=PUSH_FLAGS, suspend_timeout_ms=50, subscription="TagA"),
                None,
            )
        )
        await until(lambda: broker.holds.held_count == 1)
        put(broker.store, 2, tags="TagB")
        response = await pull
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert offsets_of(response)[0] == 2  # the consumer does not scan them again

    run(scenario)


def test_many_concurrent_held_pulls_wake_per_queue(broker: Broker) -> None:
    async def scenario() -> None:
        pulls = {
            (queue_id, group): asyncio.create_task(
                broker.handler.handle(
                    pull_request(
                        0,
                        queue_id=queue_id,
                        group=f"g{group}",
                        sys_flag=PUSH_FLAGS,
                        suspend_timeout_ms=LONG_MS,
                        subscription="*",
                    ),
                    None,
                )
            )
            for queue_id in range(4)
            for group in range(25)
        }
        await until(lambda: broker.holds.held_count == 100)
        put(broker.store, queue_id=1)
        put(broker.store, queue_id=3)
        await until(lambda: broker.holds.held_count == 50)
        for (queue_id, _), pull in pulls.items():
            if queue_id in (1, 3):
                response = await pull
                assert response.code == ResponseCode.SUCCESS
                assert len(decode_body(response.body)) == 1
            else:
                assert not pull.done()
        broker.holds.close()
        for (queue_id, _), pull in pulls.items():
            if queue_id in (0, 2):
                assert (await pull).code == ResponseCode.PULL_NOT_FOUND

    run(scenario)


def test_pulls_past_the_hold_limit_are_answered_at_once(store: MessageStore) -> None:
    broker = Broker(store)
    broker.holds = PullHoldService(store.get_max_offset_in_queue, max_held=1)
    broker.handler = PullHandler(
        store,
        broker.topics,
        broker.offsets,
        hold_service=broker.holds,
        settings=PullSettings(broker_permission=PERM_READ),
    )

    async def scenario() -> None:
        request = pull_request(0, sys_flag=FLAG_SUSPEND, suspend_timeout_ms=LONG_MS)
        held = asyncio.create_task(broker.handler.handle(request, None))
        await until(lambda: broker.holds.held_count == 1)
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await broker.handler.handle(request, None)
        assert response.code == ResponseCode.PULL_NOT_FOUND
        assert loop.time() - started < 1.0
        held.cancel()
        with pytest.raises(asyncio.CancelledError):
            await held

    run(scenario)


def test_cancelled_held_pull_leaves_no_waiter(broker: Broker) -> None:
    async def scenario() -> None:
        pull = asyncio.create_task(
            broker.handler.handle(
                pull_request(0, sys_flag=FLAG_SUSPEND, suspend_timeout_ms=LONG_MS), None
            )
        )
        await until(lambda: broker.holds.held_count == 1)
        pull.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pull
        assert broker.holds.held_count == 0
        assert broker.holds.notify(TOPIC, 0, 100) == 0

    run(scenario)


def test_held_pull_leaves_other_requests_on_the_loop_free(broker: Broker) -> None:
    put(broker.store, 3, queue_id=2)

    async def scenario() -> None:
        held = asyncio.create_task(
            broker.handler.handle(
                pull_request(0, sys_flag=FLAG_SUSPEND, suspend_timeout_ms=LONG_MS), None
            )
        )
        await until(lambda: broker.holds.held_count == 1)
        other = await broker.handler.handle(pull_request(0, queue_id=2), None)
        assert other.code == ResponseCode.SUCCESS
        assert not held.done()
        broker.holds.close()
        assert (await held).code == ResponseCode.PULL_NOT_FOUND

    run(scenario)


def test_pull_without_subscription_uses_the_one_the_heartbeat_registered(
    store: MessageStore,
) -> None:
    """Java push consumers leave the subscription out of pulls; their heartbeat carries it."""
    registered = {(GROUP, TOPIC): parse_subscription(TOPIC, "TagA")}
    broker = Broker(store, registered_subscription=lambda g, t: registered.get((g, t)))
    put(store, 2, tags="TagA")
    put(store, 2, tags="TagB")
    response = broker.pull(pull_request(0))
    assert [m.properties["TAGS"] for m in decode_body(response.body)] == ["TagA", "TagA"]
    unknown_group = broker.pull(pull_request(0, group="other"))
    assert len(decode_body(unknown_group.body)) == 4


def test_pull_settings_come_from_the_broker_and_store_settings() -> None:
    config = BrokerConfig(
        broker_permission=PERM_READ,
        long_polling_enable=False,
        enable_property_filter=True,
        short_polling_time_mills=250,
        slave_read_enable=True,
    )
    store_config = MessageStoreConfig(
        max_transfer_count_on_message_in_memory=7, max_transfer_bytes_on_message_in_memory=4096
    )
    assert PullSettings.from_config(config, store_config) == PullSettings(
        broker_permission=PERM_READ,
        long_polling_enable=False,
        enable_property_filter=True,
        short_polling_ms=250,
        slave_read_enable=True,
        transfer_count_max=7,
        transfer_bytes_max=4096,
    )
