"""Protocol codes keep RocketMQ's numbers and names (rocketmq-wire.md sections 1.2 and 2)."""

from __future__ import annotations

import pytest

from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode, SerializeType


@pytest.mark.parametrize(
    ("code", "value"),
    [
        (RequestCode.SEND_MESSAGE, 10),
        (RequestCode.PULL_MESSAGE, 11),
        (RequestCode.HEART_BEAT, 34),
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, 105),
        (RequestCode.SEND_MESSAGE_V2, 310),
        (RequestCode.SEND_BATCH_MESSAGE, 320),
        (RequestCode.NOTIFY_MIN_BROKER_ID_CHANGE, 905),
        (RequestCode.CONTROLLER_APPLY_BROKER_ID, 1013),
        (RequestCode.AUTH_LIST_ACL, 3010),
        (RequestCode.POP_MESSAGE, 200050),
        (RequestCode.BATCH_ACK_MESSAGE, 200151),
        (ResponseCode.SUCCESS, 0),
        (ResponseCode.PULL_NOT_FOUND, 19),
        (ResponseCode.TRANSACTION_STATE_UNKNOW, 202),
        (ResponseCode.GO_AWAY, 1500),
        (ResponseCode.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS, 2016),
        (ResponseCode.RPC_TIME_OUT, -1006),
        (LanguageCode.CPP, 1),
        (LanguageCode.NODE_JS, 13),
        (SerializeType.JSON, 0),
        (SerializeType.ROCKETMQ, 1),
    ],
)
def test_code_has_rocketmqs_value(code: int, value: int) -> None:
    assert code == value


def test_language_codes_are_contiguous_ordinals() -> None:
    assert [member.value for member in LanguageCode] == list(range(14))


def test_request_codes_include_every_code_the_cpp_client_sends_or_serves() -> None:
    """rocketmq-wire.md section 0.1: requests sent and broker-to-client requests served."""
    sent = {10, 310, 11, 14, 15, 30, 31, 29, 32, 33, 34, 35, 36, 37, 38, 41, 42, 105, 206, 17}
    served = {39, 40, 220, 221, 307, 309}
    known = {member.value for member in RequestCode}
    assert sent | served <= known
