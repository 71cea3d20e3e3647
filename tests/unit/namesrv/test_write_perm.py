"""WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327) on a route table.

Behaviour follows apache/rocketmq `DefaultRequestProcessor.wipeWritePermOfBroker` /
`addWritePermOfBroker` and `RouteInfoManager.operateWritePermOfBroker`.
"""

from __future__ import annotations

import asyncio
from typing import cast

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_INHERIT, PERM_READ, PERM_WRITE
from pocketmq.common.data_version import DataVersion
from pocketmq.common.route import BrokerTopicConfig
from pocketmq.namesrv.route_table import RouteTable
from pocketmq.namesrv.write_perm import WritePermHandlers
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel

NOW = 1_700_000_000_000
A_MASTER = "10.0.0.1:10911"
B_MASTER = "10.0.0.3:10911"
RW = PERM_READ | PERM_WRITE


def register(
    table: RouteTable, addr: str, name: str, perms: dict[str, int], *, counter: int = 1
) -> None:
    table.register_broker(
        "DefaultCluster",
        addr,
        name,
        0,
        "",
        {topic: BrokerTopicConfig(topic, 4, 4, perm) for topic, perm in perms.items()},
        DataVersion(counter=counter, timestamp=NOW),
        NOW,
    )


def table_with_two_groups() -> RouteTable:
    """broker-a serves Shared (rw), ReadOnly (r) and TBW102 (rwx); broker-b serves Shared."""
    table = RouteTable()
    register(
        table,
        A_MASTER,
        "broker-a",
        {"Shared": RW, "ReadOnly": PERM_READ, "TBW102": RW | PERM_INHERIT},
    )
    register(table, B_MASTER, "broker-b", {"Shared": RW})
    return table


def call(handlers: WritePermHandlers, code: int, fields: dict[str, str]) -> RemotingCommand:
    async def dispatch() -> RemotingCommand:
        request = RemotingCommand.request(code, fields)
        response = await handlers.routes()[code](request, cast(Channel, None))
        assert response is not None
        return response

    return asyncio.run(dispatch())


def wipe_broker_a(table: RouteTable) -> None:
    response = call(
        WritePermHandlers(table), RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )
    assert response.code == ResponseCode.SUCCESS


def perm(table: RouteTable, topic: str, broker_name: str) -> int:
    return table.queue_datas(topic)[broker_name].perm


def test_wipe_clears_the_write_bit_of_every_topic_of_the_group_and_counts_them() -> None:
    table = table_with_two_groups()
    handlers = WritePermHandlers(table)

    response = call(handlers, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})

    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"wipeTopicCount": "3"}
    assert perm(table, "Shared", "broker-a") == PERM_READ
    assert perm(table, "ReadOnly", "broker-a") == PERM_READ
    assert perm(table, "TBW102", "broker-a") == PERM_READ | PERM_INHERIT
    assert perm(table, "Shared", "broker-b") == RW, "another group keeps its permission"


def test_a_wiped_group_offers_no_writable_queue_in_its_routes() -> None:
    table = table_with_two_groups()
    call(
        WritePermHandlers(table), RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )

    route = table.route("Shared")
    assert route is not None
    writable = sorted(q.broker_name for q in route.queue_datas if q.perm & PERM_WRITE)
    assert writable == ["broker-b"]


def test_add_sets_every_topic_of_the_group_to_read_write_and_counts_them() -> None:
    table = table_with_two_groups()
    handlers = WritePermHandlers(table)
    call(handlers, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})

    response = call(handlers, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})

    assert response.code == ResponseCode.SUCCESS
    assert response.ext_fields == {"addTopicCount": "3"}
    # RocketMQ sets PERM_READ | PERM_WRITE outright: a read-only topic becomes writable and
    # the inherit bit goes.
    assert perm(table, "Shared", "broker-a") == RW
    assert perm(table, "ReadOnly", "broker-a") == RW
    assert perm(table, "TBW102", "broker-a") == RW


def test_an_unknown_group_answers_success_with_a_count_of_zero() -> None:
    table = table_with_two_groups()
    handlers = WritePermHandlers(table)

    wipe = call(handlers, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-z"})
    add = call(handlers, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-z"})

    assert (wipe.code, wipe.ext_fields) == (ResponseCode.SUCCESS, {"wipeTopicCount": "0"})
    assert (add.code, add.ext_fields) == (ResponseCode.SUCCESS, {"addTopicCount": "0"})
    assert perm(table, "Shared", "broker-a") == RW


def test_a_request_without_broker_name_fails_and_changes_nothing() -> None:
    table = table_with_two_groups()
    handlers = WritePermHandlers(table)

    for code in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
        response = call(handlers, code, {})
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert response.remark == "the custom field <brokerName> is null"
    assert perm(table, "ReadOnly", "broker-a") == PERM_READ
    assert perm(table, "Shared", "broker-a") == RW


def test_the_wipe_survives_a_registration_with_the_same_data_version() -> None:
    """A broker re-registers every 30 s; an unchanged topic table must not undo the wipe."""
    table = table_with_two_groups()
    call(
        WritePermHandlers(table), RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )

    register(table, A_MASTER, "broker-a", {"Shared": RW, "ReadOnly": PERM_READ, "TBW102": RW})

    assert perm(table, "Shared", "broker-a") == PERM_READ


def test_a_registration_with_a_changed_data_version_restores_the_brokers_own_perms() -> None:
    """The broker's topic table is the source of truth once it changes (RocketMQ alike)."""
    table = table_with_two_groups()
    call(
        WritePermHandlers(table), RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}
    )

    register(table, A_MASTER, "broker-a", {"Shared": RW, "ReadOnly": PERM_READ}, counter=2)

    assert perm(table, "Shared", "broker-a") == RW
    assert perm(table, "ReadOnly", "broker-a") == PERM_READ
