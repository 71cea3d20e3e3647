"""The requests of the ACL matrices (`test_acl_matrix.py`, `test_acl2_matrix.py`): one per
request code naming a topic and a group (in every field name RocketMQ's headers use for them),
signed by each sender, sent to a broker; what the broker answered, reduced by a predicate."""

from __future__ import annotations

import json
from collections.abc import Callable

from pocketmq.client.credentials import SessionCredentials
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient


def request_for(code: RequestCode, topic: str, group: str) -> RemotingCommand:
    fields = {
        "topic": topic,
        "b": topic,
        "consumerGroup": group,
        "group": group,
        "producerGroup": group,
        "a": group,
        "queueId": "0",
        "queueOffset": "0",
        "clientId": "acl-matrix",
    }
    body = b""
    if code == RequestCode.HEART_BEAT:
        body = json.dumps(
            {
                "clientID": "acl-matrix",
                "producerDataSet": [],
                "consumerDataSet": [
                    {
                        "groupName": group,
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "subscriptionDataSet": [
                            {
                                "topic": topic,
                                "subString": "*",
                                "tagsSet": [],
                                "codeSet": [],
                                "subVersion": 0,
                                "expressionType": "TAG",
                            }
                        ],
                        "unitMode": False,
                    }
                ],
            }
        ).encode()
    return RemotingCommand.request(code, fields, body)


async def refusals(
    broker: str,
    codes: list[RequestCode],
    senders: dict[str, SessionCredentials | None],
    targets: dict[str, tuple[str, str]],
    refused: Callable[[RemotingCommand], bool],
) -> dict[str, bool]:
    """`code/sender/target` -> `refused(answer)`; codes the broker does not serve are left
    out."""
    client = RemotingClient()
    answers: dict[str, bool] = {}
    try:
        for code in codes:
            for who, credentials in senders.items():
                for target, (topic, group) in targets.items():
                    request = request_for(code, topic, group)
                    if credentials is not None:
                        credentials.sign(request)
                    answer = await client.invoke(broker, request, 10)
                    if answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                        break
                    answers[f"{code.name}/{who}/{target}"] = refused(answer)
    finally:
        await client.close()
    return answers
