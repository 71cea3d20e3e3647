"""Every request code pocketmq answers, sent to Apache RocketMQ's and to pocketmq's broker and
NameServer with headers that are empty, that name topics and groups nobody has, and that carry
oversized or unparsable values: the response codes must be equal, or the difference must be one
`docs/compatibility.md` lists. Both servers must still serve afterwards.

The one general difference: where RocketMQ fails on a malformed header with a Java exception
(SYSTEM_ERROR, the exception as remark), pocketmq names the field (INVALID_PARAMETER or
SYSTEM_ERROR).
"""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client.admin import AdminClient
from pocketmq.client.aio import Message, Producer
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.route import MASTER_ID
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess
from tests.conformance.reference import ApacheRocketMQ

pytestmark = pytest.mark.conformance

Answers = dict[str, tuple[int, str]]


def variants(code: RequestCode) -> dict[str, dict[str, str]]:
    # Names unique to the code, so that a request that creates something (pocketmq's lenient
    # topic creation) does not change what the next code finds.
    unknown = f"NoSuch{code.value}"
    return {
        "empty": {},
        "unknown": {
            "topic": unknown,
            "consumerGroup": unknown,
            "group": unknown,
            "producerGroup": unknown,
            "queueId": "0",
            "brokerName": unknown,
            "clientId": unknown,
        },
        "huge": {
            "topic": "T" * 300,
            "consumerGroup": "G" * 300,
            "queueId": "99999999999",
            "offset": "-5",
            "maxMsgNums": "-1",
            "timestamp": "abc",
        },
    }


NOTHING_NAMED = "a request naming nothing: RocketMQ answers SUCCESS and does nothing"
CHECK_ORDER = "pocketmq checks that the header is whole before it looks the topic or group up"
LISTED: dict[str, str] = {
    **{
        f"{code}/namesrv/{variant}": NOTHING_NAMED
        for code in ("ADD_WRITE_PERM_OF_BROKER", "WIPE_WRITE_PERM_OF_BROKER")
        for variant in ("empty", "huge")
    },
    "DELETE_TOPIC_IN_NAMESRV/namesrv/empty": NOTHING_NAMED,
    **{
        f"{code}/{target}/{variant}": NOTHING_NAMED
        for code, target in (
            ("UNREGISTER_BROKER", "namesrv"),
            ("UNREGISTER_CLIENT", "broker"),
            ("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP", "broker"),
        )
        for variant in ("empty", "unknown", "huge")
    },
    **{
        f"BROKER_HEARTBEAT/namesrv/{variant}": "pocketmq refreshes nothing and answers SUCCESS"
        for variant in ("empty", "unknown", "huge")
    },
    **{
        f"RECALL_MESSAGE/broker/{variant}": "RocketMQ 5.5 refuses recall before reading it"
        for variant in ("empty", "unknown", "huge")
    },
    "INVOKE_BROKER_TO_RESET_OFFSET/broker/unknown": CHECK_ORDER,
    "INVOKE_BROKER_TO_RESET_OFFSET/broker/huge": CHECK_ORDER,
    "PULL_MESSAGE/broker/unknown": CHECK_ORDER,
    **{
        f"{code}/broker/{variant}": CHECK_ORDER
        for code in ("POP_MESSAGE", "ACK_MESSAGE", "CHANGE_MESSAGE_INVISIBLETIME")
        for variant in ("unknown", "huge")
    },
    "UPDATE_CONSUMER_OFFSET/broker/unknown": CHECK_ORDER,
    "UPDATE_CONSUMER_OFFSET/broker/huge": CHECK_ORDER,
    "QUERY_CONSUMER_OFFSET/broker/unknown": "RocketMQ 4's rule: a new group starts at offset 0 "
    "of an empty or missing queue (RocketMQ 5 answers QUERY_NOT_FOUND)",
    "UPDATE_AND_CREATE_TOPIC/broker/unknown": "pocketmq fills the queue counts and perm of a "
    "topic creation that leaves them out with RocketMQ's defaults",
    **{
        f"{code}/broker/{variant}": "pocketmq serves ACL 1.0's admin requests, which RocketMQ 5 "
        "removed (with ACL off they answer that it is off)"
        for code in (
            "UPDATE_AND_CREATE_ACL_CONFIG",
            "DELETE_ACL_CONFIG",
            "GET_BROKER_CLUSTER_ACL_INFO",
            "UPDATE_GLOBAL_WHITE_ADDRS_CONFIG",
        )
        for variant in ("empty", "unknown", "huge")
    },
    **{
        f"{code}/broker/{variant}": "RocketMQ without an authorization metadata provider "
        "configured cannot list; pocketmq's users and ACLs file always exists"
        for code in ("AUTH_LIST_USER", "AUTH_LIST_ACL")
        for variant in ("empty", "unknown", "huge")
    },
}


async def _answers(namesrv: str) -> Answers:
    async with AdminClient([namesrv]) as admin:
        info = await admin.cluster_info()
    [broker] = info.broker_addr_table.values()
    targets = {"broker": broker.broker_addrs[MASTER_ID], "namesrv": namesrv}
    client = RemotingClient()
    answers: Answers = {}
    try:
        for code in RequestCode:
            for target, address in targets.items():
                for variant, fields in variants(code).items():
                    request = RemotingCommand.request(code, fields, b"")
                    answer = await client.invoke(address, request, 10)
                    answers[f"{code.name}/{target}/{variant}"] = (answer.code, answer.remark or "")
    finally:
        await client.close()
    return answers


def _alike(reference: tuple[int, str], ours: tuple[int, str]) -> bool:
    if reference[0] == ours[0]:
        return True
    crashed = reference[0] == ResponseCode.SYSTEM_ERROR and "Exception" in reference[1]
    return crashed and ours[0] in (ResponseCode.SYSTEM_ERROR, ResponseCode.INVALID_PARAMETER)


async def _still_serves(namesrv: str) -> str:
    async with Producer("after-raw-requests", namesrv=namesrv) as producer:
        result = await producer.send(Message("AfterRawRequests", b"still here"))
    return result.status.name


def test_every_request_code_answers_as_apache_rocketmq_does(
    apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess
) -> None:
    reference = asyncio.run(_answers(apache_rocketmq.namesrv_addr))
    ours = asyncio.run(_answers(pocketmq_twin.address))
    handled = [
        key for key, (code, _) in ours.items() if code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    ]
    assert len(handled) > 150, "pocketmq answers far fewer request codes than it did"
    differing = {
        key: (reference[key], ours[key])
        for key in handled
        if key not in LISTED and not _alike(reference[key], ours[key])
    }
    assert differing == {}, "\n".join(f"{k}: {v}" for k, v in sorted(differing.items()))
    still_listed = [key for key in LISTED if not _alike(reference[key], ours[key])]
    assert len(still_listed) == len(LISTED), "a listed difference is gone: update LISTED"
    assert asyncio.run(_still_serves(pocketmq_twin.address)) == "SEND_OK"
    assert asyncio.run(_still_serves(apache_rocketmq.namesrv_addr)) == "SEND_OK"
