"""Transactional messages end to end: our TransactionProducer and PushConsumer against a real
broker on 127.0.0.1 (commit, rollback, unknown then checked back, unknown until discarded).

The broker checks back quickly here (`transactionTimeOut` 1 s, `transactionCheckInterval`
0.5 s, `transactionCheckMax` 3). "Never delivered" and "exactly once" are shown without
waiting on the clock alone: the check-back's own offset in the half queue (group
CID_RMQ_SYS_TRANS) moving past every half proves it has nothing left to ask about, and a marker
sent after a message proves the consumer has read past it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from pocketmq import client as blocking
from pocketmq.broker.transaction.half_messages import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    TRANSACTION_GROUP,
)
from pocketmq.client.aio import (
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SendStatus,
    TransactionProducer,
)
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.testing import DEFAULT_WAIT_S, MessageRecorder, async_wait_until
from pocketmq.testing.cluster import InProcessCluster, start_cluster

T = TypeVar("T")

CHECK_MAX = 3
COMMIT = LocalTransactionState.COMMIT_MESSAGE
ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE
UNKNOW = LocalTransactionState.UNKNOW


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessCluster]:
    started = start_cluster(
        tmp_path_factory.mktemp("store"),
        transaction_check_interval_ms=500,
        transaction_timeout_ms=1000,
        transaction_check_max=CHECK_MAX,
    )
    try:
        yield started
    finally:
        started.stop()


class Recorder:
    """A transaction listener with fixed answers that remembers what it was asked."""

    def __init__(
        self,
        execute: LocalTransactionState,
        check: LocalTransactionState = UNKNOW,
        during_execute: Callable[[], Any] | None = None,
    ) -> None:
        self.execute_answer = execute
        self.check_answer = check
        self.during_execute = during_execute
        self.executed: list[tuple[Message, object]] = []
        self.checked: list[MessageExt] = []

    async def execute_local_transaction(self, message: Message, arg: object) -> Any:
        self.executed.append((message, arg))
        if self.during_execute is not None:
            await self.during_execute()
        return self.execute_answer

    async def check_local_transaction(self, message: MessageExt) -> Any:
        self.checked.append(message)
        return self.check_answer


async def on_broker(cluster: InProcessCluster, work: Callable[[], T]) -> T:
    """Runs `work` on the broker's loop (its tables are not thread-safe) and returns its result."""

    async def run() -> T:
        return work()

    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), cluster.loop))


async def wait_until_checks_settled(
    cluster: InProcessCluster, timeout_s: float = DEFAULT_WAIT_S
) -> None:
    """Waits until the check-back has passed over every half stored so far."""

    def behind() -> int:
        store = cluster.broker.store
        assert store is not None
        end = store.get_max_offset_in_queue(HALF_TOPIC, 0)
        done = cluster.broker.offsets.query(TRANSACTION_GROUP, HALF_TOPIC, 0) or 0
        return end - done

    async def settled() -> bool:
        return await on_broker(cluster, behind) == 0

    await async_wait_until(
        settled, "the check-back passed every half", timeout_s=timeout_s, poll_s=0.1
    )


