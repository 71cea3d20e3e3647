"""Raw request frames, sent over a socket to Apache RocketMQ's broker and to pocketmq's: good and
bad headers (missing fields, numbers that do not parse, unknown topics and groups, illegal and
system topic names, oversized bodies, unknown codes). The response codes must be equal, or the
difference must be one `docs/compatibility.md` lists (kept in `LISTED` here, so that a change on
either side shows)."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client.admin import AdminClient
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.route import MASTER_ID
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess
from tests.conformance.reference import ApacheRocketMQ

pytestmark = pytest.mark.conformance

TOPIC = "RawFrameTopic"
_PULL = {
    "consumerGroup": "raw-group",
    "topic": TOPIC,
    "queueId": "0",
    "queueOffset": "0",
    "maxMsgNums": "1",
    "sysFlag": "0",
    "commitOffset": "0",
    "suspendTimeoutMillis": "0",
    "subVersion": "0",
}


def _send(body: bytes = b"x", **changes: str | None) -> tuple[int, dict[str, str], bytes]:
    fields = {
        "a": "raw-producer",
        "b": TOPIC,
        "c": "TBW102",
        "d": "4",
        "e": "0",
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": "",
        "j": "0",
        "k": "false",
        "m": "false",
    }
    for key, value in changes.items():
        if value is None:
            del fields[key]
        else:
            fields[key] = value
    return RequestCode.SEND_MESSAGE_V2, fields, body


def _without(fields: dict[str, str], key: str) -> dict[str, str]:
    return {name: value for name, value in fields.items() if name != key}


CASES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "send, well formed (auto-creates the topic)": _send(),
    "send, no topic": _send(b=None),
    "send, queue id not a number": _send(e="abc"),
    "send, queue id beyond the topic's queues": _send(e="99"),
    "send, illegal topic name": _send(b="bad topic!"),
    "send to SCHEDULE_TOPIC_XXXX": _send(b="SCHEDULE_TOPIC_XXXX"),
    "send to the half topic": _send(b="RMQ_SYS_TRANS_HALF_TOPIC"),
    "send, body over maxMessageSize": _send(b"x" * (5 * 1024 * 1024)),
    "pull, unknown topic": (RequestCode.PULL_MESSAGE, {**_PULL, "topic": "NoSuchTopic"}, b""),
    "pull, no consumer group": (RequestCode.PULL_MESSAGE, _without(_PULL, "consumerGroup"), b""),
    "query offset, unknown group": (
        RequestCode.QUERY_CONSUMER_OFFSET,
        {"consumerGroup": "no-such-group", "topic": TOPIC, "queueId": "0"},
        b"",
    ),
    "max offset, unknown topic": (
        RequestCode.GET_MAX_OFFSET,
        {"topic": "NoSuchTopic", "queueId": "0"},
        b"",
    ),
    "unknown request code": (99_999, {}, b""),
    "end transaction, no half at the offset": (
        RequestCode.END_TRANSACTION,
        {
            "producerGroup": "raw-producer",
            "tranStateTableOffset": "0",
            "commitLogOffset": "999999999",
            "commitOrRollback": "8",
            "fromTransactionCheck": "false",
            "msgId": "none",
        },
        b"",
    ),
}

LISTED: dict[str, tuple[int, int]] = {
    # (Apache RocketMQ's code, pocketmq's code); the reasons are in docs/compatibility.md.
    "send, no topic": (ResponseCode.SYSTEM_ERROR, ResponseCode.INVALID_PARAMETER),
    "send, queue id not a number": (ResponseCode.SYSTEM_ERROR, ResponseCode.INVALID_PARAMETER),
}


async def _master(namesrv: str) -> str:
    async with AdminClient([namesrv]) as admin:
        info = await admin.cluster_info()
    [broker] = info.broker_addr_table.values()
    return broker.broker_addrs[MASTER_ID]


async def _codes(namesrv: str) -> dict[str, int]:
    broker = await _master(namesrv)
    client = RemotingClient()
    try:
        codes = {}
        for name, (code, fields, body) in CASES.items():
            request = RemotingCommand.request(code, fields, body)
            codes[name] = (await client.invoke(broker, request, 10)).code
        return codes
    finally:
        await client.close()


def test_bad_and_good_frames_get_the_same_codes(
    apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess
) -> None:
    reference = asyncio.run(_codes(apache_rocketmq.namesrv_addr))
    ours = asyncio.run(_codes(pocketmq_twin.address))
    expected = {
        name: LISTED[name][1] if name in LISTED else code for name, code in reference.items()
    }
    assert {name: reference[name] for name in LISTED} == {
        name: pair[0] for name, pair in LISTED.items()
    }, "Apache RocketMQ no longer answers a listed difference as listed"
    assert ours == expected
