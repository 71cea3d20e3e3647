"""The transaction check-back, one pass at a time (`TransactionalMessageServiceImpl.check`,
`TransactionalMessageCheckService`), on a real store in tmp_path with a manual clock and a
producer channel that records what it is sent."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pocketmq.broker.clients import ClientRegistry, HeartbeatData
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.transaction.check_service import (
    CheckRound,
    RoundRobinProducers,
    TransactionCheckService,
)
from pocketmq.broker.transaction.half_messages import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    TRANSACTION_GROUP,
    CheckSettings,
    to_half,
)
from pocketmq.broker.transaction.handlers import EndTransactionHandler
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import small_config

NOW = 1_700_000_000_000
STORE_HOST = ("192.168.0.10", 10911)
TOPIC = "Orders"
GROUP = "tx-group"
SETTINGS = CheckSettings(interval_ms=1000, timeout_ms=6000, check_max=3)


@dataclass
class RecordingChannel:
    """A producer's connection: keeps the requests it was sent."""

    remote_address: str = "10.0.0.7:52000"
    is_closed: bool = False
    sent: list[RemotingCommand] = field(default_factory=list)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        self.sent.append(request)


class Broker:
    """A store, the check-back and the END_TRANSACTION handler, driven pass by pass."""

    def __init__(self, store: MessageStore, clock: ManualClock) -> None:
        self.store = store
        self.clock = clock
        self.offsets = ConsumerOffsetTable()
        self.registry = ClientRegistry()
        self.channel = RecordingChannel()
        put_path = PutPath(store, clock, PutSettings())
        self.checks = TransactionCheckService(
            store,
            put_path,
            self.offsets,
            RoundRobinProducers(self.registry).pick,
            clock,
            broker_name="broker-a",
            settings=SETTINGS,
        )
        self.end_handler = EndTransactionHandler(
            store, put_path, clock, transaction_timeout_ms=6000
        )

    def connect_producer(self) -> None:
        self.registry.heartbeat(HeartbeatData("10.0.0.7@1", [GROUP], []), self.channel, NOW)

    def put_half(self, **properties: str) -> StoredMessage:
        props = {"UNIQ_KEY": "UNIQ-1", "TRAN_MSG": "true", "PGROUP": GROUP, **properties}
        message = MessageToStore(
            topic=TOPIC,
            body=b"order body",
            properties=encode_properties(props),
            queue_id=1,
            born_timestamp=self.clock.now_ms(),
            born_host=("10.0.0.7", 52000),
        )
        result = self.store.put_messages_now([to_half(message)])
        assert result.ok
        stored = self.store.look_message_by_offset(result.physical_offsets[0])
        assert stored is not None
        return stored

    def check_once(self, advance_s: float) -> CheckRound:
        self.clock.advance(advance_s)

        async def run() -> CheckRound:
            outcome = await self.checks.check_once()
            self.store.dispatch_now()
            return outcome

        return asyncio.run(run())

    def end(self, half_queue_offset: int, commit_log_offset: int, kind: int) -> None:
        fields = {
            "producerGroup": GROUP,
            "tranStateTableOffset": str(half_queue_offset),
            "commitLogOffset": str(commit_log_offset),
            "commitOrRollback": str(kind),
            "fromTransactionCheck": "true",
            "msgId": "UNIQ-1",
        }

        async def run() -> RemotingCommand | None:
            response = await self.end_handler.handle(
                RemotingCommand.request(RequestCode.END_TRANSACTION, fields), self.channel
            )
            self.store.dispatch_now()
            return response

        response = asyncio.run(run())
        assert response is not None
        assert response.code == ResponseCode.SUCCESS, response.remark

    def answer(self, check: RemotingCommand, kind: int) -> None:
        fields = check.ext_fields
        self.end(int(fields["tranStateTableOffset"]), int(fields["commitLogOffset"]), kind)

    def messages(self, topic: str, queue_id: int = 0) -> list[StoredMessage]:
        result = self.store.get_message(topic, queue_id, 0, 100)
        return [decode_record(buffer) for buffer in result.buffers]

    def offset(self, topic: str) -> int | None:
        return self.offsets.query(TRANSACTION_GROUP, topic, 0)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    clock = ManualClock(NOW)
    store = MessageStore(small_config(tmp_path / "store"), store_host=STORE_HOST, clock=clock)
    store.load()
    yield Broker(store, clock)
    store.close()


def test_a_half_younger_than_the_timeout_is_not_checked(broker: Broker) -> None:
    broker.connect_producer()
    broker.put_half()
    outcome = broker.check_once(advance_s=5)
    assert outcome == CheckRound()
    assert broker.channel.sent == []
    assert broker.offset(HALF_TOPIC) is None
    assert len(broker.messages(HALF_TOPIC)) == 1