async def start_consumer(cluster: InProcessCluster, group: str, topic: str) -> PushConsumer:
    """A consumer that has read a first message of `topic`, so it surely owns its queues."""
    inbox = MessageRecorder()
    consumer = PushConsumer(
        group,
        namesrv=cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    consumer.register_listener(inbox)
    async with Producer(f"{group}-warmup", namesrv=cluster.namesrv_addr) as producer:
        await producer.send(Message(topic, b"warm-up"))
    await consumer.start()
    await inbox.wait_for_body(b"warm-up")
    consumer.inbox = inbox  # type: ignore[attr-defined]
    return consumer


def inbox_of(consumer: PushConsumer) -> MessageRecorder:
    inbox: MessageRecorder = consumer.inbox  # type: ignore[attr-defined]
    return inbox


def test_a_committed_message_is_delivered_exactly_once(cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        consumer = await start_consumer(cluster, "g-tx-commit", "TxCommit")
        listener = Recorder(COMMIT)
        try:
            async with TransactionProducer(
                "pg-tx-commit", listener, namesrv=cluster.namesrv_addr
            ) as producer:
                result = await producer.send_in_transaction(
                    Message("TxCommit", b"paid", keys="order-1", tags="t"), "order-1"
                )
                received = await inbox_of(consumer).wait_for_body(b"paid")
                await wait_until_checks_settled(cluster)
        finally:
            await consumer.close()
        assert result.status is SendStatus.SEND_OK
        assert result.local_transaction_state is COMMIT
        assert result.transaction_id == result.msg_id
        [(executed, arg)] = listener.executed
        assert arg == "order-1"
        assert executed.properties["__transactionId__"] == result.transaction_id
        assert listener.checked == []
        assert inbox_of(consumer).bodies().count(b"paid") == 1
        assert received.msg_id == result.msg_id
        assert (received.topic, received.tags, received.keys) == ("TxCommit", "t", ["order-1"])
        assert received.queue.queue_id == result.queue.queue_id

    asyncio.run(scenario())


def test_a_rolled_back_message_is_never_delivered(cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        consumer = await start_consumer(cluster, "g-tx-rollback", "TxRollback")
        listener = Recorder(ROLLBACK, check=COMMIT)
        try:
            async with (
                TransactionProducer(
                    "pg-tx-rollback", listener, namesrv=cluster.namesrv_addr
                ) as producer,
                Producer("pg-plain-rollback", namesrv=cluster.namesrv_addr) as plain,
            ):
                result = await producer.send_in_transaction(Message("TxRollback", b"cancelled"))
                assert result.queue in await plain.publish_queues("TxRollback")
                await plain.send(Message("TxRollback", b"marker"), queue=result.queue)
                await inbox_of(consumer).wait_for_body(b"marker")
                await wait_until_checks_settled(cluster)
        finally:
            await consumer.close()
        assert result.local_transaction_state is ROLLBACK
        # The checker would have said COMMIT: it was never asked.
        assert listener.checked == []
        assert b"cancelled" not in inbox_of(consumer).bodies()

    asyncio.run(scenario())


def test_a_half_is_invisible_until_its_transaction_commits(cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        consumer = await start_consumer(cluster, "g-tx-pending", "TxPending")
        inbox = inbox_of(consumer)
        seen_while_pending: list[bytes] = []

        async def meanwhile() -> None:
            # The half is stored; a message sent now is read while the half waits.
            async with Producer("pg-plain-pending", namesrv=cluster.namesrv_addr) as plain:
                await plain.send(Message("TxPending", b"sent while pending"))
            await inbox.wait_for_body(b"sent while pending")
            seen_while_pending.extend(inbox.bodies())

        listener = Recorder(COMMIT, during_execute=meanwhile)
        try:
            async with TransactionProducer(
                "pg-tx-pending", listener, namesrv=cluster.namesrv_addr
            ) as producer:
                result = await producer.send_in_transaction(Message("TxPending", b"pending"))
                await inbox.wait_for_body(b"pending")
        finally:
            await consumer.close()
        assert result.local_transaction_state is COMMIT
        assert b"sent while pending" in seen_while_pending
        assert b"pending" not in seen_while_pending
        assert inbox.bodies().count(b"pending") == 1

    asyncio.run(scenario())


def test_an_unknown_transaction_is_committed_by_the_check_back(cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        consumer = await start_consumer(cluster, "g-tx-unknown", "TxUnknown")
        listener = Recorder(UNKNOW, check=COMMIT)
        try:
            async with TransactionProducer(
                "pg-tx-unknown", listener, namesrv=cluster.namesrv_addr
            ) as producer:
                result = await producer.send_in_transaction(
                    Message("TxUnknown", b"settled later", keys="order-7")
                )
                received = await inbox_of(consumer).wait_for_body(b"settled later")
                await wait_until_checks_settled(cluster)
        finally:
            await consumer.close()
        assert result.local_transaction_state is UNKNOW
        assert len(listener.checked) == 1
        [asked] = listener.checked
        assert (asked.topic, asked.body, asked.keys) == ("TxUnknown", b"settled later", ["order-7"])
        assert asked.msg_id == result.msg_id
        assert asked.queue.topic == "TxUnknown"
        # Checked once, delivered once, and the consumer sees the message as it was sent.
        assert inbox_of(consumer).bodies().count(b"settled later") == 1
        assert received.msg_id == result.msg_id
        assert received.properties["TRANSACTION_CHECK_TIMES"] == "1"

    asyncio.run(scenario())


def test_a_transaction_unknown_forever_is_discarded_after_the_check_limit(
    cluster: InProcessCluster,
) -> None:
    def discarded_of(msg_id: str) -> Callable[[], list[StoredMessage]]:
        def find() -> list[StoredMessage]:
            store = cluster.broker.store
            assert store is not None
            result = store.get_message(CHECK_MAX_TIME_TOPIC, 0, 0, 1000)
            records = [decode_record(buffer) for buffer in result.buffers]
            return [r for r in records if r.properties.get("UNIQ_KEY") == msg_id]

        return find

    async def scenario() -> None:
        consumer = await start_consumer(cluster, "g-tx-forever", "TxForever")
        listener = Recorder(UNKNOW, check=UNKNOW)
        try:
            async with TransactionProducer(
                "pg-tx-forever", listener, namesrv=cluster.namesrv_addr
            ) as producer:
                result = await producer.send_in_transaction(Message("TxForever", b"limbo"))
                find = discarded_of(result.msg_id)
                await async_wait_until(
                    lambda: on_broker(cluster, find), "the half discarded", poll_s=0.1
                )
                await wait_until_checks_settled(cluster)
                discarded = await on_broker(cluster, find)
        finally:
            await consumer.close()
        assert len(discarded) == 1, "the half was not discarded in time"
        assert discarded[0].properties["TRANSACTION_CHECK_TIMES"] == str(CHECK_MAX)
        assert discarded[0].properties["REAL_TOPIC"] == "TxForever"
        assert len(listener.checked) == CHECK_MAX
        assert b"limbo" not in inbox_of(consumer).bodies()

    asyncio.run(scenario())


def test_the_blocking_producer_runs_a_plain_listener_and_commits(cluster: InProcessCluster) -> None:
    class Ledger:
        """A listener of plain functions, as code without an event loop writes it."""

        def __init__(self) -> None:
            self.executed: list[object] = []

        def execute_local_transaction(self, message: Message, arg: object) -> Any:
            self.executed.append(arg)
            return COMMIT

        def check_local_transaction(self, message: MessageExt) -> Any:
            return ROLLBACK

    async def receive() -> list[bytes]:
        consumer = await start_consumer(cluster, "g-tx-blocking", "TxBlocking")
        try:
            ledger = Ledger()
            with blocking.TransactionProducer(
                "pg-tx-blocking", ledger, namesrv=cluster.namesrv_addr
            ) as producer:
                result = await asyncio.to_thread(
                    producer.send_in_transaction, Message("TxBlocking", b"booked"), "row-7"
                )
            assert result.local_transaction_state is COMMIT
            assert ledger.executed == ["row-7"]
            await inbox_of(consumer).wait_for_body(b"booked")
            await wait_until_checks_settled(cluster)
            return inbox_of(consumer).bodies()
        finally:
            await consumer.close()

    assert asyncio.run(receive()).count(b"booked") == 1
