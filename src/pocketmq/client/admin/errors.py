"""`AdminError`, the one exception admin operations raise, and the check that turns a failed
answer into it.

An admin failure is a `RocketMQError`, so code that handles every client failure handles these
too; its message is written for an operator at a terminal: what went wrong, and the `mqadmin`
command or setting that helps next.
"""

from __future__ import annotations

from pocketmq.client.errors import RocketMQError
from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand


class AdminError(RocketMQError):
    """An admin operation failed; the message says why and what to do next.

    Attributes:
        code: The broker's or NameServer's response code, when one answered.
    """


def check(response: RemotingCommand, what: str, who: str) -> None:
    """Raises `AdminError` unless `response` is SUCCESS.

    Args:
        response: The answer.
        what: What was asked ("topic stats").
        who: Who answered ("broker 127.0.0.1:10911", "NameServer").
    """
    if response.code == ResponseCode.SUCCESS:
        return
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise AdminError(f"{what} is not supported by {who} yet", response.code)
    try:
        name = ResponseCode(response.code).name
    except ValueError:
        name = str(response.code)
    remark = (response.remark or "no reason given").strip().splitlines()[0]
    raise AdminError(f"{what} failed on {who}: {remark} ({name})", response.code)
