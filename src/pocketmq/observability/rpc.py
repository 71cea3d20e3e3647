"""`rocketmq_rpc_latency`: how long each request took from arrival to answer, by code.

Request and response codes are named as RocketMQ's `RemotingHelper` names them: the constant's
name in lower case (`send_message_v2`, `query_not_found`), else the number. The label tuple of a
(request, response, oneway, held) combination is built once and cached, so recording costs a
dict lookup and a histogram bucket.
"""

from __future__ import annotations

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.observability import catalog
from pocketmq.observability.registry import Labels, MetricSource

_BOOL = ("false", "true")


def request_name(code: int) -> str:
    try:
        return RequestCode(code).name.lower()
    except ValueError:
        return str(code)


def response_name(code: int) -> str:
    try:
        return ResponseCode(code).name.lower()
    except ValueError:
        return str(code)


class RpcLatency:
    """Records one answered request; a remoting server's `observe` callback."""

    def __init__(self, source: MetricSource, protocol: str = "remoting") -> None:
        self.histogram = source.histogram(catalog.RPC_LATENCY)
        self.protocol = protocol
        self._labels: dict[tuple[int, int, bool, bool], Labels] = {}

    def __call__(
        self, request_code: int, response_code: int, elapsed_s: float, oneway: bool, held: bool
    ) -> None:
        key = (request_code, response_code, oneway, held)
        labels = self._labels.get(key)
        if labels is None:
            answered = response_code >= 0
            labels = self._labels[key] = (
                self.protocol,
                request_name(request_code),
                response_name(response_code) if answered else "",
                _BOOL[held],
                "oneway" if oneway else "success" if answered else "cancelled",
            )
        self.histogram.record(labels, elapsed_s * 1000)
