"""The pure parts of the client: message encoding, ids, send answers, pull answers, routes,
queue choice and the commit point of a consumed queue."""

from __future__ import annotations

import zlib
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_request import PullStatus, read_pull_response
from pocketmq.client.errors import (
    BrokerBusyError,
    MessageError,
    ProtocolError,
    TopicNotFoundError,
)
from pocketmq.client.message import Message, MessageExt, MessageQueue, SendStatus, UniqueIdGenerator
from pocketmq.client.producer.fault import QueueChooser, unavailable_ms
from pocketmq.client.producer.wire import (
    prepare_batch,
    prepare_message,
    read_send_response,
    split_batch_result,
)
from pocketmq.client.route_cache import RouteCache, publish_queues, subscribe_queues
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import COMPRESSED_FLAG, PERM_READ, PERM_WRITE
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.route import BrokerData, QueueData, TopicRouteData
from pocketmq.common.stored_message import encode_record, pack_host
from pocketmq.common.subscription import parse_subscription
from pocketmq.remoting.command import RemotingCommand

NOW_MS = 1_763_800_000_000
QUEUE = MessageQueue("T", "broker-a", 1)


def _ids() -> UniqueIdGenerator:
    return UniqueIdGenerator("10.0.0.7", 0xABCDEF)


# -- messages and ids ----------------------------------------------------------------------


def test_unique_ids_are_32_upper_hex_and_distinct() -> None:
    ids = _ids()
    made = [ids.next(NOW_MS + i // 100) for i in range(5000)]
    assert len(set(made)) == len(made)
    assert all(len(i) == 32 and i == i.upper() and int(i, 16) >= 0 for i in made)
    assert made[0].startswith("0A000007")  # the client's IPv4 address comes first


@given(
    st.lists(
        st.tuples(st.integers(-40 * 86_400_000, 40 * 86_400_000), st.integers(0, 70_000)),
        min_size=1,
        max_size=6,
    )
)
def test_many_ids_at_once_are_the_ids_one_at_a_time(calls: list[tuple[int, int]]) -> None:
    """Across counter wraps and month starts, in both directions of the clock."""
    many, single = _ids(), _ids()
    for shift_ms, count in calls:
        now_ms = NOW_MS + shift_ms
        assert many.next_many(now_ms, count) == [single.next(now_ms) for _ in range(count)]


@given(
    st.dictionaries(
        st.text(st.characters(blacklist_characters="\x01\x02"), min_size=1, max_size=8).filter(
            lambda k: k not in {"TAGS", "KEYS", "DELAY", "WAIT", "UNIQ_KEY"}
        ),
        st.text(st.characters(blacklist_characters="\x01\x02"), min_size=1, max_size=8),
        max_size=5,
    )
)
def test_properties_survive_encoding(properties: dict[str, str]) -> None:
    message = Message("T", b"x", tags="t", keys=["a", "b"], properties=properties, delay_level=3)
    decoded = decode_properties(message.encode_properties("ID"))
    assert decoded == {**properties, "TAGS": "t", "KEYS": "a b", "DELAY": "3", "UNIQ_KEY": "ID"}


def test_system_keys_in_user_properties_are_refused() -> None:
    with pytest.raises(ValueError, match="use the Message fields"):
        Message("T", b"x", properties={"KEYS": "k"}).encode_properties("ID")


def test_large_bodies_are_compressed_and_small_ones_not() -> None:
    large = prepare_message(Message("T", b"a" * 10_000), _ids(), NOW_MS)
    small = prepare_message(Message("T", b"a" * 100), _ids(), NOW_MS)
    assert large.sys_flag & COMPRESSED_FLAG
    assert zlib.decompress(large.body) == b"a" * 10_000
    assert small.sys_flag == 0
    assert small.body == b"a" * 100


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (Message("T", b""), "body is empty"),
        (Message("T", b"x" * 101), "over the 100-byte limit"),
        (Message("bad topic", b"x"), "illegal characters"),
        (Message("T", b"x", properties={"k": "a\x01b"}), "separator"),
    ],
)
def test_bad_messages_are_refused_before_sending(message: Message, error: str) -> None:
    with pytest.raises(MessageError, match=error):
        prepare_message(message, _ids(), NOW_MS, max_message_bytes=100)


