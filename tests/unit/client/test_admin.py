"""The admin client on a scripted `ClientInstance`: decoders, errors and the wire it shares
with producers and consumers (no sockets)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping

import pytest

from pocketmq.broker.admin_stats import TopicOffset, encode_topic_stats
from pocketmq.client.admin import AdminClient, AdminError
from pocketmq.client.admin.decoders import decode_kv_table, decode_offset_table, ext_int
from pocketmq.client.admin.errors import check
from pocketmq.client.errors import RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue, SendStatus
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.route import BrokerData, QueueData, TopicRouteData
from pocketmq.common.route_json import encode_topic_route
from pocketmq.remoting.command import RemotingCommand

ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 2, 2, 6)],
    broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "10.0.0.1:10911"})],
)


class ScriptedInstance(ClientInstance):
    """Answers requests from a table instead of the network; records what was asked."""

    def __init__(self, answers: Mapping[int, RemotingCommand]) -> None:
        super().__init__("127.0.0.1:9876", rng=random.Random(7))
        self.answers = dict(answers)
        self.asked: list[tuple[str, int, dict[str, str], bytes]] = []

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        self.asked.append((address, code, dict(ext_fields or {}), body))
        return self.answers[code]


def answer(code: int, ext: Mapping[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand(code=code, ext_fields=dict(ext or {}), body=body)


def route_answer() -> RemotingCommand:
    return answer(ResponseCode.SUCCESS, body=encode_topic_route(ROUTE, standard_json=False))


def test_admin_error_is_a_client_error_with_its_code() -> None:
    refused = answer(ResponseCode.NO_PERMISSION)
    refused.remark = "topic is read-only\nmore"
    with pytest.raises(AdminError, match=r"send failed on broker x: topic is read-only \(NO_PERM"):
        check(refused, "send", "broker x")
    with pytest.raises(RocketMQError) as raised:
        check(answer(ResponseCode.REQUEST_CODE_NOT_SUPPORTED), "topic stats", "broker x")
    assert isinstance(raised.value, AdminError)
    assert raised.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert str(raised.value) == "topic stats is not supported by broker x yet"


def test_offset_tables_read_fastjson_object_keys_into_client_queues() -> None:
    body = encode_topic_stats("T", "broker-a", [TopicOffset(1, 0, 3, 99)], put_tps=1.5)
    table = decode_offset_table(body, "TopicStatsTable", "b:1")
    assert dict(table.items()) == {
        MessageQueue("T", "broker-a", 1): {
            "lastUpdateTimestamp": 99,
            "maxOffset": 3,
            "minOffset": 0,
        }
    }
    assert table.extra == {"topicPutTps": 1.5}
    with pytest.raises(AdminError, match="bad queue key"):
        decode_offset_table(b'{"offsetTable":{"x":{}}}', "ConsumeStats", "b:1")
    with pytest.raises(AdminError, match="without an offsetTable"):
        decode_offset_table(b"{}", "ConsumeStats", "b:1")


def test_kv_tables_and_ext_fields_are_checked() -> None:
    assert decode_kv_table(b'{"table":{"a":1}}', "b:1") == {"a": "1"}
    with pytest.raises(AdminError, match="bad KVTable"):
        decode_kv_table(b"{", "b:1")
    with pytest.raises(AdminError, match="bad offset"):
        ext_int(answer(ResponseCode.SUCCESS, {"offset": "x"}), "offset", "b:1")


def test_no_namesrv_address_is_an_admin_error_at_the_first_namesrv_request() -> None:
    """Controller and broker commands name their addresses and need no NameServer."""

    async def ask() -> None:
        admin = AdminClient([" "])
        try:
            await admin._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        finally:
            await admin.close()

    with pytest.raises(AdminError, match="no NameServer address: pass -n"):
        asyncio.run(ask())


def test_send_uses_the_producer_header_and_result() -> None:
    instance = ScriptedInstance(
        {
            RequestCode.GET_ROUTEINFO_BY_TOPIC: route_answer(),
            RequestCode.SEND_MESSAGE_V2: answer(
                ResponseCode.FLUSH_DISK_TIMEOUT,
                {"msgId": "OFFSETID", "queueId": "1", "queueOffset": "5"},
            ),
        }
    )
    admin = AdminClient([], instance=instance)
    result = asyncio.run(
        admin.send_message("T", b"hi", keys="k1 k2", tags="A", broker_name="broker-a", queue_id=1)
    )
    assert result.status is SendStatus.FLUSH_DISK_TIMEOUT
    assert result.queue == MessageQueue("T", "broker-a", 1)
    assert (result.offset_msg_id, result.queue_offset) == ("OFFSETID", 5)
    address, code, header, body = instance.asked[-1]
    assert (address, code, body) == ("10.0.0.1:10911", RequestCode.SEND_MESSAGE_V2, b"hi")
    assert header["a"] == "TOOLS_PRODUCER"
    assert (header["b"], header["e"], header["n"]) == ("T", "1", "broker-a")
    assert result.msg_id in header["i"]
    assert len(result.msg_id) == 32
    assert instance._tasks == []  # an admin client never starts heartbeats or rebalancing


def test_refused_send_and_pull_raise_admin_errors() -> None:
    instance = ScriptedInstance(
        {
            RequestCode.GET_ROUTEINFO_BY_TOPIC: route_answer(),
            RequestCode.SEND_MESSAGE_V2: answer(ResponseCode.NO_PERMISSION),
            RequestCode.PULL_MESSAGE: answer(ResponseCode.SUBSCRIPTION_NOT_EXIST),
        }
    )
    admin = AdminClient([], instance=instance)
    with pytest.raises(AdminError, match=r"send failed on broker 10\.0\.0\.1:10911"):
        asyncio.run(admin.send_message("T", b"hi"))
    with pytest.raises(AdminError, match=r"cannot send: .*body is empty"):
        asyncio.run(admin.send_message("T", b""))
    with pytest.raises(AdminError, match="pull failed on broker b:1"):
        asyncio.run(admin.pull("b:1", "T", 0, 0, 1))
    header = instance.asked[-1][2]
    assert header["consumerGroup"] == "TOOLS_CONSUMER"
    assert (header["subscription"], header["sysFlag"], header["suspendTimeoutMillis"]) == (
        "*",
        "4",
        "0",
    )


def test_missing_topic_suggests_the_only_cluster() -> None:
    instance = ScriptedInstance(
        {
            RequestCode.GET_ROUTEINFO_BY_TOPIC: answer(ResponseCode.TOPIC_NOT_EXIST),
            RequestCode.GET_BROKER_CLUSTER_INFO: answer(
                ResponseCode.SUCCESS, body=b'{"brokerAddrTable":{},"clusterAddrTable":{"C1":[]}}'
            ),
        }
    )
    admin = AdminClient([], instance=instance)
    with pytest.raises(AdminError, match="updateTopic -t Nowhere -c C1") as raised:
        asyncio.run(admin.topic_route("Nowhere"))
    assert raised.value.code == ResponseCode.TOPIC_NOT_EXIST
