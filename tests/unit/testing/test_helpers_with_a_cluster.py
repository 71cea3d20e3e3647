"""The helpers with real clients, against one in-process cluster: `started` starts and closes
every kind of client, and a MessageRecorder is a working listener for both client APIs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pocketmq.client as blocking
from pocketmq.client.aio import (
    Admin,
    ConsumeFromWhere,
    LitePullConsumer,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from pocketmq.testing import InProcessCluster, MessageRecorder, async_wait_until, started
from pocketmq.testing.cluster import start_cluster

FROM_FIRST = ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET


class Committing:
    async def execute_local_transaction(self, message: Message, arg: object) -> Any:
        return LocalTransactionState.COMMIT_MESSAGE

    async def check_local_transaction(self, message: MessageExt) -> Any:
        return LocalTransactionState.COMMIT_MESSAGE


def test_every_client_kind_runs_in_started_and_a_recorder_sees_its_messages(
    pocketmq_cluster: InProcessCluster,
) -> None:
    namesrv = pocketmq_cluster.namesrv_addr

    async def scenario() -> None:
        recorder = MessageRecorder()
        consumer = PushConsumer("g-helpers", namesrv=namesrv, consume_from_where=FROM_FIRST)
        consumer.subscribe("Helpers")
        consumer.register_listener(recorder)
        puller = LitePullConsumer("g-helpers-pull", namesrv=namesrv, consume_from_where=FROM_FIRST)
        puller.subscribe("Helpers")
        producer = Producer("p-helpers", namesrv=namesrv)
        transactional = TransactionProducer("tp-helpers", Committing(), namesrv=namesrv)
        admin = Admin([namesrv])
        async with started(producer, transactional, consumer, puller, admin):
            ids = {(await producer.send(Message("Helpers", b"plain"))).msg_id}
            result = await transactional.send_in_transaction(Message("Helpers", b"committed"))
            ids.add(result.msg_id)
            await recorder.wait_for_ids(ids)
            await recorder.wait_for(2)
            polled: list[MessageExt] = []

            async def polled_both() -> bool:
                polled.extend(await puller.poll(0.2))
                return {m.body for m in polled} >= {b"plain", b"committed"}

            await async_wait_until(polled_both, "both messages polled")
            assert "Helpers" in await admin.topic_list()
        assert sorted(recorder.bodies()) == [b"committed", b"plain"]
        assert recorder.ids() == ids

    asyncio.run(scenario())


def test_a_recorder_listens_to_a_blocking_consumer(pocketmq_cluster: InProcessCluster) -> None:
    namesrv = pocketmq_cluster.namesrv_addr
    recorder = MessageRecorder()
    with blocking.Producer(group="p-blocking-helpers", namesrv=namesrv) as producer:
        sent = producer.send(Message("HelpersBlocking", b"from a thread"))
        consumer = blocking.PushConsumer(
            "g-blocking-helpers", namesrv=namesrv, consume_from_where=FROM_FIRST
        )
        consumer.subscribe("HelpersBlocking")
        consumer.register_listener(recorder)
        with consumer:
            asyncio.run(recorder.wait_for_ids({sent.msg_id}))
    assert recorder.bodies() == [b"from a thread"]


def test_a_stopped_cluster_has_closed_its_loop_and_stops_again_at_once(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "store")
    cluster.stop()
    assert cluster.loop.is_closed(), "the loop's descriptors went with the stop"
    assert not cluster.thread.is_alive()
    began = time.monotonic()
    cluster.stop()  # e.g. a test's own stop, then its fixture's
    assert time.monotonic() - began < 1.0
