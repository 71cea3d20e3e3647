"""Storing half messages on send and ending them with END_TRANSACTION (RocketMQ's
`SendMessageProcessor` transaction branch and `EndTransactionProcessor`), on a real store in
tmp_path: what each request leaves in the CommitLog is read back."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.schedule import SCHEDULE_TOPIC, DelayLevels
from pocketmq.broker.send import SendHandler, SendSettings
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.broker.transaction.half_messages import HALF_TOPIC, OP_TOPIC
from pocketmq.broker.transaction.handlers import EndTransactionHandler
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.message_id import create_offset_msg_id, decode_offset_msg_id
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import small_config

NOW = 1_700_000_000_000
STORE_HOST = ("192.168.0.10", 10911)
TOPIC = "Orders"
GROUP = "tx-group"
UNIQ = "0A000001000012340000AAAA00000001"
DELAY_LEVELS = (1000, 5000, 10000)


async def no_topics_created(names: list[str]) -> None:
    """Sends here create no topic."""


@dataclass
class FakeChannel:
    remote_address: str = "10.0.0.7:52000"


@dataclass
class Half:
    """What the send of a half answered."""

    msg_id: str
    queue_offset: int

    @property
    def commit_log_offset(self) -> int:
        return decode_offset_msg_id(self.msg_id)[1]


class Broker:
    """A send handler and an END_TRANSACTION handler on one store."""

    def __init__(self, store: MessageStore, clock: ManualClock, *, slave: bool = False) -> None:
        self.store = store
        self.clock = clock
        topics = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
        topics.load(None, NOW)
        topics.update(TopicConfig(TOPIC, read_queue_nums=4, write_queue_nums=4), NOW)
        self.put_path = PutPath(
            store, clock, PutSettings(delay_level_count=len(DELAY_LEVELS), max_message_size=4096)
        )
        self.send_handler = SendHandler(
            self.put_path,
            topics,
            SendSettings(STORE_HOST),
            clock,
            no_topics_created,
            rng=random.Random(1),
        )
        self.end_handler = EndTransactionHandler(
            store, self.put_path, clock, transaction_timeout_ms=6000, is_slave=lambda: slave
        )

    def run(self, request: RemotingCommand, handler: str = "end") -> RemotingCommand | None:
        target = self.end_handler.handle if handler == "end" else self.send_handler.handle

        async def go() -> RemotingCommand | None:
            response = await target(request, FakeChannel())
            self.store.dispatch_now()
            return response

        return asyncio.run(go())

    def send_half(self, **properties: str) -> Half:
        props = {"UNIQ_KEY": UNIQ, "TRAN_MSG": "true", "PGROUP": GROUP, "KEYS": "order-1"}
        props.update(properties)
        fields = {
            "a": GROUP,
            "b": TOPIC,
            "c": "TBW102",
            "d": "4",
            "e": "2",
            "f": "0",
            "g": str(NOW - 1000),
            "h": "0",
            "i": encode_properties(props),
            "j": "0",
            "k": "false",
            "m": "false",
        }
        response = self.run(
            RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"order body"), "send"
        )
        assert response is not None
        assert response.code == ResponseCode.SUCCESS, response.remark
        assert response.ext_fields["transactionId"] == UNIQ
        return Half(response.ext_fields["msgId"], int(response.ext_fields["queueOffset"]))

    def end(self, half: Half, kind: int, **overrides: str) -> RemotingCommand | None:
        fields = {
            "topic": TOPIC,
            "producerGroup": GROUP,
            "tranStateTableOffset": str(half.queue_offset),
            "commitLogOffset": str(half.commit_log_offset),
            "commitOrRollback": str(kind),
            "fromTransactionCheck": "false",
            "msgId": UNIQ,
            "transactionId": UNIQ,
        }
        fields.update(overrides)
        return self.run(RemotingCommand.request(RequestCode.END_TRANSACTION, fields))

    def messages(self, topic: str, queue_id: int) -> list[StoredMessage]:
        result = self.store.get_message(topic, queue_id, 0, 100)
        return [decode_record(buffer) for buffer in result.buffers]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    clock = ManualClock(NOW)
    store = MessageStore(small_config(tmp_path / "store"), store_host=STORE_HOST, clock=clock)
    store.dispatcher.schedule_delays_ms = DELAY_LEVELS
    store.load()
    yield Broker(store, clock)
    store.close()


def test_a_transactional_send_is_stored_as_a_half_and_not_in_its_topic(broker: Broker) -> None:
    half = broker.send_half()
    assert broker.messages(TOPIC, 2) == []
    stored = broker.messages(HALF_TOPIC, 0)
    assert len(stored) == 1
    assert stored[0].physical_offset == half.commit_log_offset
    assert stored[0].queue_offset == half.queue_offset == 0
    assert stored[0].properties["REAL_TOPIC"] == TOPIC
    assert stored[0].properties["REAL_QID"] == "2"
    assert stored[0].body == b"order body"


def test_a_broker_that_rejects_transactions_stores_no_half(broker: Broker) -> None:
    broker.put_path.settings = replace(broker.put_path.settings, reject_transaction_message=True)
    fields = {
        "a": GROUP,
        "b": TOPIC,
        "c": "TBW102",
        "d": "4",
        "e": "2",
        "f": "0",
        "g": str(NOW),
        "h": "0",
        "i": encode_properties({"TRAN_MSG": "true", "PGROUP": GROUP}),
    }
    response = broker.run(
        RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, b"x"), "send"
    )
    assert response is not None
    assert response.code == ResponseCode.NO_PERMISSION
    assert "transaction message is forbidden" in (response.remark or "")
    assert broker.messages(HALF_TOPIC, 0) == []


def test_a_commit_stores_the_message_in_its_topic_and_an_op_record(broker: Broker) -> None:
    half = broker.send_half()
    response = broker.end(half, TRANSACTION_COMMIT_TYPE)
    assert response is not None
    assert response.code == ResponseCode.SUCCESS, response.remark
    [committed] = broker.messages(TOPIC, 2)
    assert committed.body == b"order body"
    assert committed.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
    assert committed.prepared_transaction_offset == half.commit_log_offset
    assert committed.properties["UNIQ_KEY"] == UNIQ
    assert committed.properties["KEYS"] == "order-1"
    assert "REAL_TOPIC" not in committed.properties
    assert "TRAN_MSG" not in committed.properties
    [op] = broker.messages(OP_TOPIC, 0)
    assert op.body == b"0,"
    assert op.properties["TAGS"] == "d"


def test_a_committed_message_with_a_delay_level_is_delayed_after_its_commit(
    broker: Broker,
) -> None:
    """As RocketMQ 5: the half keeps DELAY and is not delayed (it waits for its end); the
    committed message goes through the schedule topic and reaches its topic when due."""
    half = broker.send_half(DELAY="2")
    [stored_half] = broker.messages(HALF_TOPIC, 0)
    assert stored_half.properties["DELAY"] == "2"
    assert broker.messages(SCHEDULE_TOPIC, 1) == []

    response = broker.end(half, TRANSACTION_COMMIT_TYPE)
    assert response is not None
    assert response.code == ResponseCode.SUCCESS, response.remark
    assert broker.messages(TOPIC, 2) == []
    [scheduled] = broker.messages(SCHEDULE_TOPIC, 1)  # level 2 is queue 1
    assert scheduled.properties["REAL_TOPIC"] == TOPIC
    assert scheduled.properties["REAL_QID"] == "2"
    assert scheduled.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
    assert [op.body for op in broker.messages(OP_TOPIC, 0)] == [b"0,"]

    delivery = DelayDelivery(broker.store, broker.put_path, DelayLevels(DELAY_LEVELS), broker.clock)
    delivery.load(None)
    broker.clock.advance(4.9)
    assert asyncio.run(delivery.deliver_due()).delivered == 0
    broker.clock.advance(0.1)
    assert asyncio.run(delivery.deliver_due()).delivered == 1
    broker.store.dispatch_now()
    [committed] = broker.messages(TOPIC, 2)
    assert committed.body == b"order body"
    assert committed.properties["UNIQ_KEY"] == UNIQ
    assert committed.prepared_transaction_offset == half.commit_log_offset


def test_a_rolled_back_half_with_a_delay_level_leaves_nothing_scheduled(broker: Broker) -> None:
    half = broker.send_half(DELAY="2")
    response = broker.end(half, TRANSACTION_ROLLBACK_TYPE)
    assert response is not None
    assert response.code == ResponseCode.SUCCESS
    assert broker.messages(SCHEDULE_TOPIC, 1) == []
    assert broker.messages(TOPIC, 2) == []


def test_a_rollback_stores_only_the_op_record(broker: Broker) -> None:
    half = broker.send_half()
    response = broker.end(half, TRANSACTION_ROLLBACK_TYPE)
    assert response is not None
    assert response.code == ResponseCode.SUCCESS
    assert broker.messages(TOPIC, 2) == []
    assert [op.body for op in broker.messages(OP_TOPIC, 0)] == [b"0,"]


@pytest.mark.parametrize("kind", [TRANSACTION_NOT_TYPE, 5])
def test_unknown_and_unknowable_states_get_no_answer_and_change_nothing(
    broker: Broker, kind: int
) -> None:
    half = broker.send_half()
    assert broker.end(half, kind) is None
    assert broker.messages(TOPIC, 2) == []
    assert broker.messages(OP_TOPIC, 0) == []


@pytest.mark.parametrize(
    ("override", "remark"),
    [
        ({"producerGroup": "other"}, "The producer group wrong"),
        ({"tranStateTableOffset": "1"}, "The transaction state table offset wrong"),
        ({"commitLogOffset": "999999"}, "Find prepared transaction message failed"),
    ],
)
def test_an_end_that_does_not_match_the_half_changes_nothing(
    broker: Broker, override: dict[str, str], remark: str
) -> None:
    half = broker.send_half()
    response = broker.end(half, TRANSACTION_COMMIT_TYPE, **override)
    assert response is not None
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark == remark
    assert broker.messages(TOPIC, 2) == []
    assert broker.messages(OP_TOPIC, 0) == []


def test_an_end_naming_a_committed_message_is_refused(broker: Broker) -> None:
    half = broker.send_half()
    broker.end(half, TRANSACTION_COMMIT_TYPE)
    [committed] = broker.messages(TOPIC, 2)
    forged = Half(
        create_offset_msg_id(STORE_HOST, committed.physical_offset), committed.queue_offset
    )
    response = broker.end(forged, TRANSACTION_ROLLBACK_TYPE)
    assert response is not None
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "not a half message" in (response.remark or "")
    assert len(broker.messages(OP_TOPIC, 0)) == 1


def test_a_header_without_a_required_field_is_a_system_error(broker: Broker) -> None:
    half = broker.send_half()
    request = RemotingCommand.request(
        RequestCode.END_TRANSACTION,
        {"producerGroup": GROUP, "commitOrRollback": "8", "msgId": UNIQ},
    )
    response = broker.run(request)
    assert response is not None
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "tranStateTableOffset" in (response.remark or "")
    response = broker.end(half, TRANSACTION_COMMIT_TYPE, commitLogOffset="12x")
    assert response is not None
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "commitLogOffset" in (response.remark or "")
    assert broker.messages(TOPIC, 2) == []


def test_a_slave_refuses_to_end_transactions(tmp_path: Path) -> None:
    clock = ManualClock(NOW)
    store = MessageStore(small_config(tmp_path / "slave"), store_host=STORE_HOST, clock=clock)
    store.load()
    try:
        slave = Broker(store, clock, slave=True)
        half = slave.send_half()
        response = slave.end(half, TRANSACTION_COMMIT_TYPE)
        assert response is not None
        assert response.code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert slave.messages(TOPIC, 2) == []
    finally:
        store.close()


def test_past_its_immunity_only_a_check_back_may_end_a_half(broker: Broker) -> None:
    half = broker.send_half(CHECK_IMMUNITY_TIME_IN_SECONDS="10")
    broker.clock.advance(12)
    response = broker.end(half, TRANSACTION_COMMIT_TYPE)
    assert response is not None
    assert response.code == ResponseCode.ILLEGAL_OPERATION
    assert broker.messages(TOPIC, 2) == []
    response = broker.end(half, TRANSACTION_COMMIT_TYPE, fromTransactionCheck="true")
    assert response is not None
    assert response.code == ResponseCode.SUCCESS
    assert len(broker.messages(TOPIC, 2)) == 1
