"""Master/Slave replication with real broker processes on loopback: a SYNC_MASTER answers once
its slave has the bytes, the send result says so, the slave refuses writes, keeps serving reads
while the master is down, resumes after restarts of either side, and ends byte for byte equal
to its master; a slave copies its master's topics, groups and offsets."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pocketmq.client.aio import (
    ClientInstance,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
    SendStatus,
)
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.properties import encode_properties
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import MessageRecorder, async_wait_until, wait_until
from tests.integration.replication import BrokerGroup


def commit_log_digest(data_dir: Path) -> tuple[list[str], str]:
    """The CommitLog files' names and a digest of their bytes (unwritten space is zeros)."""
    files = sorted((data_dir / "commitlog").iterdir())
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.read_bytes())
    return [path.name for path in files], digest.hexdigest()


async def send_until_replicated(producer: Producer, topic: str) -> None:
    """Sends until a result says a slave has the message (the slave connected)."""

    async def replicated() -> bool:
        return (await producer.send(Message(topic, b"warm-up"))).replicas == 2

    await async_wait_until(replicated, "a send acknowledged by the slave", poll_s=0.2)


def admin(namesrv: str, *args: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def wait_until_slaves_caught_up(broker_group: BrokerGroup) -> None:
    """Waits until `haStatus` shows every slave at its master's end (and one slave at all)."""
    status: list[Any] = []

    def caught_up() -> bool:
        status[:] = json.loads(
            admin(broker_group.namesrv_addr, "haStatus", "-c", "DefaultCluster", "--json")
        )
        links = [c for b in status if b.get("master") for c in b.get("haConnectionInfo", [])]
        return bool(links) and all(c["diff"] == 0 and c["lagMs"] == 0 for c in links)

    wait_until(caught_up, "slaves at their master's end", poll_s=0.2, describe=lambda: status)


def test_a_sync_master_answers_after_the_slave_and_the_slave_serves_reads_alone(
    broker_group: BrokerGroup,
) -> None:
    broker_group.add("master", "broker-a", 0, "SYNC_MASTER", flushDiskType="SYNC_FLUSH")
    broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("master")
    broker_group.start("slave")
    bodies = {f"order-{i}".encode() * 20 for i in range(300)}

    async def produce() -> None:
        async with Producer("ha-producer", namesrv=broker_group.namesrv_addr) as producer:
            await send_until_replicated(producer, "Replicated")
            for body in sorted(bodies):
                result = await producer.send(Message("Replicated", body, keys="k"))
                assert result.status is SendStatus.SEND_OK
                assert (result.durability, result.replicas) == ("FLUSHED", 2)

    asyncio.run(produce())
    broker_group.kill("master")  # the slave alone must serve every acknowledged message

    async def consume() -> None:
        inbox = MessageRecorder()
        consumer = PushConsumer(
            "ha-readers",
            namesrv=broker_group.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("Replicated")
        consumer.register_listener(inbox)
        async with consumer:
            await inbox.wait_for_bodies(bodies)

    asyncio.run(consume())
    broker_group.start("master")  # comes back; the slave follows it again from its own offset

    async def more() -> None:
        async with Producer("ha-producer", namesrv=broker_group.namesrv_addr) as producer:
            await send_until_replicated(producer, "Replicated")

    asyncio.run(more())
    broker_group.stop("slave")
    broker_group.stop("master")
    master = commit_log_digest(broker_group.brokers["master"].data_dir)
    assert master == commit_log_digest(broker_group.brokers["slave"].data_dir)


def test_a_sync_master_without_a_slave_says_so_and_still_stores(broker_group: BrokerGroup) -> None:
    broker_group.add("master", "broker-a", 0, "SYNC_MASTER")
    broker_group.start("master")

    async def scenario() -> None:
        async with Producer("lonely", namesrv=broker_group.namesrv_addr, retry_times=0) as producer:
            result = await producer.send(Message("Lonely", b"kept"))
        assert result.status is SendStatus.SLAVE_NOT_AVAILABLE
        assert result.replicas == 1
        inbox = MessageRecorder()
        consumer = PushConsumer(
            "lonely-readers",
            namesrv=broker_group.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("Lonely")
        consumer.register_listener(inbox)
        async with consumer:
            await inbox.wait_for_bodies({b"kept"})

    asyncio.run(scenario())


def test_a_slave_refuses_writes_with_a_clear_answer(broker_group: BrokerGroup) -> None:
    broker_group.add("master", "broker-a", 0, "ASYNC_MASTER")
    slave = broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("master")
    broker_group.start("slave")

    async def send_to_slave() -> RemotingCommand:
        client = RemotingClient()
        header = {
            "producerGroup": "pg",
            "topic": "TBW102",
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": "4",
            "queueId": "0",
            "sysFlag": "0",
            "bornTimestamp": "1700000000000",
            "flag": "0",
            "properties": encode_properties({"WAIT": "true"}),
        }
        try:
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body=b"no")
            return await client.invoke(slave.address, request, 5)
        finally:
            await client.close()

    response = asyncio.run(send_to_slave())
    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE
    assert "slave" in (response.remark or "")


def test_a_slave_copies_topics_groups_and_offsets_and_resumes_after_a_kill(
    broker_group: BrokerGroup,
) -> None:
    broker_group.add("master", "broker-a", 0, "ASYNC_MASTER")
    slave = broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("master")
    admin(
        broker_group.namesrv_addr, "updateTopic", "-t", "Synced", "-c", "DefaultCluster", "-r", "3"
    )
    admin(
        broker_group.namesrv_addr,
        "updateSubGroup",
        "-c",
        "DefaultCluster",
        "-g",
        "g-synced",
        "-r",
        "5",
    )

    async def produce_and_commit(count: int) -> None:
        async with Producer("sync-producer", namesrv=broker_group.namesrv_addr) as producer:
            for i in range(count):
                await producer.send(Message("Synced", f"m{i}".encode()))
        client = RemotingClient()
        try:
            header = {
                "consumerGroup": "g-synced",
                "topic": "Synced",
                "queueId": "0",
                "commitOffset": "2",
            }
            request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header)
            response = await client.invoke(broker_group.brokers["master"].address, request, 5)
            assert response.code == ResponseCode.SUCCESS
        finally:
            await client.close()

    asyncio.run(produce_and_commit(30))
    broker_group.start("slave")

    async def on_slave(code: int, header: dict[str, str]) -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(slave.address, RemotingCommand.request(code, header), 5)
        finally:
            await client.close()

    async def slave_metadata() -> tuple[Any, Any] | None:
        topics = await on_slave(RequestCode.GET_ALL_TOPIC_CONFIG, {})
        offset = await on_slave(
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": "g-synced", "topic": "Synced", "queueId": "0"},
        )
        groups = await on_slave(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
        table = json.loads(topics.body or b"{}").get("topicConfigTable", {})
        group_table = json.loads(groups.body or b"{}").get("subscriptionGroupTable", {})
        if (
            "Synced" in table
            and offset.ext_fields.get("offset") == "2"
            and "g-synced" in group_table
        ):
            return table, group_table
        return None

    async def slave_has_metadata() -> None:
        table, group_table = await async_wait_until(
            slave_metadata, "the slave copied the master's metadata", poll_s=0.2
        )
        assert table["Synced"]["readQueueNums"] == 3
        assert group_table["g-synced"]["retryMaxTimes"] == 5

    asyncio.run(slave_has_metadata())
    # The slave dies mid-stream and comes back: it resumes from its own offset.
    asyncio.run(produce_and_commit(200))
    broker_group.kill("slave")
    asyncio.run(produce_and_commit(200))
    broker_group.start("slave")
    asyncio.run(produce_and_commit(10))
    wait_until_slaves_caught_up(broker_group)
    broker_group.stop("master")
    broker_group.stop("slave")
    master = commit_log_digest(broker_group.brokers["master"].data_dir)
    assert master == commit_log_digest(slave.data_dir)


def runtime_info(address: str) -> dict[str, str]:
    async def ask() -> RemotingCommand:
        client = RemotingClient()
        try:
            request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO, {})
            return await client.invoke(address, request, 5)
        finally:
            await client.close()

    table: dict[str, str] = json.loads(asyncio.run(ask()).body)["table"]
    return table


def test_a_reader_far_behind_is_sent_to_the_slave(broker_group: BrokerGroup) -> None:
    # Ratio 0: any reader behind the head counts as far behind (by default 40% of memory).
    broker_group.add(
        "master", "broker-a", 0, "ASYNC_MASTER",
        slaveReadEnable="true", accessMessageInMemoryMaxRatio="0",
    )  # fmt: skip
    slave = broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("master")
    broker_group.start("slave")
    bodies = {f"backlog-{i}".encode() for i in range(500)}

    async def scenario() -> None:
        async with Producer("backlog", namesrv=broker_group.namesrv_addr) as producer:
            for body in sorted(bodies):
                await producer.send(Message("Backlog", body))
        await asyncio.to_thread(wait_until_slaves_caught_up, broker_group)
        inbox = MessageRecorder()
        consumer = PushConsumer(
            "backlog-readers",
            namesrv=broker_group.namesrv_addr,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            pull_batch_size=32,
        )
        consumer.subscribe("Backlog")
        consumer.register_listener(inbox)
        async with consumer:
            await inbox.wait_for_bodies(bodies)

    asyncio.run(scenario())
    assert int(runtime_info(slave.address)["pulledMessageCount"]) > 0


def test_producers_move_to_the_other_master_while_one_is_down(broker_group: BrokerGroup) -> None:
    broker_group.add("a", "broker-a", 0, "ASYNC_MASTER")
    broker_group.add("b", "broker-b", 0, "ASYNC_MASTER")
    broker_group.start("a")
    broker_group.start("b")
    admin(
        broker_group.namesrv_addr, "updateTopic", "-t", "Spread", "-c", "DefaultCluster", "-w", "2"
    )

    async def send(count: int) -> dict[str, int]:
        brokers: dict[str, int] = {}
        async with Producer(
            "spread", namesrv=broker_group.namesrv_addr, send_timeout_s=3
        ) as producer:
            for i in range(count):
                result = await producer.send(Message("Spread", f"s{i}".encode()))
                assert result.status is SendStatus.SEND_OK
                brokers[result.queue.broker_name] = brokers.get(result.queue.broker_name, 0) + 1
        return brokers

    assert set(asyncio.run(send(40))) == {"broker-a", "broker-b"}
    broker_group.kill("a")
    # Every send succeeds: a send to broker-a fails over to broker-b within its retries.
    assert set(asyncio.run(send(40))) == {"broker-b"}
    broker_group.start("a")
    assert set(asyncio.run(send(40))) == {"broker-a", "broker-b"}


def offset_on(address: str, group_name: str, topic: str, queue_id: int) -> int:
    async def ask() -> RemotingCommand:
        client = RemotingClient()
        try:
            header = {"consumerGroup": group_name, "topic": topic, "queueId": str(queue_id)}
            request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header)
            return await client.invoke(address, request, 5)
        finally:
            await client.close()

    response = asyncio.run(ask())
    return int(response.ext_fields.get("offset", -1)) if response.code == 0 else -1


