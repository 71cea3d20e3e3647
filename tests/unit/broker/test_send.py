"""The broker's send path (rocketmq-wire.md sections 3.1, 4.5, 4.6, 6.1, 11).

Requests are built by hand and handed to `SendHandler.handle` on a real store in tmp_path; what
was stored is read back and compared with what was sent.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.broker import send_header
from pocketmq.broker.headers import HeaderError
from pocketmq.broker.put_path import PutPath, PutSettings, StoreWriter
from pocketmq.broker.send import SendHandler, SendSettings, parse_host_address
from pocketmq.broker.send_header import SendRequestHeader, decode_send_header
from pocketmq.broker.topics import TopicConfig, TopicFilterType, TopicTable
from pocketmq.common.batch import encode_batch_body
from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.common.constants import MULTI_TAGS_FLAG, PERM_READ, PERM_WRITE
from pocketmq.common.message_id import decode_offset_msg_id
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record, parse_layout
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore, PutResult, PutStatus
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore, StoreNotRunningError

NOW = 1_700_000_000_000
BORN = 1_699_999_999_000
STORE_HOST = ("192.168.0.10", 10911)
PRODUCER = "10.0.0.7:52000"
MAX_MESSAGE_SIZE = 1024
TOPIC = "TopicTest"


@dataclass
class FakeChannel:
    remote_address: str = PRODUCER


@dataclass
class FakeStore:
    """Answers every put with a fixed result; remembers what it was given."""

    result: PutResult
    received: list[MessageToStore] = field(default_factory=list)

    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        self.received.extend(messages)
        return self.result


class NotRunningStore:
    async def put_messages(self, messages: Sequence[MessageToStore]) -> PutResult:
        raise StoreNotRunningError("the store is not loaded")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MessageStore]:
    config = MessageStoreConfig(
        store_path_root_dir=str(tmp_path / "store"),
        mapped_file_size_commit_log=64 * 1024,
        mapped_file_size_consume_queue=20 * 50,
        max_hash_slot_num=64,
        max_index_num=200,
    )
    message_store = MessageStore(config, store_host=STORE_HOST, clock=ManualClock(NOW))
    message_store.load()
    yield message_store
    message_store.close()


def make_topics(*, auto_create: bool = True) -> TopicTable:
    topics = TopicTable(
        cluster_name="DefaultCluster", broker_name="broker-a", auto_create_topic_enable=auto_create
    )
    topics.load(None, NOW)
    topics.update(TopicConfig(TOPIC, read_queue_nums=4, write_queue_nums=4), NOW)
    return topics


class Broker:
    """A send handler wired to a store and a topic table, recording created topics."""

    def __init__(
        self,
        store: StoreWriter,
        *,
        auto_create: bool = True,
        max_message_size: int = MAX_MESSAGE_SIZE,
        seed: int = 7,
    ) -> None:
        self.topics = make_topics(auto_create=auto_create)
        self.created: list[str] = []
        clock = ManualClock(NOW)
        self.handler = SendHandler(
            PutPath(store, clock, PutSettings(max_message_size=max_message_size)),
            self.topics,
            SendSettings(STORE_HOST, default_topic_queue_nums=8),
            clock,
            self._topics_created,
            rng=random.Random(seed),
        )

    async def _topics_created(self, names: list[str]) -> None:
        self.created.extend(names)

    def send(self, *requests: RemotingCommand, producer: str = PRODUCER) -> list[RemotingCommand]:
        """Hands the requests to the handler one after another, in one event loop."""
        channel = FakeChannel(producer)

        async def run() -> list[RemotingCommand]:
            return [await self.handler.handle(request, channel) for request in requests]

        return asyncio.run(run())


def v1_fields(**overrides: str) -> dict[str, str]:
    """A SEND_MESSAGE header as the C++ client sends it (numbers already turned to text)."""
    fields = {
        "producerGroup": "PG",
        "topic": TOPIC,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "1",
        "sysFlag": "0",
        "bornTimestamp": str(BORN),
        "flag": "0",
        "properties": encode_properties({"UNIQ_KEY": "C0A8000A00002A9F", "WAIT": "true"}),
        "reconsumeTimes": "0",
        "unitMode": "false",
        "batch": "0",
        # Present on every C++ request; must be ignored.
        "AccessKey": "",
        "OnsChannel": "ALIYUN",
        "Signature": "c2lnbmF0dXJl",
    }
    fields.update(overrides)
    return fields


V2_NAMES = {
    "producerGroup": "a",
    "topic": "b",
    "defaultTopic": "c",
    "defaultTopicQueueNums": "d",
    "queueId": "e",
    "sysFlag": "f",
    "bornTimestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsumeTimes": "j",
    "unitMode": "k",
    "batch": "m",
}


def v2_fields(**overrides: str) -> dict[str, str]:
    fields = {V2_NAMES[k]: v for k, v in v1_fields().items() if k in V2_NAMES}
    fields["m"] = "false"
    fields.update(overrides)
    return fields


def request(
    code: int, fields: dict[str, str], body: bytes = b"hello", *, opaque: int = 42
) -> RemotingCommand:
    command = RemotingCommand.request(code, fields, body)
    command.opaque = opaque
    command.language = LanguageCode.CPP
    return command


def stored_by_msg_id(store: MessageStore, msg_id: str) -> tuple[StoredMessage, bytes]:
    """The message an offsetMsgId names, and its raw properties bytes."""
    host, offset = decode_offset_msg_id(msg_id)
    assert host == STORE_HOST
    record = store.select_one_message_by_offset(offset)
    assert record is not None
    layout = parse_layout(record)
    raw_properties = record[layout.properties_pos : layout.properties_pos + layout.properties_len]
    message = decode_record(record)
    assert message.physical_offset == offset
    return message, raw_properties


def assert_send_result(response: RemotingCommand, *, queue_id: int, queue_offset: int) -> None:
    assert response.is_response
    assert response.opaque == 42
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert response.remark is None
    fields = response.ext_fields
    assert fields["queueId"] == str(queue_id)
    assert fields["queueOffset"] == str(queue_offset)
    assert fields["MSG_REGION"] == "DefaultRegion"
    assert fields["TRACE_ON"] == "true"
    assert all(isinstance(value, str) for value in fields.values())


# -- single sends ---------------------------------------------------------------------------


def test_v1_send_stores_the_message_and_answers_with_its_offset_msg_id(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    properties = encode_properties({"UNIQ_KEY": "C0A8000A00002A9F", "TAGS": "TagA", "WAIT": "true"})
    fields = v1_fields(properties=properties, flag="5", sysFlag="0", reconsumeTimes="2")

    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields, b"\x00body\xff"))

    assert_send_result(response, queue_id=1, queue_offset=0)
    msg_id = response.ext_fields["msgId"]
    assert len(msg_id) == 32
    assert msg_id == msg_id.upper()
    assert response.ext_fields["transactionId"] == "C0A8000A00002A9F"
    message, raw_properties = stored_by_msg_id(store, msg_id)
    assert message.topic == TOPIC
    assert message.body == b"\x00body\xff"
    assert (message.queue_id, message.queue_offset, message.flag) == (1, 0, 5)
    assert message.sys_flag == 0
    assert message.born_timestamp == BORN
    assert message.born_host == ("10.0.0.7", 52000)
    assert message.store_host == STORE_HOST
    assert message.reconsume_times == 2
    assert raw_properties == properties.encode()
    assert broker.created == []


def test_offset_msg_id_names_the_physical_offset_of_each_stored_message(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    responses = broker.send(
        *(request(RequestCode.SEND_MESSAGE, v1_fields(queueId="2"), b"m%d" % i) for i in range(3))
    )
    store.dispatch_now()
    found = store.get_message(TOPIC, 2, 0, 10)
    assert found.message_count == 3
    for i, response in enumerate(responses):
        assert_send_result(response, queue_id=2, queue_offset=i)
        _, physical = decode_offset_msg_id(response.ext_fields["msgId"])
        assert physical == decode_record(found.buffers[i]).physical_offset
        message, _ = stored_by_msg_id(store, response.ext_fields["msgId"])
        assert message.body == b"m%d" % i


def test_v2_send_reads_the_short_header_names(store: MessageStore) -> None:
    broker = Broker(store)
    properties = encode_properties({"KEYS": "k1 k2", "UNIQ_KEY": "ABC"})
    fields = v2_fields(e="3", h="9", f="0", i=properties)

    (response,) = broker.send(request(RequestCode.SEND_MESSAGE_V2, fields, b"v2"))

    assert_send_result(response, queue_id=3, queue_offset=0)
    message, raw_properties = stored_by_msg_id(store, response.ext_fields["msgId"])
    assert (message.topic, message.body, message.queue_id, message.flag) == (TOPIC, b"v2", 3, 9)
    assert raw_properties == properties.encode()
    assert response.ext_fields["transactionId"] == "ABC"


def test_send_without_uniq_key_has_no_transaction_id(store: MessageStore) -> None:
    broker = Broker(store)
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(properties="")))
    assert_send_result(response, queue_id=1, queue_offset=0)
    assert "transactionId" not in response.ext_fields


def test_sys_flag_is_stored_from_the_header_and_multi_tag_topics_add_their_bit(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    broker.topics.update(
        TopicConfig("Multi", 1, 1, topic_filter_type=TopicFilterType.MULTI_TAG), NOW
    )
    responses = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields(sysFlag="1", queueId="0"), b"x\x9c"),
        request(RequestCode.SEND_MESSAGE, v1_fields(topic="Multi", queueId="0")),
    )
    compressed, _ = stored_by_msg_id(store, responses[0].ext_fields["msgId"])
    multi, _ = stored_by_msg_id(store, responses[1].ext_fields["msgId"])
    assert compressed.sys_flag == 1
    assert multi.sys_flag == MULTI_TAGS_FLAG


def test_negative_queue_id_picks_a_write_queue_at_random(store: MessageStore) -> None:
    broker = Broker(store, seed=3)
    responses = broker.send(
        *(request(RequestCode.SEND_MESSAGE, v1_fields(queueId="-1")) for _ in range(20))
    )
    chosen = set()
    for response in responses:
        assert response.code == ResponseCode.SUCCESS
        queue_id = int(response.ext_fields["queueId"])
        message, _ = stored_by_msg_id(store, response.ext_fields["msgId"])
        assert message.queue_id == queue_id
        chosen.add(queue_id)
    assert chosen <= {0, 1, 2, 3}
    assert len(chosen) > 1


def test_delay_level_is_stored_as_sent_until_issue_5(store: MessageStore) -> None:
    broker = Broker(store)
    properties = encode_properties({"DELAY": "3", "UNIQ_KEY": "D"})
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(properties=properties)))
    message, _ = stored_by_msg_id(store, response.ext_fields["msgId"])
    assert (message.topic, message.queue_id) == (TOPIC, 1)
    assert message.properties["DELAY"] == "3"


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("10.0.0.7:52000", ("10.0.0.7", 52000)),
        ("::ffff:10.1.2.3:4000", ("10.1.2.3", 4000)),
        ("[::1]:4000", ("::1", 4000)),
        ("::1:4000", ("::1", 4000)),
        ("?", None),
        ("host:1", None),
        ("10.0.0.1:99999", None),
        ("10.0.0.1:", None),
    ],
)
def test_parse_host_address(address: str, expected: tuple[str, int] | None) -> None:
    assert parse_host_address(address) == expected


def test_born_host_is_unknown_when_the_channel_address_is_not_ip_and_port(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields()), producer="?")
    message, _ = stored_by_msg_id(store, response.ext_fields["msgId"])
    assert message.born_host == ("0.0.0.0", 0)


# -- batches --------------------------------------------------------------------------------


BATCH = [
    (0, b"first", encode_properties({"UNIQ_KEY": "U1", "TAGS": "a", "KEYS": "k1"})),
    (3, b"", encode_properties({"UNIQ_KEY": "U2"})),
    (0, b"third" * 10, encode_properties({"UNIQ_KEY": "U3", "TAGS": "c"})),
]


def assert_batch_stored(store: MessageStore, response: RemotingCommand, queue_id: int) -> None:
    assert_send_result(response, queue_id=queue_id, queue_offset=0)
    msg_ids = response.ext_fields["msgId"].split(",")
    assert len(msg_ids) == len(BATCH)
    offsets = [decode_offset_msg_id(msg_id)[1] for msg_id in msg_ids]
    assert offsets == sorted(offsets)
    for i, (msg_id, (flag, body, properties)) in enumerate(zip(msg_ids, BATCH, strict=True)):
        message, raw_properties = stored_by_msg_id(store, msg_id)
        assert (message.topic, message.queue_id, message.queue_offset) == (TOPIC, queue_id, i)
        assert (message.flag, message.body) == (flag, body)
        assert raw_properties == properties.encode()  # the entry's own, not the header's
        assert message.born_timestamp == BORN
        assert message.born_host == ("10.0.0.7", 52000)


def test_cpp_style_batch_is_code_10_with_batch_1(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v1_fields(batch="1", properties=encode_properties({"WAIT": "true"}))
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields, encode_batch_body(BATCH)))
    assert_batch_stored(store, response, queue_id=1)
    assert "transactionId" not in response.ext_fields


def test_java_style_batch_is_code_320_even_without_the_m_flag(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v2_fields(e="2", i="")
    del fields["m"]
    (response,) = broker.send(
        request(RequestCode.SEND_BATCH_MESSAGE, fields, encode_batch_body(BATCH))
    )
    assert_batch_stored(store, response, queue_id=2)


def test_v2_batch_flag_m_true_marks_a_batch_on_code_310(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v2_fields(e="0", m="true")
    (response,) = broker.send(
        request(RequestCode.SEND_MESSAGE_V2, fields, encode_batch_body(BATCH))
    )
    assert_batch_stored(store, response, queue_id=0)


def test_garbage_batch_body_is_message_illegal_and_stores_nothing(store: MessageStore) -> None:
    broker = Broker(store)
    truncated = encode_batch_body(BATCH)[:-3]
    responses = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields(batch="1"), truncated),
        request(RequestCode.SEND_MESSAGE, v1_fields(batch="1"), b"\xde\xad\xbe\xef" * 9),
        request(RequestCode.SEND_MESSAGE, v1_fields(batch="1"), b""),
    )
    for response in responses:
        assert response.code == ResponseCode.MESSAGE_ILLEGAL
        assert response.remark is not None
        assert response.remark.startswith("the batch body is malformed: ")
        assert "msgId" not in response.ext_fields
    assert store.max_phy_offset == 0


def test_batch_to_a_retry_topic_is_refused(store: MessageStore) -> None:
    broker = Broker(store)
    broker.topics.update(TopicConfig("%RETRY%group", 1, 1), NOW)
    fields = v1_fields(topic="%RETRY%group", queueId="0", batch="true")
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields, encode_batch_body(BATCH)))
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert response.remark == "batch request does not support retry group %RETRY%group"


def test_oversized_batch_is_message_illegal(store: MessageStore) -> None:
    broker = Broker(store, max_message_size=100)
    (response,) = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields(batch="1"), encode_batch_body(BATCH))
    )
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert response.remark is not None
    assert "batch body length" in response.remark
    assert "100B" in response.remark
    assert store.max_phy_offset == 0


# -- topics ---------------------------------------------------------------------------------


def test_unknown_topic_is_created_from_tbw102_and_reported_once(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v1_fields(topic="NewTopic", defaultTopicQueueNums="4", queueId="3")
    responses = broker.send(
        request(RequestCode.SEND_MESSAGE, fields), request(RequestCode.SEND_MESSAGE, fields)
    )
    for offset, response in enumerate(responses):
        assert_send_result(response, queue_id=3, queue_offset=offset)
    assert broker.created == ["NewTopic"]
    created = broker.topics.get("NewTopic")
    assert created is not None
    assert (created.read_queue_nums, created.write_queue_nums) == (4, 4)
    assert created.perm == PERM_READ | PERM_WRITE


def test_auto_created_topic_takes_at_most_the_default_topics_queues(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v1_fields(topic="Wide", defaultTopicQueueNums="64", queueId="0")
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields))
    assert response.code == ResponseCode.SUCCESS
    assert broker.created == ["Wide"]
    assert broker.topics.topics["Wide"].write_queue_nums == 8  # TBW102's queues


def test_non_positive_queue_count_in_the_request_falls_back_to_the_brokers(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    fields = v1_fields(topic="NoCount", defaultTopicQueueNums="0", queueId="0")
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields))
    assert response.code == ResponseCode.SUCCESS
    assert broker.created == ["NoCount"]
    assert broker.topics.topics["NoCount"].write_queue_nums == 8


def test_unknown_topic_without_auto_create_is_topic_not_exist(store: MessageStore) -> None:
    broker = Broker(store, auto_create=False)
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(topic="Nope")))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST
    assert response.remark is not None
    assert response.remark.startswith("topic[Nope] not exist, apply first please!")
    assert response.ext_fields["MSG_REGION"] == "DefaultRegion"
    assert response.ext_fields["TRACE_ON"] == "true"
    assert broker.created == []
    assert broker.topics.get("Nope") is None
    assert store.max_phy_offset == 0


def test_unknown_default_topic_is_topic_not_exist(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v1_fields(topic="Nope", defaultTopic="NoSuchDefault")
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields))
    assert response.code == ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.parametrize(
    ("topic", "rule"),
    [("bad topic", "illegal characters"), ("a/b", "illegal characters"), ("A" * 128, "longer")],
)
def test_illegal_topic_is_invalid_parameter(store: MessageStore, topic: str, rule: str) -> None:
    broker = Broker(store)
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(topic=topic)))
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark is not None
    assert rule in response.remark
    assert broker.created == []
    assert store.max_phy_offset == 0


def test_internal_topics_refuse_producers(store: MessageStore) -> None:
    broker = Broker(store)
    fields = v1_fields(topic="SCHEDULE_TOPIC_XXXX", queueId="0")
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields))
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."


@pytest.mark.parametrize("queue_id", ["4", "1000"])
def test_queue_id_beyond_the_topics_queues_is_invalid_parameter(
    store: MessageStore, queue_id: str
) -> None:
    broker = Broker(store)
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(queueId=queue_id)))
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark is not None
    assert response.remark.startswith(f"request queueId[{queue_id}] is illegal")
    assert PRODUCER in response.remark
    assert store.max_phy_offset == 0


def test_queue_id_is_checked_against_read_queues_too_as_rocketmq_does(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    broker.topics.update(TopicConfig("Shrinking", read_queue_nums=4, write_queue_nums=2), NOW)
    (response,) = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields(topic="Shrinking", queueId="3"))
    )
    assert_send_result(response, queue_id=3, queue_offset=0)


def test_read_only_topic_is_no_permission(store: MessageStore) -> None:
    broker = Broker(store)
    broker.topics.update(TopicConfig("ReadOnly", 1, 1, perm=PERM_READ), NOW)
    fields = v1_fields(topic="ReadOnly", queueId="0")
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields))
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == "the topic[ReadOnly] sending message is forbidden"


def test_read_only_broker_is_no_permission(store: MessageStore) -> None:
    broker = Broker(store)
    broker.handler.broker_permission = PERM_READ
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields()))
    assert response.code == ResponseCode.NO_PERMISSION
    assert response.remark == "the broker[192.168.0.10] sending message is forbidden"
    broker.handler.broker_permission = PERM_READ | PERM_WRITE
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields()))
    assert response.code == ResponseCode.SUCCESS


# -- sizes and headers ----------------------------------------------------------------------


def test_oversized_body_is_message_illegal_with_the_limit_in_the_remark(
    store: MessageStore,
) -> None:
    broker = Broker(store)
    (response,) = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields(), b"x" * (MAX_MESSAGE_SIZE + 1))
    )
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert response.remark == (
        f"the message is illegal, msg body length {MAX_MESSAGE_SIZE + 1}B exceeds the limit "
        f"{MAX_MESSAGE_SIZE}B (maxMessageSize)"
    )
    assert store.max_phy_offset == 0
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(), b"x" * 1024))
    assert response.code == ResponseCode.SUCCESS


def test_oversized_properties_are_message_illegal(store: MessageStore) -> None:
    broker = Broker(store)
    properties = encode_properties({"KEYS": "k" * 40_000})
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(properties=properties)))
    assert response.code == ResponseCode.MESSAGE_ILLEGAL
    assert response.remark is not None
    assert "msg properties length limit 32KB." in response.remark
    assert "32767" in response.remark  # the store's own words, appended
    assert store.max_phy_offset == 0


REQUIRED_V1 = [
    "producerGroup",
    "topic",
    "defaultTopic",
    "defaultTopicQueueNums",
    "queueId",
    "sysFlag",
    "bornTimestamp",
    "flag",
]


@pytest.mark.parametrize("name", REQUIRED_V1)
def test_missing_required_v1_field_is_invalid_parameter_naming_it(
    store: MessageStore, name: str
) -> None:
    broker = Broker(store)
    fields = v1_fields()
    del fields[name]
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, fields))
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark == f"the custom field <{name}> is null"
    assert response.opaque == 42
    assert store.max_phy_offset == 0


@pytest.mark.parametrize("name", [V2_NAMES[n] for n in REQUIRED_V1])
def test_missing_required_v2_field_is_invalid_parameter_naming_it(
    store: MessageStore, name: str
) -> None:
    broker = Broker(store)
    fields = v2_fields()
    del fields[name]
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE_V2, fields))
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark == f"the custom field <{name}> is null"


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("queueId", "abc", "is not a number: 'abc'"),
        ("queueId", "", "is not a number: ''"),
        ("queueId", " 1", "is not a number: ' 1'"),
        ("queueId", "1_0", "is not a number: '1_0'"),
        ("queueId", "\u0661", "is not a number"),
        ("sysFlag", "2147483648", "= 2147483648 does not fit a 32-bit integer"),
        ("bornTimestamp", "1.5", "is not a number: '1.5'"),
        ("bornTimestamp", "9223372036854775808", "= 9223372036854775808 does not fit a 64-bit"),
        ("reconsumeTimes", "x", "is not a number: 'x'"),
    ],
)
def test_bad_numbers_are_invalid_parameter_naming_the_field(
    store: MessageStore, name: str, value: str, problem: str
) -> None:
    broker = Broker(store)
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields(**{name: value})))
    assert response.code == ResponseCode.INVALID_PARAMETER
    assert response.remark is not None
    assert response.remark.startswith(f"the custom field <{name}> {problem}")


# -- decode_send_header ---------------------------------------------------------------------


def test_decode_v1_header() -> None:
    header = decode_send_header(
        request(
            RequestCode.SEND_MESSAGE,
            v1_fields(maxReconsumeTimes="16", bname="broker-a", unitMode="TRUE", queueId="+2"),
        )
    )
    assert header == SendRequestHeader(
        producer_group="PG",
        topic=TOPIC,
        default_topic="TBW102",
        default_topic_queue_nums=4,
        queue_id=2,
        sys_flag=0,
        born_timestamp=BORN,
        flag=0,
        properties=v1_fields()["properties"],
        reconsume_times=0,
        unit_mode=True,
        max_reconsume_times=16,
        batch=False,
        broker_name="broker-a",
    )


def test_decode_v2_header_with_optional_fields_absent() -> None:
    fields = {k: v for k, v in v2_fields().items() if k in "abcdefgh"}
    header = decode_send_header(request(RequestCode.SEND_MESSAGE_V2, fields))
    assert header.topic == TOPIC
    assert header.born_timestamp == BORN
    assert (header.properties, header.reconsume_times, header.max_reconsume_times) == ("", 0, None)
    assert (header.unit_mode, header.batch, header.broker_name) == (False, False, None)


def test_decode_ignores_keys_of_the_other_version() -> None:
    fields = v2_fields()
    fields["batch"] = "true"  # a V1 name on a V2 request means nothing
    assert decode_send_header(request(RequestCode.SEND_MESSAGE_V2, fields)).batch is False


@pytest.mark.parametrize(
    ("value", "batch"),
    [("1", True), ("true", True), ("True", True), ("0", False), ("false", False), ("yes", False)],
)
def test_batch_flag_accepts_java_true_and_cpp_1(value: str, batch: bool) -> None:
    header = decode_send_header(request(RequestCode.SEND_MESSAGE, v1_fields(batch=value)))
    assert header.batch is batch


def test_decode_refuses_codes_that_are_not_sends() -> None:
    with pytest.raises(HeaderError, match="not a send request") as info:
        decode_send_header(request(RequestCode.PULL_MESSAGE, v1_fields()))
    assert info.value.field == "code"


def test_header_error_names_the_field() -> None:
    fields = v1_fields()
    del fields["topic"]
    with pytest.raises(HeaderError) as info:
        decode_send_header(request(RequestCode.SEND_MESSAGE, fields))
    assert info.value.field == "topic"
    assert isinstance(info.value, ValueError)


_NUMBER_FIELDS = [
    "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp", "flag", "reconsumeTimes",
    "maxReconsumeTimes",
]  # fmt: skip
# Each side of where the one-pass read stops (9 digits an int, 18 a long) and of Java's ranges,
# with the forms Java refuses and Python's int() takes.
_EDGE_NUMBERS = [
    "0", "-1", "+5", "007", "", " 1", "1 ", "1_0", "\u0661", "999999999", "2147483647",
    "2147483648", "999999999999999999", "9223372036854775807", "9223372036854775808",
]  # fmt: skip
_NUMBER_TEXTS = st.one_of(
    st.sampled_from(_EDGE_NUMBERS),
    st.from_regex(r"[+-]?[0-9]{0,20}", fullmatch=True),
    st.text(max_size=4),
)


@given(
    code=st.sampled_from([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2]),
    numbers=st.dictionaries(
        st.sampled_from(_NUMBER_FIELDS),
        st.one_of(st.none(), _NUMBER_TEXTS),
        max_size=2,
    ),
    texts=st.dictionaries(
        st.sampled_from(["producerGroup", "topic", "defaultTopic", "unitMode", "batch", "bname"]),
        st.one_of(st.none(), st.sampled_from(["", "true", "1", "x"])),
        max_size=2,
    ),
)
@settings(max_examples=400)
def test_the_usual_header_reads_as_the_careful_path_reads_it(
    code: RequestCode, numbers: dict[str, str | None], texts: dict[str, str | None]
) -> None:
    """The one-pass read of the usual header (`_usual_header`) gives what the field-by-field
    read gives, and leaves every other header (and every error) to it."""
    assert_read_as_carefully(code, numbers, texts)


@pytest.mark.parametrize("name", _NUMBER_FIELDS)
@pytest.mark.parametrize("value", _EDGE_NUMBERS)
@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_every_number_field_reads_as_carefully_at_its_edges(
    code: RequestCode, name: str, value: str
) -> None:
    assert_read_as_carefully(code, {name: value}, {})


def assert_read_as_carefully(
    code: RequestCode, numbers: dict[str, str | None], texts: dict[str, str | None]
) -> None:
    fields = v1_fields()
    for name, value in {**numbers, **texts}.items():
        if value is None:
            fields.pop(name, None)
        else:
            fields[name] = value
    if code == RequestCode.SEND_MESSAGE_V2:
        fields = {V2_NAMES[k]: v for k, v in fields.items() if k in V2_NAMES}
    keys = send_header._V1_KEYS if code == RequestCode.SEND_MESSAGE else send_header._V2_KEYS
    try:
        careful: SendRequestHeader | str = send_header._careful_header(fields, keys, code)
    except HeaderError as exc:
        careful = f"{exc.field}: {exc}"
    try:
        decoded: SendRequestHeader | str = decode_send_header(request(code, fields))
    except HeaderError as exc:
        decoded = f"{exc.field}: {exc}"
    assert decoded == careful
    usual = send_header._usual_header(fields, keys, code)
    assert usual is None or usual == careful


# -- store outcomes (`handlePutMessageResult`) ----------------------------------------------


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (PutStatus.PUT_OK, ResponseCode.SUCCESS),
        (PutStatus.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_DISK_TIMEOUT),
        (PutStatus.FLUSH_SLAVE_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT),
        (PutStatus.SLAVE_NOT_AVAILABLE, ResponseCode.SLAVE_NOT_AVAILABLE),
    ],
)
def test_stored_outcomes_carry_the_send_result(status: PutStatus, code: ResponseCode) -> None:
    fake = FakeStore(PutResult(status, physical_offsets=[4096, 4200], queue_offset=17))
    broker = Broker(fake)
    (response,) = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields(batch="1"), encode_batch_body(BATCH[:2]))
    )
    assert response.code == code
    assert response.remark is None
    assert response.ext_fields["queueOffset"] == "17"
    assert response.ext_fields["queueId"] == "1"
    ids = response.ext_fields["msgId"].split(",")
    assert [decode_offset_msg_id(i) for i in ids] == [(STORE_HOST, 4096), (STORE_HOST, 4200)]
    assert [m.body for m in fake.received] == [b"first", b""]


@pytest.mark.parametrize(
    ("status", "code", "remark_start"),
    [
        (PutStatus.MESSAGE_ILLEGAL, ResponseCode.MESSAGE_ILLEGAL, "the message is illegal"),
        (PutStatus.PROPERTIES_SIZE_EXCEEDED, ResponseCode.MESSAGE_ILLEGAL, "the message is"),
        (PutStatus.SERVICE_NOT_AVAILABLE, ResponseCode.SERVICE_NOT_AVAILABLE, "service not"),
        (PutStatus.OS_PAGE_CACHE_BUSY, ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]"),
        (PutStatus.CREATE_MAPPED_FILE_FAILED, ResponseCode.SYSTEM_ERROR, "create mapped file"),
        (PutStatus.UNKNOWN_ERROR, ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
    ],
)
def test_failed_outcomes_answer_an_error_without_a_send_result(
    status: PutStatus, code: ResponseCode, remark_start: str
) -> None:
    broker = Broker(FakeStore(PutResult(status, remark="detail")))
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields()))
    assert response.code == code
    assert response.remark is not None
    assert response.remark.startswith(remark_start)
    assert "msgId" not in response.ext_fields
    assert response.ext_fields["MSG_REGION"] == "DefaultRegion"


def test_a_store_that_is_not_running_is_service_not_available() -> None:
    broker = Broker(NotRunningStore())
    (response,) = broker.send(request(RequestCode.SEND_MESSAGE, v1_fields()))
    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert response.remark is not None
    assert "not running" in response.remark


def test_region_and_trace_switch_come_from_the_broker() -> None:
    broker = Broker(FakeStore(PutResult(PutStatus.PUT_OK, [0], 0)))
    broker.handler.settings = replace(broker.handler.settings, region_id="Hangzhou", trace_on=False)
    (ok, refused) = broker.send(
        request(RequestCode.SEND_MESSAGE, v1_fields()),
        request(RequestCode.SEND_MESSAGE, v1_fields(topic="bad topic")),
    )
    for response in (ok, refused):
        assert response.ext_fields["MSG_REGION"] == "Hangzhou"
        assert response.ext_fields["TRACE_ON"] == "false"
