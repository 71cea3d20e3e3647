"""NameServer and broker processes together: registration, routes, two NameServers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.route import TopicRouteData
from pocketmq.common.route_json import decode_cluster_info, decode_topic_route
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess
from tests.integration.test_broker import send_v2

ServerFactory = Callable[..., ServerProcess]


def route_request(topic: str, version: int) -> RemotingCommand:
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    request.version = version
    return request


def test_broker_registers_and_routes_follow_topics(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    first = run_server("namesrv", "--port", "0", name="namesrv")
    second = run_server("namesrv", "--port", "0", name="namesrv")
    broker = run_server(
        "broker",
        "--port",
        "0",
        "--data-dir",
        str(tmp_path / "store"),
        "-n",
        f"{first.address};{second.address}",
        name="broker",
    )

    async def check() -> None:
        client = RemotingClient()
        try:
            missing = await client.invoke(first.address, route_request("Fresh", 479), 5)
            assert missing.code == ResponseCode.TOPIC_NOT_EXIST
            assert missing.remark is not None
            assert "No topic route info in name server for the topic: Fresh" in missing.remark
            tbw = await client.invoke(first.address, route_request("TBW102", 479), 5)
            assert tbw.code == ResponseCode.SUCCESS
            # Not the connection's first request: later ones start eagerly, outside any task,
            # which the wait for the registration must allow.
            runtime = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
            assert (await client.invoke(broker.address, runtime, 5)).code == ResponseCode.SUCCESS
            sent = await client.invoke(broker.address, send_v2("Fresh", 0, b"x"), 5)
            assert sent.code == ResponseCode.SUCCESS, sent.remark

            async def fresh_route() -> TopicRouteData | None:
                answer = await client.invoke(second.address, route_request("Fresh", 479), 5)
                return (
                    decode_topic_route(answer.body) if answer.code == ResponseCode.SUCCESS else None
                )

            # As RocketMQ: a send that creates a topic is answered once the NameServers know it.
            route = await fresh_route()
            assert route is not None
            (broker_data,) = route.broker_datas
            assert broker_data.broker_addrs == {0: broker.address}
            assert route.queue_datas[0].write_queue_nums == 4
            # Old clients (version < 401, like the C++ client) get fastjson's bare numeric keys.
            old = await client.invoke(first.address, route_request("Fresh", 63), 5)
            assert b'"brokerAddrs":{0:' in old.body
            cluster_request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
            info = decode_cluster_info(
                (await client.invoke(first.address, cluster_request, 5)).body
            )
            assert info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
        finally:
            await client.close()

    asyncio.run(check())
    # One NameServer down: the other still routes, and the broker keeps serving.
    first.stop()

    async def still_routes() -> None:
        client = RemotingClient()
        try:
            answer = await client.invoke(second.address, route_request("Fresh", 479), 5)
            assert answer.code == ResponseCode.SUCCESS
            sent = await client.invoke(broker.address, send_v2("Fresh", 1, b"y"), 5)
            assert sent.code == ResponseCode.SUCCESS
        finally:
            await client.close()

    asyncio.run(still_routes())
    broker.stop()

    async def unregistered() -> None:
        client = RemotingClient()
        try:
            answer = await client.invoke(second.address, route_request("Fresh", 479), 5)
            assert answer.code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await client.close()

    asyncio.run(unregistered())


def test_kv_config_survives_a_restart_of_pocketmq_up(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    data = str(tmp_path / "up")
    args = ["up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", data]
    kv = {"namespace": "ORDER_TOPIC_CONFIG", "key": "Orders", "value": "broker-a:8"}

    async def put(address: str) -> None:
        client = RemotingClient()
        try:
            request = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, kv)
            assert (await client.invoke(address, request, 5)).code == ResponseCode.SUCCESS
        finally:
            await client.close()

    async def get(address: str) -> str | None:
        client = RemotingClient()
        try:
            fields = {"namespace": kv["namespace"], "key": kv["key"]}
            request = RemotingCommand.request(RequestCode.GET_KV_CONFIG, fields)
            return (await client.invoke(address, request, 5)).ext_fields.get("value")
        finally:
            await client.close()

    first = run_server(*args, name="up")
    asyncio.run(put(first.address))
    assert first.stop() == 0
    second = run_server(*args, name="up")
    assert asyncio.run(get(second.address)) == "broker-a:8"
