"""`pocketmq admin` against a real `pocketmq up`, and the broker's admin statistics handlers.

The CLI runs as `python -m pocketmq.cli.main admin ...` subprocesses, as a user would run it.
The handlers of `broker/admin_stats.py` are checked on servers built in this process, with the
CLI still a subprocess (run from the event loop, so the servers keep serving meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.server import BrokerServer
from pocketmq.client.admin import (
    AdminClient,
    AdminError,
    SubscriptionGroupSettings,
    TopicSettings,
)
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.namesrv.server import NamesrvConfig, NamesrvServer
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.store.config import MessageStoreConfig
from pocketmq.testing import ServerProcess

ServerFactory = Callable[..., ServerProcess]
CLI_TIMEOUT_S = 30


def admin_command(namesrv: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv]


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        admin_command(namesrv, *args), capture_output=True, text=True, timeout=CLI_TIMEOUT_S
    )


def ok(namesrv: str, *args: str) -> str:
    result = admin(namesrv, *args)
    assert result.returncode == 0, f"admin {args} failed: {result.stderr}"
    return result.stdout


def ok_json(namesrv: str, *args: str) -> Any:
    return json.loads(ok(namesrv, *args, "--json"))


def one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def cluster(run_server: ServerFactory, tmp_path: Path) -> str:
    """A NameServer and broker-a from `pocketmq up`; the NameServer address."""
    up = run_server(
        "up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(tmp_path / "up")
    )
    return up.address


def test_created_topic_shows_in_list_route_and_status(cluster: str) -> None:
    created = ok(
        cluster, "updateTopic", "-t", "Orders", "-c", "DefaultCluster", "-r", "4", "-w", "4"
    )
    assert "create topic to" in created
    assert "success." in created

    assert "Orders" in ok(cluster, "topicList").split()
    failing_over = ok(f"127.0.0.1:1;{cluster}", "topicList")  # the first NameServer is down
    assert "Orders" in failing_over.split()
    assert "Orders" in ok_json(cluster, "topicList")["topicList"]

    route_text = ok(cluster, "topicRoute", "-t", "Orders")
    assert route_text.splitlines()[0].split() == [
        "#ClusterName",
        "#BrokerName",
        "#BrokerAddrs",
        "#ReadQueue",
        "#WriteQueue",
        "#Perm",
    ]
    assert "broker-a" in route_text
    route = ok_json(cluster, "topicRoute", "-t", "Orders")
    (queue_data,) = route["queueDatas"]
    assert (queue_data["readQueueNums"], queue_data["writeQueueNums"]) == (4, 4)
    assert route["brokerDatas"][0]["brokerName"] == "broker-a"

    status = ok_json(cluster, "topicStatus", "-t", "Orders")
    assert [q["queueId"] for q in status["offsetTable"]] == [0, 1, 2, 3]
    assert all(q["maxOffset"] == 0 for q in status["offsetTable"])
    assert "#Min Offset" in ok(cluster, "topicStatus", "-t", "Orders")

    clusters = ok(cluster, "clusterList")
    assert "DefaultCluster" in clusters
    assert "broker-a" in clusters
    (broker,) = ok_json(cluster, "clusterList")["brokers"]
    assert broker["brokerName"] == "broker-a"
    assert broker["brokerId"] == 0

    ok(cluster, "deleteTopic", "-t", "Orders", "-c", "DefaultCluster")
    gone = one_line_failure(admin(cluster, "topicRoute", "-t", "Orders"))
    assert "topic Orders does not exist" in gone


def test_sent_message_is_found_by_id_key_offset_and_consume(cluster: str) -> None:
    ok(cluster, "updateTopic", "-t", "Payments", "-c", "DefaultCluster", "-r", "2", "-w", "2")
    sent = ok_json(
        cluster, "sendMessage", "-t", "Payments", "-p", "hello admin", "-k", "pay-7", "-c", "TagA"
    )
    assert sent["sendStatus"] == "SEND_OK"
    assert len(sent["offsetMsgId"]) == 32
    assert len(sent["msgId"]) == 32

    by_offset_id = ok_json(cluster, "queryMsgById", "-i", sent["offsetMsgId"])
    assert [m["body"] for m in by_offset_id] == ["hello admin"]
    text = ok(cluster, "queryMsgById", "-i", sent["offsetMsgId"])
    assert "Keys:" in text
    assert "[pay-7]" in text
    assert "hello admin" in text

    by_unique_id = ok_json(cluster, "queryMsgById", "-i", sent["msgId"], "-t", "Payments")
    assert by_unique_id[0]["offsetMsgId"] == sent["offsetMsgId"]

    by_key = ok_json(cluster, "queryMsgByKey", "-t", "Payments", "-k", "pay-7")
    assert [(m["msgId"], m["tags"]) for m in by_key] == [(sent["msgId"], "TagA")]
    assert sent["msgId"] in ok(cluster, "queryMsgByKey", "-t", "Payments", "-k", "pay-7")

    at_offset = ok_json(
        cluster,
        "queryMsgByOffset",
        "-t",
        "Payments",
        "-b",
        "broker-a",
        "-i",
        str(sent["queueId"]),
        "-o",
        str(sent["queueOffset"]),
    )
    assert at_offset["body"] == "hello admin"
    assert at_offset["keys"] == "pay-7"

    consumed = ok_json(cluster, "consumeMessage", "-t", "Payments")
    assert [m["body"] for m in consumed] == ["hello admin"]
    assert "hello admin" in ok(cluster, "consumeMessage", "-t", "Payments", "-c", "5")

    status = ok_json(cluster, "topicStatus", "-t", "Payments")
    queue = next(q for q in status["offsetTable"] if q["queueId"] == sent["queueId"])
    assert queue["maxOffset"] == 1
    assert queue["lastUpdateTimestamp"] > 0

    # A topic nobody created goes through TBW102, as producers send, and the broker creates it.
    auto = ok_json(cluster, "sendMessage", "-t", "AutoMade", "-p", "first")
    assert auto["sendStatus"] == "SEND_OK"
    assert auto["queueId"] < 4


def test_missing_topic_broker_and_nameserver_fail_with_one_line(cluster: str) -> None:
    missing_topic = one_line_failure(admin(cluster, "topicStatus", "-t", "Nowhere"))
    assert "topic Nowhere does not exist: create it with updateTopic -t Nowhere" in missing_topic

    unreachable = one_line_failure(admin(cluster, "brokerStatus", "-b", "127.0.0.1:1"))
    assert "cannot reach broker 127.0.0.1:1" in unreachable

    unknown = one_line_failure(admin(cluster, "brokerStatus", "-b", "broker-z"))
    assert "broker broker-z not found (known brokers: broker-a)" in unknown

    not_serving = one_line_failure(
        admin(cluster, "queryMsgByOffset", "-t", "TBW102", "-b", "broker-z", "-i", "0", "-o", "0")
    )
    assert "broker broker-z does not serve topic TBW102" in not_serving

    no_cluster = one_line_failure(admin(cluster, "updateTopic", "-t", "X", "-c", "Elsewhere"))
    assert "cluster Elsewhere not found" in no_cluster

    no_namesrv = one_line_failure(admin("127.0.0.1:1", "topicList"))
    assert "no NameServer answers" in no_namesrv


# -- admin_stats handlers on in-process servers ---------------------------------------------------


async def _cli(namesrv: str, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *admin_command(namesrv, *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), CLI_TIMEOUT_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def test_admin_stats_answer_stats_groups_and_config(tmp_path: Path) -> None:
    async def scenario() -> None:
        namesrv = NamesrvServer(NamesrvConfig(listen_port=0, bind_address="127.0.0.1"))
        port = await namesrv.start()
        namesrv_address = f"127.0.0.1:{port}"
        broker_config = BrokerConfig(
            bind_address="127.0.0.1",
            broker_ip1="127.0.0.1",
            listen_port=0,
            namesrv_addr=namesrv_address,
        )
        store_config = MessageStoreConfig(
            store_path_root_dir=str(tmp_path / "store"), mapped_file_size_commit_log=4 << 20
        )
        broker = BrokerServer(broker_config, store_config)
        await broker.start()
        assert broker.store is not None
        assert broker.server is not None
        try:
            async with AdminClient([namesrv_address]) as client:
                await check_with_client(client, broker.address)
            await check_with_cli(namesrv_address)
        finally:
            await broker.stop()
            await namesrv.stop()
        # A clean stop folds the journal into the file.
        groups = json.loads((tmp_path / "store" / "config" / "subscriptionGroup.json").read_text())
        assert "GroupKeep" in groups["subscriptionGroupTable"]
        assert "GroupGone" not in groups["subscriptionGroupTable"]

    asyncio.run(scenario())


async def check_with_client(client: AdminClient, broker_address: str) -> None:
    await client.create_topic(TopicSettings("Stats", 2, 2), cluster="DefaultCluster")
    assert await client.wait_for_route("Stats")
    for _ in range(3):
        await client.send_message("Stats", b"x", broker_name="broker-a", queue_id=1)
    stats = await client.topic_stats("Stats")
    assert [(q.queue.queue_id, q.min_offset, q.max_offset) for q in stats.queues] == [
        (0, 0, 0),
        (1, 0, 3),
    ]
    assert stats.queues[1].last_update_timestamp_ms > 0

    commit = RemotingCommand.request(
        RequestCode.UPDATE_CONSUMER_OFFSET,
        {"consumerGroup": "GroupKeep", "topic": "Stats", "queueId": "1", "commitOffset": "2"},
    )
    consumer = RemotingClient()
    try:
        assert (await consumer.invoke(broker_address, commit, 5)).code == ResponseCode.SUCCESS
    finally:
        await consumer.close()
    progress = await client.consume_progress("GroupKeep")  # no topic: the group's own topics
    assert [(q.queue.queue_id, q.broker_offset, q.consumer_offset) for q in progress.queues] == [
        (0, 0, 0),
        (1, 3, 2),
    ]
    assert progress.queues[1].diff == 1
    assert progress.queues[1].last_timestamp_ms > 0

    await client.update_subscription_group(
        SubscriptionGroupSettings("GroupKeep"), broker=broker_address
    )
    await client.update_subscription_group(
        SubscriptionGroupSettings("GroupGone"), cluster="DefaultCluster"
    )
    await client.delete_subscription_group("GroupGone", cluster="DefaultCluster", clean_offset=True)

    config = await client.broker_config(broker_address)
    assert config["brokerName"] == "broker-a"
    assert config["flushDiskType"] == "ASYNC_FLUSH"
    await client.update_broker_config(broker_address, {"flushConsumerOffsetInterval": "7000"})
    assert (await client.broker_config(broker_address))["flushConsumerOffsetInterval"] == "7000"
    with pytest.raises(AdminError, match="brokerName cannot change while the broker runs"):
        await client.update_broker_config(broker_address, {"brokerName": "other"})
    with pytest.raises(AdminError, match="unknown config key"):
        await client.update_broker_config(broker_address, {"noSuchKey": "1"})
    with pytest.raises(AdminError, match="flushConsumerOffsetInterval"):
        await client.update_broker_config(broker_address, {"flushConsumerOffsetInterval": "x"})


async def check_with_cli(namesrv: str) -> None:
    code, out, err = await _cli(namesrv, "consumerProgress", "-g", "GroupKeep", "--json")
    assert code == 0, err
    progress = json.loads(out)
    assert progress["diffTotal"] == 1
    assert progress["offsetTable"][1]["consumerOffset"] == 2

    code, out, err = await _cli(namesrv, "topicStatus", "-t", "Stats")
    assert code == 0, err
    assert out.splitlines()[0].split()[:3] == ["#Broker", "Name", "#QID"]

    code, out, err = await _cli(namesrv, "getBrokerConfig", "-c", "DefaultCluster")
    assert code == 0, err
    assert "brokerClusterName" in out
    assert "DefaultCluster" in out

    code, out, err = await _cli(
        namesrv, "updateBrokerConfig", "-b", "broker-a", "-k", "listenPort", "-v", "1"
    )
    assert code == 1
    assert "listenPort cannot change while the broker runs" in err

    code, out, err = await _cli(namesrv, "updateSubGroup", "-g", "bad group", "-b", "broker-a")
    assert code == 1
    assert "illegal characters" in err