def test_an_old_half_is_asked_about_through_a_fresh_copy(broker: Broker) -> None:
    broker.connect_producer()
    half = broker.put_half()
    outcome = broker.check_once(advance_s=7)
    assert (outcome.checked, outcome.asked) == (1, 1)
    [check] = broker.channel.sent
    assert check.code == RequestCode.CHECK_TRANSACTION_STATE
    assert check.is_oneway
    original, copy = broker.messages(HALF_TOPIC)
    assert original.physical_offset == half.physical_offset
    assert copy.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert copy.born_timestamp == half.born_timestamp
    assert check.ext_fields["tranStateTableOffset"] == str(copy.queue_offset) == "1"
    assert check.ext_fields["commitLogOffset"] == str(copy.physical_offset)
    assert check.ext_fields["msgId"] == "UNIQ-1"
    asked_about = decode_record(check.body)
    assert (asked_about.topic, asked_about.queue_id) == (TOPIC, 1)
    assert asked_about.body == b"order body"
    assert broker.offset(HALF_TOPIC) == 1


def test_a_half_committed_after_its_check_is_delivered_once_and_not_checked_again(
    broker: Broker,
) -> None:
    broker.connect_producer()
    broker.put_half()
    broker.check_once(advance_s=7)
    broker.answer(broker.channel.sent[0], TRANSACTION_COMMIT_TYPE)
    outcome = broker.check_once(advance_s=1)
    assert (outcome.checked, outcome.resolved) == (0, 1)
    assert len(broker.channel.sent) == 1
    assert [m.body for m in broker.messages(TOPIC, 1)] == [b"order body"]
    assert broker.offset(HALF_TOPIC) == 2
    assert broker.offset(OP_TOPIC) == 1
    assert broker.check_once(advance_s=10) == CheckRound()


def test_a_half_ended_before_it_is_due_is_passed_over(broker: Broker) -> None:
    broker.connect_producer()
    half = broker.put_half()
    broker.end(half.queue_offset, half.physical_offset, TRANSACTION_ROLLBACK_TYPE)
    outcome = broker.check_once(advance_s=7)
    assert (outcome.checked, outcome.resolved) == (0, 1)
    assert broker.channel.sent == []
    assert broker.messages(TOPIC, 1) == []
    assert (broker.offset(HALF_TOPIC), broker.offset(OP_TOPIC)) == (1, 1)


def test_a_half_nobody_ends_is_discarded_after_check_max_checks(broker: Broker) -> None:
    broker.connect_producer()
    broker.put_half()
    discarded_after = None
    for check_pass in range(1, 11):
        if broker.check_once(advance_s=7).discarded:
            discarded_after = check_pass
            break
    assert discarded_after == SETTINGS.check_max + 1
    assert len(broker.channel.sent) == SETTINGS.check_max
    [kept] = broker.messages(CHECK_MAX_TIME_TOPIC)
    assert kept.properties["TRANSACTION_CHECK_TIMES"] == str(SETTINGS.check_max)
    assert kept.properties["REAL_TOPIC"] == TOPIC
    assert broker.check_once(advance_s=7) == CheckRound()
    assert len(broker.channel.sent) == SETTINGS.check_max
    assert broker.messages(TOPIC, 1) == []


def test_an_unanswered_check_is_repeated_only_after_the_timeout(broker: Broker) -> None:
    broker.connect_producer()
    broker.put_half()
    assert broker.check_once(advance_s=7).checked == 1
    for _ in range(6):
        assert broker.check_once(advance_s=1).checked == 0
    assert broker.check_once(advance_s=1).checked == 1
    times = [m.properties.get("TRANSACTION_CHECK_TIMES") for m in broker.messages(HALF_TOPIC)]
    assert times == [None, "1", "2"]


def test_without_a_connected_producer_a_check_still_counts(broker: Broker) -> None:
    broker.put_half()
    outcome = broker.check_once(advance_s=7)
    assert (outcome.checked, outcome.asked) == (1, 0)
    assert broker.messages(HALF_TOPIC)[-1].properties["TRANSACTION_CHECK_TIMES"] == "1"


def test_a_half_inside_its_immunity_moves_forward_and_its_first_end_resolves_it(
    broker: Broker,
) -> None:
    broker.connect_producer()
    half = broker.put_half(CHECK_IMMUNITY_TIME_IN_SECONDS="60")
    outcome = broker.check_once(advance_s=7)
    assert (outcome.forwarded, outcome.checked) == (1, 0)
    copy = broker.messages(HALF_TOPIC)[-1]
    assert copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    # The producer ends the half it sent (offset 0), not the copy.
    broker.end(half.queue_offset, half.physical_offset, TRANSACTION_COMMIT_TYPE)
    outcome = broker.check_once(advance_s=1)
    assert (outcome.resolved, outcome.forwarded, outcome.checked) == (1, 0, 0)
    assert broker.channel.sent == []
    assert len(broker.messages(TOPIC, 1)) == 1


def test_checks_go_to_live_producers_of_the_group_in_turn() -> None:
    registry = ClientRegistry()
    live = [RecordingChannel("10.0.0.1:1"), RecordingChannel("10.0.0.2:2")]
    dead = RecordingChannel("10.0.0.3:3", is_closed=True)
    for index, channel in enumerate([*live, dead]):
        registry.heartbeat(HeartbeatData(f"client-{index}", [GROUP], []), channel, NOW)
    producers = RoundRobinProducers(registry)
    picked = [producers.pick(GROUP) for _ in range(6)]
    assert dead not in picked
    assert {id(channel) for channel in picked} == {id(channel) for channel in live}
    assert producers.pick("nobody") is None
