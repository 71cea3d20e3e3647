"""Retry topics and dead-letter queues: the rules (`broker/retry_policy.py`), consumer send-back
(CONSUMER_SEND_MSG_BACK, `broker/send_back.py`) and sends to a retry topic past the maximum
(`broker/send.py`), on a real store in tmp_path. RocketMQ: `consumerSendMsgBack`,
`handleRetryAndDLQ`, `MixAll.getRetryTopic` / `getDLQTopic`."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.retry_policy import (
    MAX_RECONSUME_TIMES_HEADER_VERSION,
    SendBackDecision,
    as_dead_letter,
    decide_send_back,
    group_of_retry_topic,
    max_reconsume_times,
    retry_send_is_dead,
    send_back_copy,
)
from pocketmq.broker.schedule import SCHEDULE_TOPIC
from pocketmq.broker.send import SendHandler, SendSettings
from pocketmq.broker.send_back import SendBackHandler
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.message_id import create_offset_msg_id
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.common.topic_names import dlq_topic, retry_topic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

NOW = 1_700_000_000_000
STORE_HOST = ("192.168.0.10", 10911)
GROUP = "g"
TOPIC = "Orders"
DELAYS_MS = tuple(1000 * n for n in range(1, 19))
OLD_CLIENT_VERSION = MAX_RECONSUME_TIMES_HEADER_VERSION - 1


# -- the rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reconsume", "level", "maximum", "expected"),
    [
        (0, 0, 16, ("%RETRY%g", 3, 1)),  # first retry: level 3
        (2, 0, 16, ("%RETRY%g", 5, 3)),  # grows with each try
        (15, 0, 16, ("%RETRY%g", 18, 16)),  # the last retry
        (1, 7, 16, ("%RETRY%g", 7, 2)),  # the consumer may choose the level
        (16, 0, 16, ("%DLQ%g", 0, 17)),  # tries used up
        (2, 0, 2, ("%DLQ%g", 0, 3)),
        (0, -1, 16, ("%DLQ%g", 0, 1)),  # the consumer asks for the DLQ
        (0, 0, 0, ("%DLQ%g", 0, 1)),  # no retries at all
    ],
)
def test_send_back_goes_to_retry_with_growing_delays_then_to_the_dlq(
    reconsume: int, level: int, maximum: int, expected: tuple[str, int, int]
) -> None:
    decision = decide_send_back("g", reconsume, level, maximum)
    assert (decision.topic, decision.delay_level, decision.reconsume_times) == expected
    assert decision.dead == expected[0].startswith("%DLQ%")


def test_the_requests_maximum_counts_from_client_version_3_4_9() -> None:
    assert max_reconsume_times(16, 2, MAX_RECONSUME_TIMES_HEADER_VERSION) == 2
    assert max_reconsume_times(16, 2, OLD_CLIENT_VERSION) == 16
    assert max_reconsume_times(16, None, MAX_RECONSUME_TIMES_HEADER_VERSION) == 16


def test_topic_names_follow_mixall() -> None:
    assert retry_topic("g") == "%RETRY%g"
    assert dlq_topic("g") == "%DLQ%g"
    assert group_of_retry_topic("%RETRY%g") == "g"
    assert group_of_retry_topic("%RETRY%g+Orders") == "g"  # a pop retry topic of RocketMQ 5
    assert group_of_retry_topic("Orders") is None
    assert group_of_retry_topic("%DLQ%g") is None


def test_a_send_to_the_retry_topic_is_dead_only_past_the_maximum() -> None:
    assert not retry_send_is_dead(16, 16)
    assert retry_send_is_dead(17, 16)


def stored_message(properties: dict[str, str], *, topic: str = TOPIC) -> StoredMessage:
    return StoredMessage(
        topic=topic,
        body=b"body",
        queue_id=1,
        flag=5,
        physical_offset=4096,
        sys_flag=0,
        born_timestamp=NOW - 9,
        born_host=("10.0.0.7", 5000),
        store_timestamp=NOW,
        store_host=STORE_HOST,
        reconsume_times=0,
        properties=properties,
    )


def test_the_copy_keeps_the_message_and_records_where_it_came_from() -> None:
    stored = stored_message({"UNIQ_KEY": "U1", "KEYS": "k", "TAGS": "t", "p": "v"})
    copy = send_back_copy(stored, SendBackDecision("%RETRY%g", 3, 1), 0)
    assert (copy.topic, copy.queue_id, copy.reconsume_times) == ("%RETRY%g", 0, 1)
    assert (copy.body, copy.flag, copy.born_timestamp, copy.born_host) == (
        b"body",
        5,
        NOW - 9,
        ("10.0.0.7", 5000),
    )
    assert decode_properties(copy.properties) == {
        "UNIQ_KEY": "U1",
        "KEYS": "k",
        "TAGS": "t",
        "p": "v",
        "RETRY_TOPIC": TOPIC,
        "ORIGIN_MESSAGE_ID": create_offset_msg_id(STORE_HOST, 4096),
        "DELAY": "3",
    }


def test_a_retry_of_a_retry_keeps_the_original_topic_and_id() -> None:
    stored = stored_message(
        {"RETRY_TOPIC": TOPIC, "ORIGIN_MESSAGE_ID": "FIRST", "DELAY": "3", "REAL_TOPIC": "x"},
        topic="%RETRY%g",
    )
    dead = send_back_copy(stored, SendBackDecision("%DLQ%g", 0, 2), 0)
    properties = decode_properties(dead.properties)
    assert properties["RETRY_TOPIC"] == TOPIC
    assert properties["ORIGIN_MESSAGE_ID"] == "FIRST"
    assert "DELAY" not in properties


def test_a_dead_letter_sent_to_the_retry_topic_loses_its_delay() -> None:
    message = MessageToStore(
        "%RETRY%g", b"b", encode_properties({"DELAY": "5", "KEYS": "k"}), queue_id=3
    )
    dead = as_dead_letter(message, "g")
    assert (dead.topic, dead.queue_id) == ("%DLQ%g", 0)
    assert decode_properties(dead.properties) == {"KEYS": "k"}


# -- on a store ---------------------------------------------------------------------------


@dataclass
class FakeChannel:
    remote_address: str = "10.0.0.7:52000"


class Broker:
    """A store, a topic table, groups, and the send and send-back handlers wired as the server
    wires them."""

    def __init__(self, root: Path) -> None:
        self.clock = ManualClock(NOW)
        config = MessageStoreConfig(
            store_path_root_dir=str(root),
            mapped_file_size_commit_log=256 * 1024,
            mapped_file_size_consume_queue=20 * 100,
            max_hash_slot_num=64,
            max_index_num=400,
        )
        self.store = MessageStore(config, store_host=STORE_HOST, clock=self.clock)
        self.store.dispatcher.schedule_delays_ms = DELAYS_MS
        self.store.load()
        self.topics = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
        self.topics.load(None, NOW)
        self.topics.update(TopicConfig(TOPIC, 4, 4), NOW)
        self.groups = {GROUP: SubscriptionGroupConfig(GROUP)}
        self.created_topics = 0
        self.put_path = PutPath(
            self.store, self.clock, PutSettings(delay_level_count=len(DELAYS_MS))
        )
        self.send = SendHandler(
            self.put_path,
            self.topics,
            SendSettings(STORE_HOST),
            self.clock,
            self._topics_created,
            find_group=self.find_group,
            rng=random.Random(1),
        )
        self.send_back = SendBackHandler(
            self.store,
            self.topics,
            self.find_group,
            self.put_path,
            self.clock,
            self._topics_created,
            broker_permission=lambda: self.send.broker_permission,
            rng=random.Random(1),
        )

    async def _topics_created(self, names: list[str]) -> None:
        self.created_topics += len(names)

    async def find_group(self, group: str) -> SubscriptionGroupConfig | None:
        return self.groups.get(group)

    def put(self, properties: dict[str, str], *, reconsume_times: int = 0) -> int:
        """Stores a message in TOPIC; returns its CommitLog offset."""
        message = MessageToStore(
            TOPIC,
            b"payload",
            encode_properties(properties),
            queue_id=1,
            flag=3,
            born_timestamp=NOW - 50,
            born_host=("10.0.0.7", 5000),
            reconsume_times=reconsume_times,
        )
        result = self.store.put_messages_now([message])
        assert result.ok
        return result.physical_offsets[0]

    def hand_back(
        self,
        offset: int,
        *,
        delay_level: int = 0,
        max_times: int | None = None,
        group: str = GROUP,
        version: int | None = None,
    ) -> RemotingCommand:
        fields = {
            "offset": str(offset),
            "group": group,
            "delayLevel": str(delay_level),
            "originMsgId": "U1",
            "originTopic": TOPIC,
            "unitMode": "false",
        }
        if max_times is not None:
            fields["maxReconsumeTimes"] = str(max_times)
        request = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, fields)
        if version is not None:
            request.version = version
        return asyncio.run(self.send_back.handle(request))

    def send_to(self, topic: str, reconsume_times: int, **fields: str) -> RemotingCommand:
        header = {
            "producerGroup": "PG",
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "0",
            "sysFlag": "0",
            "bornTimestamp": str(NOW - 1),
            "flag": "0",
            "properties": encode_properties({"UNIQ_KEY": "U9", "DELAY": "4"}),
            "reconsumeTimes": str(reconsume_times),
            **fields,
        }
        request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header, b"again")
        return asyncio.run(self.send.handle(request, FakeChannel()))

    def queue(self, topic: str, queue_id: int = 0) -> list[StoredMessage]:
        self.store.dispatch_now()
        result = self.store.get_message(topic, queue_id, 0, 32)
        return [decode_record(buffer) for buffer in result.buffers]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(tmp_path / "store")
    yield broker
    broker.store.close()


def test_a_first_send_back_waits_at_level_3_on_its_way_to_the_retry_topic(
    broker: Broker,
) -> None:
    offset = broker.put({"UNIQ_KEY": "U1", "KEYS": "k", "TAGS": "t", "p": "v"})
    response = broker.hand_back(offset, max_times=16)
    assert response.code == ResponseCode.SUCCESS, response.remark
    retry_config = broker.topics.get("%RETRY%g")
    assert retry_config is not None
    assert (retry_config.write_queue_nums, retry_config.perm) == (1, PERM_READ | PERM_WRITE)
    [waiting] = broker.queue(SCHEDULE_TOPIC, 2)
    assert waiting.reconsume_times == 1
    assert (waiting.body, waiting.flag, waiting.born_timestamp) == (b"payload", 3, NOW - 50)
    assert {
        k: waiting.properties.get(k)
        for k in ("REAL_TOPIC", "REAL_QID", "RETRY_TOPIC", "DELAY", "UNIQ_KEY", "KEYS", "p")
    } == {
        "REAL_TOPIC": "%RETRY%g",
        "REAL_QID": "0",
        "RETRY_TOPIC": TOPIC,
        "DELAY": "3",
        "UNIQ_KEY": "U1",
        "KEYS": "k",
        "p": "v",
    }
    assert waiting.properties["ORIGIN_MESSAGE_ID"] == create_offset_msg_id(STORE_HOST, offset)


def test_after_the_maximum_the_message_goes_to_the_dlq_at_once(
    broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    offset = broker.put({"UNIQ_KEY": "U1", "p": "v"}, reconsume_times=2)
    with caplog.at_level(logging.INFO, logger="pocketmq.broker.send_back"):
        response = broker.hand_back(offset, max_times=2)
    assert response.code == ResponseCode.SUCCESS, response.remark
    dlq_config = broker.topics.get("%DLQ%g")
    assert dlq_config is not None
    assert (dlq_config.read_queue_nums, dlq_config.perm) == (1, PERM_READ | PERM_WRITE)
    [dead] = broker.queue("%DLQ%g")
    assert dead.reconsume_times == 3
    assert dead.body == b"payload"
    assert dead.properties["p"] == "v"
    assert dead.properties["RETRY_TOPIC"] == TOPIC
    assert "DELAY" not in dead.properties
    assert broker.queue(SCHEDULE_TOPIC, 2) == []
    assert broker.created_topics == 2  # retry and dead-letter topics, both registered
    assert any("%DLQ%g" in record.getMessage() for record in caplog.records)


def test_an_old_client_gets_the_groups_maximum(broker: Broker) -> None:
    offset = broker.put({"UNIQ_KEY": "U1"}, reconsume_times=2)
    response = broker.hand_back(offset, max_times=2, version=OLD_CLIENT_VERSION)
    assert response.code == ResponseCode.SUCCESS
    assert broker.queue("%DLQ%g") == []
    assert len(broker.queue(SCHEDULE_TOPIC, 4)) == 1  # level 3 + 2


def test_delay_level_minus_one_asks_for_the_dlq(broker: Broker) -> None:
    offset = broker.put({"UNIQ_KEY": "U1"})
    assert broker.hand_back(offset, delay_level=-1).code == ResponseCode.SUCCESS
    assert [m.reconsume_times for m in broker.queue("%DLQ%g")] == [1]


def test_unknown_group_and_missing_message_are_refused(broker: Broker) -> None:
    offset = broker.put({"UNIQ_KEY": "U1"})
    unknown = broker.hand_back(offset, group="nobody")
    assert unknown.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert unknown.remark is not None
    assert unknown.remark.startswith("subscription group not exist, nobody")
    missing = broker.hand_back(offset + 1_000_000)
    assert missing.code == ResponseCode.SYSTEM_ERROR
    assert missing.remark is not None
    assert f"look message by offset failed, {offset + 1_000_000}" in missing.remark
    bad = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": GROUP})
    answer = asyncio.run(broker.send_back.handle(bad))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert broker.queue(SCHEDULE_TOPIC, 2) == []


def test_a_group_without_retry_queues_drops_what_it_hands_back(broker: Broker) -> None:
    broker.groups[GROUP].retry_queue_nums = 0
    offset = broker.put({"UNIQ_KEY": "U1"})
    assert broker.hand_back(offset).code == ResponseCode.SUCCESS
    assert broker.topics.get("%RETRY%g") is None
    assert broker.queue(SCHEDULE_TOPIC, 2) == []


def test_retry_queues_follow_the_group(broker: Broker) -> None:
    broker.groups[GROUP].retry_queue_nums = 3
    offset = broker.put({"UNIQ_KEY": "U1"})
    for _ in range(6):
        assert broker.hand_back(offset).code == ResponseCode.SUCCESS
    config = broker.topics.get("%RETRY%g")
    assert config is not None
    assert config.write_queue_nums == 3
    real_queues = {int(m.properties["REAL_QID"]) for m in broker.queue(SCHEDULE_TOPIC, 2)}
    assert real_queues <= {0, 1, 2}
    assert len(real_queues) > 1


def test_no_send_back_without_write_permission(broker: Broker) -> None:
    offset = broker.put({"UNIQ_KEY": "U1"})
    broker.send.broker_permission = PERM_READ
    assert broker.hand_back(offset).code == ResponseCode.NO_PERMISSION
    broker.send.broker_permission = PERM_READ | PERM_WRITE
    broker.topics.update(TopicConfig("%RETRY%g", 1, 1, PERM_READ), NOW)
    refused = broker.hand_back(offset)
    assert refused.code == ResponseCode.NO_PERMISSION
    assert refused.remark == "the topic[%RETRY%g] sending message is forbidden"
    assert broker.queue(SCHEDULE_TOPIC, 2) == []


def test_a_send_to_the_retry_topic_within_the_maximum_is_stored_with_its_delay(
    broker: Broker,
) -> None:
    broker.topics.create_system_topic("%RETRY%g", 1, PERM_READ | PERM_WRITE, NOW)
    response = broker.send_to("%RETRY%g", 16)
    assert response.code == ResponseCode.SUCCESS, response.remark
    [waiting] = broker.queue(SCHEDULE_TOPIC, 3)
    assert waiting.properties["REAL_TOPIC"] == "%RETRY%g"
    assert waiting.reconsume_times == 16


def test_a_send_to_the_retry_topic_past_the_maximum_goes_to_the_dlq(broker: Broker) -> None:
    broker.topics.create_system_topic("%RETRY%g", 1, PERM_READ | PERM_WRITE, NOW)
    response = broker.send_to("%RETRY%g", 17)
    assert response.code == ResponseCode.SUCCESS, response.remark
    [dead] = broker.queue("%DLQ%g")
    assert (dead.body, dead.reconsume_times) == (b"again", 17)
    assert "DELAY" not in dead.properties
    assert broker.queue(SCHEDULE_TOPIC, 3) == []
    # The request's maximum, from a client that sends one.
    assert broker.send_to("%RETRY%g", 3, maxReconsumeTimes="2").code == ResponseCode.SUCCESS
    assert [m.reconsume_times for m in broker.queue("%DLQ%g")] == [17, 3]


def test_a_send_to_the_retry_topic_of_an_unknown_group_is_refused(broker: Broker) -> None:
    broker.topics.create_system_topic("%RETRY%nobody", 1, PERM_READ | PERM_WRITE, NOW)
    response = broker.send_to("%RETRY%nobody", 0)
    assert response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    assert broker.queue("%RETRY%nobody") == []