def test_progress_made_on_the_slave_is_kept_when_the_master_returns(
    broker_group: BrokerGroup,
) -> None:
    master = broker_group.add("master", "broker-a", 0, "ASYNC_MASTER")
    slave = broker_group.add("slave", "broker-a", 1, "SLAVE")
    broker_group.start("master")
    broker_group.start("slave")
    one_queue = ["-c", "DefaultCluster", "-w", "1", "-r", "1"]
    admin(broker_group.namesrv_addr, "updateTopic", "-t", "Progress", *one_queue)
    first = {f"first-{i}".encode() for i in range(50)}
    second = {f"second-{i}".encode() for i in range(50)}

    async def send(bodies: set[bytes]) -> None:
        async with Producer("progress", namesrv=broker_group.namesrv_addr) as producer:
            for body in sorted(bodies):
                await producer.send(Message("Progress", body))

    async def consume(expected: set[bytes], until: Any) -> set[bytes]:
        """Consumes until `expected` arrived and `until()` holds; returns everything seen."""
        inbox = MessageRecorder()
        instance = ClientInstance(broker_group.namesrv_addr, route_refresh_interval_s=1)
        consumer = PushConsumer(
            "progress-readers",
            instance=instance,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            persist_interval_s=0.5,
        )
        consumer.subscribe("Progress")
        consumer.register_listener(inbox)
        async with consumer:
            await inbox.wait_for_bodies(expected)
            await asyncio.to_thread(poll_until, until)
        await instance.close()
        return set(inbox.bodies())

    def poll_until(condition: Any) -> None:
        wait_until(condition, "the consumer's progress committed", poll_s=0.2)

    def progress(address: str) -> int:
        return offset_on(address, "progress-readers", "Progress", 0)

    asyncio.run(send(first))
    asyncio.run(
        consume(first, lambda: offset_on(slave.address, "progress-readers", "Progress", 0) == 50)
    )
    asyncio.run(send(second))
    wait_until_slaves_caught_up(broker_group)
    broker_group.kill("master")
    # A reader started while the master is down resumes from the slave's copy of the progress,
    # and its own progress, committed to the slave, survives the master's return.
    seen = asyncio.run(consume(second, lambda: progress(slave.address) == 100))
    assert not seen & first, "the slave lost the group's progress"
    broker_group.start("master")
    # With no consumer running, the slave hands the progress back to the returned master.
    poll_until(lambda: progress(master.address) == 100)
    assert progress(master.address) == 100
    assert progress(slave.address) == 100
