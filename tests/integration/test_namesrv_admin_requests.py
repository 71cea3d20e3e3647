"""NameServer admin requests that `mqadmin` sends, over a real socket to a real `pocketmq up`:
GET_NAMESRV_CONFIG (319), UPDATE_NAMESRV_CONFIG (318), WIPE_WRITE_PERM_OF_BROKER (205) and
ADD_WRITE_PERM_OF_BROKER (327). Codes, remarks and headers are RocketMQ 5's, except where
`pocketmq.namesrv.config` says why not (unknown keys and bad values are refused, not ignored)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Message, Producer
from pocketmq.client.errors import TopicNotFoundError
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.config import format_properties, parse_properties
from pocketmq.common.constants import PERM_WRITE
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess, start_up_process

TOPIC = "WritePermTopic"
BROKER = "broker-a"
TIMEOUT_S = 5


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("namesrv-admin")
    server = start_up_process(work / "data", work / "up.log")
    try:
        yield server
    finally:
        server.stop()


async def _invoke(
    address: str, code: int, fields: dict[str, str] | None = None, body: bytes = b""
) -> RemotingCommand:
    client = RemotingClient()
    try:
        return await client.invoke(address, RemotingCommand.request(code, fields, body), TIMEOUT_S)
    finally:
        await client.close()


def _config(address: str) -> dict[str, str]:
    response = asyncio.run(_invoke(address, RequestCode.GET_NAMESRV_CONFIG))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return parse_properties(response.body.decode())


def _update(address: str, **settings: str) -> RemotingCommand:
    body = format_properties(settings).encode()
    return asyncio.run(_invoke(address, RequestCode.UPDATE_NAMESRV_CONFIG, body=body))


def test_get_namesrv_config_answers_the_settings_as_properties(up: ServerProcess) -> None:
    config = _config(up.address)

    assert config["listenPort"] == str(up.port), "the bound port, not the configured 0"
    assert config["bindAddress"] == "127.0.0.1"
    assert Path(config["kvConfigPath"]).parts[-2:] == ("namesrv", "kvConfig.json")
    assert config["configBlackList"] == "configBlackList;configStorePath;kvConfigPath"
    assert config["clusterTest"] == "false"
    assert config["orderMessageEnable"] == "true"
    assert int(config["scanNotActiveBrokerInterval"]) > 0
    assert "configStorePath" not in config, "updates are written to no file"


def test_update_namesrv_config_changes_a_live_setting(up: ServerProcess) -> None:
    before = _config(up.address)["scanNotActiveBrokerInterval"]
    try:
        response = _update(up.address, scanNotActiveBrokerInterval="7000")
        assert (response.code, response.remark) == (ResponseCode.SUCCESS, None)
        assert _config(up.address)["scanNotActiveBrokerInterval"] == "7000"
    finally:
        _update(up.address, scanNotActiveBrokerInterval=before)


def test_disabling_the_all_topic_list_is_honoured_at_once(up: ServerProcess) -> None:
    assert _update(up.address, enableAllTopicList="false").code == ResponseCode.SUCCESS
    try:
        listed = asyncio.run(_invoke(up.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        assert (listed.code, listed.remark) == (ResponseCode.SYSTEM_ERROR, "disable")
    finally:
        assert _update(up.address, enableAllTopicList="true").code == ResponseCode.SUCCESS
    listed = asyncio.run(_invoke(up.address, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert listed.code == ResponseCode.SUCCESS


@pytest.mark.parametrize(
    ("settings", "code", "remark"),
    [
        # RocketMQ's blacklist, with its own answer.
        (
            {"configStorePath": "/elsewhere"},
            ResponseCode.NO_PERMISSION,
            "Can not update config in black list.",
        ),
        (
            {"kvConfigPath": "/elsewhere", "orderMessageEnable": "false"},
            ResponseCode.NO_PERMISSION,
            "Can not update config in black list.",
        ),
        ({"noSuchKey": "1"}, ResponseCode.INVALID_PARAMETER, "unknown config key(s): noSuchKey"),
        ({"listenPort": "1234"}, ResponseCode.NO_PERMISSION, "listenPort cannot change while"),
        ({"clusterTest": "true"}, ResponseCode.NO_PERMISSION, "clusterTest cannot change"),
        (
            {"scanNotActiveBrokerInterval": "abc", "orderMessageEnable": "false"},
            ResponseCode.INVALID_PARAMETER,
            "scanNotActiveBrokerInterval: 'abc' is not an integer",
        ),
        (
            {"scanNotActiveBrokerInterval": "0"},
            ResponseCode.INVALID_PARAMETER,
            "scanNotActiveBrokerInterval: '0' is not an integer of 1 or more",
        ),
    ],
)
def test_a_refused_update_names_its_reason_and_changes_nothing(
    up: ServerProcess, settings: dict[str, str], code: ResponseCode, remark: str
) -> None:
    before = _config(up.address)

    response = _update(up.address, **settings)

    assert response.code == code
    assert response.remark is not None
    assert response.remark.startswith(remark), response.remark
    assert _config(up.address) == before


async def _route_perms(admin: AdminClient) -> set[int]:
    route = await admin.topic_route(TOPIC)
    return {q.perm for q in route.queue_datas if q.broker_name == BROKER}


async def _send_one(namesrv: str) -> None:
    # A new producer asks for the route at once, rather than at its 30 s refresh.
    async with Producer("write-perm-producer", namesrv=namesrv) as producer:
        await producer.send(Message(TOPIC, b"x"))


def test_wipe_and_add_write_perm_take_a_broker_out_of_and_back_into_the_write_path(
    up: ServerProcess,
) -> None:
    async def scenario() -> None:
        async with AdminClient([up.address]) as admin:
            await admin.create_topic(TopicSettings(TOPIC), cluster="DefaultCluster")
            assert await admin.wait_for_route(TOPIC, timeout_s=10)
            await _send_one(up.address)

            wipe = await _invoke(
                up.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": BROKER}
            )
            assert (wipe.code, wipe.remark) == (ResponseCode.SUCCESS, None)
            wiped = int(wipe.ext_fields["wipeTopicCount"])
            assert wiped >= 2, "at least the new topic and TBW102"
            assert all(not perm & PERM_WRITE for perm in await _route_perms(admin))
            with pytest.raises(TopicNotFoundError, match="no writable queue"):
                await _send_one(up.address)

            add = await _invoke(
                up.address, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": BROKER}
            )
            assert (add.code, add.remark) == (ResponseCode.SUCCESS, None)
            assert add.ext_fields["addTopicCount"] == str(wiped)
            assert await _route_perms(admin) == {6}
            await _send_one(up.address)

    asyncio.run(scenario())


def test_write_perm_requests_for_an_unknown_or_missing_broker_name(up: ServerProcess) -> None:
    async def scenario() -> None:
        wipe = await _invoke(
            up.address, RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-nope"}
        )
        assert (wipe.code, wipe.ext_fields.get("wipeTopicCount")) == (ResponseCode.SUCCESS, "0")
        add = await _invoke(
            up.address, RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-nope"}
        )
        assert (add.code, add.ext_fields.get("addTopicCount")) == (ResponseCode.SUCCESS, "0")
        for code in (RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER):
            missing = await _invoke(up.address, code)
            assert (missing.code, missing.remark) == (
                ResponseCode.SYSTEM_ERROR,
                "the custom field <brokerName> is null",
            )

    asyncio.run(scenario())
