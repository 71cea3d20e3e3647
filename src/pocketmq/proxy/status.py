"""The v2 status every answer carries, and how broker answers turn into one (RocketMQ's
`ResponseBuilder`: a few remoting codes have their own v2 code, the rest are
INTERNAL_SERVER_ERROR with the broker's remark)."""

from __future__ import annotations

from typing import Any, Final

from pocketmq.common.codes import ResponseCode
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2

REMOTING_TO_V2: Final[dict[int, Any]] = {
    ResponseCode.SUCCESS: v2.OK,
    ResponseCode.SYSTEM_BUSY: v2.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: v2.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: v2.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: v2.TOPIC_NOT_FOUND,
}


class ProxyError(Exception):
    """An answer other than OK: `code` (a v2 Code) and what to tell the client."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @classmethod
    def from_remoting(cls, code: int, remark: str | None) -> ProxyError:
        return cls(REMOTING_TO_V2.get(code, v2.INTERNAL_SERVER_ERROR), remark or str(code))

    def status(self) -> v2.Status:
        return v2.Status(code=self.code, message=self.message)  # type: ignore[arg-type]


def ok() -> v2.Status:
    return v2.Status(code=v2.OK, message="OK")