def test_batches_hold_one_topic_and_no_delays() -> None:
    with pytest.raises(MessageError, match="one topic"):
        prepare_batch([Message("A", b"1"), Message("B", b"2")], _ids(), NOW_MS)
    with pytest.raises(MessageError, match="delayed"):
        prepare_batch([Message("A", b"1", delay_level=2)], _ids(), NOW_MS)
    batch = prepare_batch([Message("A", b"1"), Message("A", b"2")], _ids(), NOW_MS)
    assert batch.batch
    assert len(batch.msg_ids) == 2


def _record(
    offset: int, tags: str | None, *, body: bytes = b"body", sys_flag: int = 0, **extra: str
) -> bytes:
    properties = encode_properties({"TAGS": tags, "UNIQ_KEY": f"ID{offset}", **extra})
    return encode_record(
        topic=b"T",
        body=body,
        properties=properties.encode(),
        queue_id=1,
        queue_offset=offset,
        physical_offset=1000 + offset,
        sys_flag=sys_flag,
        born_host=pack_host(("127.0.0.1", 1)),
        store_host=pack_host(("127.0.0.1", 10911)),
    )


def test_message_ext_inflates_bodies_and_shows_the_original_topic_of_retries() -> None:
    response = RemotingCommand(
        code=ResponseCode.SUCCESS,
        ext_fields={"nextBeginOffset": "6", "minOffset": "0", "maxOffset": "6"},
        body=_record(5, "t", body=zlib.compress(b"hello"), sys_flag=COMPRESSED_FLAG)
        + _record(4, "t", RETRY_TOPIC="Orders"),
    )
    result = read_pull_response(response, QUEUE, 4, parse_subscription("T", "*"), "pull")
    by_offset = {m.queue_offset: m for m in result.messages}
    assert by_offset[5].body == b"hello"
    assert by_offset[4].topic == "Orders"
    assert by_offset[5].msg_id == "ID5"
    assert len(by_offset[5].offset_msg_id) == 32


# -- answers -------------------------------------------------------------------------------


def test_pull_answers_refilter_tags_and_drop_older_offsets() -> None:
    body = _record(3, "a") + _record(4, "a") + _record(5, "b") + _record(6, None)
    response = RemotingCommand(
        code=ResponseCode.SUCCESS,
        ext_fields={"nextBeginOffset": "7", "minOffset": "0", "maxOffset": "7"},
        body=body,
    )
    result = read_pull_response(response, QUEUE, 4, parse_subscription("T", "a"), "pull")
    assert result.status is PullStatus.FOUND
    assert [m.queue_offset for m in result.messages] == [4]
    assert result.next_begin_offset == 7


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (ResponseCode.SYSTEM_BUSY, BrokerBusyError),
        (ResponseCode.TOPIC_NOT_EXIST, TopicNotFoundError),
        (ResponseCode.MESSAGE_ILLEGAL, MessageError),
    ],
)
def test_refusals_become_the_exception_of_their_family(code: int, error: type) -> None:
    response = RemotingCommand(code=code, remark="why")
    with pytest.raises(error, match="why"):
        read_pull_response(response, QUEUE, 0, parse_subscription("T", "*"), "pull")
    prepared = prepare_message(Message("T", b"x"), _ids(), NOW_MS)
    with pytest.raises(error):
        read_send_response(response, prepared, QUEUE, "send")


def test_garbage_pull_bodies_are_a_protocol_error() -> None:
    response = RemotingCommand(code=ResponseCode.SUCCESS, body=b"\x00\x00\x00\x10garbage!")
    with pytest.raises(ProtocolError, match="bad messages"):
        read_pull_response(response, QUEUE, 0, parse_subscription("T", "*"), "pull")


