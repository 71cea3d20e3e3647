"""A real broker process on loopback: send, pull, offsets, restart and SIGKILL."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import decode_records
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess

ServerFactory = Callable[..., ServerProcess]


def send_v2(
    topic: str, queue_id: int, body: bytes, *, tags: str = "TagA", key: str = ""
) -> RemotingCommand:
    properties = encode_properties({"TAGS": tags, "KEYS": key or None, "WAIT": "true"})
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2,
        {
            "a": "pg",
            "b": topic,
            "c": "TBW102",
            "d": "4",
            "e": str(queue_id),
            "f": "0",
            "g": "1700000000000",
            "h": "0",
            "i": properties,
            "j": "0",
            "k": "false",
        },
        body,
    )


def pull(topic: str, queue_id: int, offset: int, *, suspend_ms: int = 0) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.PULL_MESSAGE,
        {
            "consumerGroup": "cg",
            "topic": topic,
            "queueId": str(queue_id),
            "queueOffset": str(offset),
            "maxMsgNums": "32",
            "sysFlag": "2" if suspend_ms else "0",
            "commitOffset": "0",
            "suspendTimeoutMillis": str(suspend_ms),
            "subscription": "*",
            "subVersion": "0",
        },
    )


def test_send_pull_and_offsets_survive_restart(run_server: ServerFactory, tmp_path: Path) -> None:
    data_dir = str(tmp_path / "store")
    broker = run_server("broker", "--port", "0", "--data-dir", data_dir, "-n", "", name="broker")

    async def produce_and_consume(address: str) -> None:
        client = RemotingClient()
        try:
            for i in range(50):
                response = await client.invoke(
                    address, send_v2("Orders", i % 4, f"m{i}".encode()), 5
                )
                assert response.code == ResponseCode.SUCCESS, response.remark
                assert len(response.ext_fields["msgId"]) == 32
            got = await client.invoke(address, pull("Orders", 1, 0), 5)
            assert got.code == ResponseCode.SUCCESS
            bodies = [m.body for m in decode_records(got.body)]
            assert bodies == [f"m{i}".encode() for i in range(1, 50, 4)]
            commit = RemotingCommand.request(
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": "cg", "topic": "Orders", "queueId": "1", "commitOffset": "7"},
            )
            assert (await client.invoke(address, commit, 5)).code == ResponseCode.SUCCESS
            # A held pull at the end of the queue is woken by a new message.
            loop = asyncio.get_running_loop()
            start = loop.time()
            held = asyncio.ensure_future(
                client.invoke(address, pull("Orders", 2, 12, suspend_ms=5000), 10)
            )
            await asyncio.sleep(0.2)
            await client.invoke(address, send_v2("Orders", 2, b"late"), 5)
            woken = await held
            assert woken.code == ResponseCode.SUCCESS
            assert [m.body for m in decode_records(woken.body)] == [b"late"]
            assert loop.time() - start < 3
        finally:
            await client.close()

    asyncio.run(produce_and_consume(broker.address))
    assert broker.stop() == 0
    restarted = run_server("broker", "--port", "0", "--data-dir", data_dir, "-n", "", name="broker")

    async def check(address: str) -> None:
        client = RemotingClient()
        try:
            query = RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": "cg", "topic": "Orders", "queueId": "1"},
            )
            response = await client.invoke(address, query, 5)
            assert response.ext_fields["offset"] == "7"
            max_offset = RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": "Orders", "queueId": "2"}
            )
            assert (await client.invoke(address, max_offset, 5)).ext_fields["offset"] == "13"
            topics = await client.invoke(
                address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5
            )
            assert "Orders" in json.loads(topics.body)["topicConfigTable"]
        finally:
            await client.close()

    asyncio.run(check(restarted.address))


def test_acknowledged_sends_survive_sigkill(run_server: ServerFactory, tmp_path: Path) -> None:
    data_dir = str(tmp_path / "store")
    broker = run_server("broker", "--port", "0", "--data-dir", data_dir, "-n", "", name="broker")
    acked: list[bytes] = []

    async def produce(address: str) -> None:
        client = RemotingClient()
        try:
            for i in range(300):
                body = f"acked-{i}".encode()
                response = await client.invoke(address, send_v2("Crash", 0, body), 5)
                if response.code == ResponseCode.SUCCESS:
                    acked.append(body)
        finally:
            await client.close()

    asyncio.run(produce(broker.address))
    broker.kill()
    restarted = run_server("broker", "--port", "0", "--data-dir", data_dir, "-n", "", name="broker")

    async def consume(address: str) -> list[bytes]:
        client = RemotingClient()
        try:
            bodies: list[bytes] = []
            offset = 0
            for _ in range(100):
                response = await client.invoke(address, pull("Crash", 0, offset), 5)
                if response.code != ResponseCode.SUCCESS:
                    break
                bodies.extend(m.body for m in decode_records(response.body))
                offset = int(response.ext_fields["nextBeginOffset"])
            return bodies
        finally:
            await client.close()

    assert asyncio.run(consume(restarted.address)) == acked
    assert "abnormal" in restarted.log() or "unclean" in restarted.log()


def test_bad_input_gets_precise_answers_and_the_broker_keeps_serving(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    broker = run_server(
        "broker", "--port", "0", "--data-dir", str(tmp_path / "store"), "-n", "", name="broker"
    )

    async def check(address: str) -> None:
        host, port = address.split(":")
        client = RemotingClient()
        try:
            unknown = await client.invoke(address, RemotingCommand.request(77777), 5)
            assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
            bad_topic = await client.invoke(address, send_v2("bad topic!", 0, b"x"), 5)
            assert bad_topic.code == ResponseCode.INVALID_PARAMETER
            assert bad_topic.remark
            missing_field = send_v2("T", 0, b"x")
            del missing_field.ext_fields["b"]
            answer = await client.invoke(address, missing_field, 5)
            assert answer.code == ResponseCode.INVALID_PARAMETER
            assert "topic" in (answer.remark or "") or "<b>" in (answer.remark or "")
            oversized = send_v2("T", 0, b"x" * (4 * 1024 * 1024 + 1))
            too_big = await client.invoke(address, oversized, 5)
            assert too_big.code == ResponseCode.MESSAGE_ILLEGAL
            for garbage in (
                b"\x00\x00\x00\x02ab",
                b"\x7f\xff\xff\xff" + b"\x00" * 64,
                b"\xde\xad" * 50,
            ):
                reader, writer = await asyncio.open_connection(host, int(port))
                writer.write(garbage)
                await writer.drain()
                writer.write_eof()
                async with asyncio.timeout(5):
                    await reader.read()  # the broker closes the connection
                writer.close()
            ok = await client.invoke(address, send_v2("T", 0, b"still fine"), 5)
            assert ok.code == ResponseCode.SUCCESS
            got = await client.invoke(address, pull("T", 0, 0), 5)
            assert [m.body for m in decode_records(got.body)] == [b"still fine"]
        finally:
            await client.close()

    asyncio.run(check(broker.address))


def start_broker_with(tmp_path: Path, properties: str) -> subprocess.CompletedProcess[str]:
    """Runs `pocketmq broker -c` on a file holding `properties`; for settings it must refuse."""
    config = tmp_path / "broker.properties"
    config.write_text(properties)
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "broker", "-c", str(config), "-n", ""],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_wildcard_advertised_address_is_refused_at_start(tmp_path: Path) -> None:
    result = start_broker_with(tmp_path, "brokerName=broker-x\nbrokerIP1=0.0.0.0\nlistenPort=0\n")
    assert result.returncode == 2
    assert "brokerIP1=0.0.0.0 is a wildcard address" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_bad_setting_is_refused_with_the_key_named(tmp_path: Path) -> None:
    result = start_broker_with(tmp_path, "flushDiskType=SOMETIMES\n")
    assert result.returncode == 2
    assert "flushDiskType" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_heartbeat_creates_the_consumer_group_and_its_retry_topic(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    broker = run_server(
        "broker", "--port", "0", "--data-dir", str(tmp_path / "store"), "-n", "", name="broker"
    )
    heartbeat = {
        "clientID": "127.0.0.1@test",
        "consumerDataSet": [
            {
                "groupName": "cg-new",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": "T", "subString": "*", "subVersion": 1}],
            }
        ],
        "producerDataSet": [],
    }

    async def check(address: str) -> None:
        client = RemotingClient()
        try:
            beat = RemotingCommand.request(
                RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode()
            )
            assert (await client.invoke(address, beat, 5)).code == ResponseCode.SUCCESS
            groups = await client.invoke(
                address, RemotingCommand.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG), 5
            )
            assert "cg-new" in json.loads(groups.body)["subscriptionGroupTable"]
            topics = await client.invoke(
                address, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG), 5
            )
            assert "%RETRY%cg-new" in json.loads(topics.body)["topicConfigTable"]
            members = await client.invoke(
                address,
                RemotingCommand.request(
                    RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "cg-new"}
                ),
                5,
            )
            assert json.loads(members.body) == {"consumerIdList": ["127.0.0.1@test"]}
        finally:
            await client.close()

    asyncio.run(check(broker.address))