def test_stored_but_not_replicated_is_a_status_not_an_error() -> None:
    prepared = prepare_batch([Message("T", b"1"), Message("T", b"2")], _ids(), NOW_MS)
    response = RemotingCommand(
        code=ResponseCode.FLUSH_SLAVE_TIMEOUT,
        ext_fields={"queueId": "2", "queueOffset": "10", "msgId": "AAA,BBB"},
    )
    result = read_send_response(response, prepared, QUEUE, "send")
    assert result.status is SendStatus.FLUSH_SLAVE_TIMEOUT
    singles = split_batch_result(result, prepared)
    assert [(r.offset_msg_id, r.queue_offset, r.queue.queue_id) for r in singles] == [
        ("AAA", 10, 2),
        ("BBB", 11, 2),
    ]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # A broker that names fewer records, or none, and one that gives no queue offset.
        ({"queueId": "2", "queueOffset": "7", "msgId": "AAA"}, [("AAA", 7), ("", 8), ("", 9)]),
        ({"queueId": "2", "queueOffset": "7"}, [("", 7), ("", 8), ("", 9)]),
        ({"queueId": "2", "msgId": "A,B,C,D"}, [("A", -1), ("B", -1), ("C", -1)]),
    ],
)
def test_each_message_of_a_batch_gets_its_own_ids_and_offset(
    fields: dict[str, str], expected: list[tuple[str, int]]
) -> None:
    prepared = prepare_batch([Message("T", bytes([n])) for n in range(3)], _ids(), NOW_MS)
    response = RemotingCommand(code=ResponseCode.SUCCESS, ext_fields=fields)
    singles = split_batch_result(read_send_response(response, prepared, QUEUE, "send"), prepared)
    assert [(r.offset_msg_id, r.queue_offset) for r in singles] == expected
    assert [r.msg_id for r in singles] == list(prepared.msg_ids)
    assert len(set(prepared.msg_ids)) == 3


# -- routes and queue choice ---------------------------------------------------------------


def _route(order_conf: str | None = None) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[
            QueueData("broker-b", 2, 2, PERM_READ | PERM_WRITE),
            QueueData("broker-a", 3, 2, PERM_READ | PERM_WRITE),
            QueueData("broker-c", 2, 2, PERM_READ),
            QueueData("broker-d", 2, 2, PERM_READ | PERM_WRITE),
        ],
        broker_datas=[
            BrokerData("c", "broker-a", {0: "a:1"}),
            BrokerData("c", "broker-b", {0: "b:1", 1: "b:2"}),
            BrokerData("c", "broker-c", {0: "c:1"}),
            BrokerData("c", "broker-d", {1: "d:2"}),  # no master
        ],
        order_topic_conf=order_conf,
    )


def test_publish_queues_are_writable_queues_of_brokers_with_a_master() -> None:
    info = publish_queues("T", _route())
    assert [(q.broker_name, q.queue_id) for q in info.queues] == [
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-b", 0),
        ("broker-b", 1),
    ]
    assert len(subscribe_queues("T", _route())) == 9
    ordered = publish_queues("T", _route("broker-a:2;broker-d:1"))
    assert ordered.order_topic
    assert [q.broker_name for q in ordered.queues] == ["broker-a", "broker-a", "broker-d"]


def test_route_cache_reads_from_a_slave_when_the_master_is_gone_and_forgets_old_brokers() -> None:
    cache = RouteCache()
    cache.update("T", _route())
    assert cache.master_address("broker-d") is None
    assert cache.any_address("broker-d") == "d:2"
    cache.update("T", TopicRouteData(broker_datas=[BrokerData("c", "broker-a", {0: "a:1"})]))
    assert cache.all_broker_addresses() == ["a:1"]


def test_a_slow_or_failed_broker_is_avoided_while_others_are_available() -> None:
    queues = publish_queues("T", _route()).queues
    chooser = QueueChooser()
    chooser.report("broker-a", 600, NOW_MS, failed=False)  # slow: 30 s out
    picks = {chooser.choose(queues, NOW_MS + 1000).broker_name for _ in range(20)}
    assert picks == {"broker-b"}
    assert chooser.choose(queues, NOW_MS + 31_000, avoid_broker="broker-b").broker_name == (
        "broker-a"
    )
    chooser.report("broker-b", 0, NOW_MS, failed=True)
    # Everything is penalised: the broker whose penalty ends first is still tried.
    assert chooser.choose(queues, NOW_MS + 1000).broker_name == "broker-a"
    assert unavailable_ms(10) == 0
    assert unavailable_ms(2500) == 120_000


# -- the commit point ----------------------------------------------------------------------


def _ext(offset: int) -> MessageExt:
    return MessageExt(
        topic="T",
        body=b"x",
        properties={},
        queue=QUEUE,
        queue_offset=offset,
        commit_log_offset=offset,
        born_timestamp_ms=0,
        store_timestamp_ms=0,
        born_host=("127.0.0.1", 1),
        store_host=("127.0.0.1", 2),
        reconsume_times=0,
        flag=0,
        sys_flag=0,
    )


@given(st.integers(1, 60), st.randoms(use_true_random=False))
def test_the_commit_point_never_passes_an_unfinished_message(count: int, rng: object) -> None:
    queue = ProcessQueue(100)
    queue.add([_ext(100 + i) for i in range(count)], 100 + count)
    order = list(range(100, 100 + count))
    rng.shuffle(order)  # type: ignore[attr-defined]
    unfinished = set(order)
    for offset in order:
        queue.finish([offset])
        unfinished.discard(offset)
        assert queue.commit_offset() == (min(unfinished) if unfinished else 100 + count)
    assert queue.held_count == 0
    assert queue.held_bytes == 0


_PROPERTY_TEXTS = st.one_of(
    st.none(), st.sampled_from(["", "TagA", "a b", "é", "x\x01y", "x\x02", "7F00000100002A9F"])
)
_KEYS = st.one_of(_PROPERTY_TEXTS, st.lists(st.sampled_from(["k1", "", "é", "k\x02"])))


def _encoded(message: Message, unique_id: str | None) -> tuple[str, str]:
    """What `encode_properties` and the general path (`_encode_any_properties`) give: the
    string, or the error."""

    def outcome(encode: Callable[[str | None], str]) -> str:
        try:
            return encode(unique_id)
        except ValueError as exc:  # PropertyError too
            return f"{type(exc).__name__}: {exc}"

    return outcome(message.encode_properties), outcome(message._encode_any_properties)


@given(tags=_PROPERTY_TEXTS, keys=_KEYS, unique_id=_PROPERTY_TEXTS)
def test_the_usual_properties_encode_as_the_general_path_encodes_them(
    tags: str | None, keys: str | list[str] | None, unique_id: str | None
) -> None:
    """A message of tags, keys and an id has its string built directly: the same string, or
    the same error, as the general path gives."""
    direct, general = _encoded(Message("T", b"x", tags=tags, keys=keys), unique_id)
    assert direct == general


@pytest.mark.parametrize(
    "unusual",
    [
        {"properties": {"a": "b"}},
        {"properties": {"TAGS": "x"}},
        {"delay_level": 3},
        {"wait_store_msg_ok": False},
        {"deliver_time_ms": 1_700_000_000_000},
        {"delay_ms": 1_000},
    ],
)
def test_any_other_message_takes_the_general_path(unusual: dict[str, object]) -> None:
    message = Message("T", b"x", tags="TagA", keys=["k1", "k2"], **unusual)  # type: ignore[arg-type]
    direct, general = _encoded(message, "7F00000100002A9F")
    assert direct == general
