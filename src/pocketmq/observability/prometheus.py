"""The `/metrics` endpoint (`metricsExporterType=PROM`), named as RocketMQ 5 serves it.

RocketMQ's broker exports through OpenTelemetry's Prometheus exporter, which appends the unit
to a name (`rocketmq_rpc_latency_milliseconds_bucket`), adds `otel_scope_name` (the meter:
`broker-meter`) to every series and serves `target_info`; this endpoint writes the same, so a
dashboard built on a RocketMQ 5 broker reads pocketmq unchanged. prometheus_client serves the
HTTP side on its own thread; each scrape collects on the event loop.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pocketmq.observability.catalog import Kind
from pocketmq.observability.registry import Family, labels_of

if TYPE_CHECKING:
    from prometheus_client.registry import Collector

log = logging.getLogger(__name__)


def metric_families(families: Sequence[Family]) -> Iterator[Any]:
    """prometheus_client metric families for `families`, merged by name across sources."""
    from prometheus_client.metrics_core import Metric

    merged: dict[str, Any] = {}
    for family in families:
        definition = family.definition
        name = definition.exposition_name
        out = merged.get(name)
        if out is None:
            base = name.removesuffix("_total") if definition.kind is Kind.COUNTER else name
            out = merged[name] = Metric(base, definition.description, definition.kind.value)
        constant = {**family.constant, "otel_scope_name": family.scope}
        for values, value in family.points:
            labels = {**constant, **labels_of(definition, values)}
            if isinstance(value, float | int):
                out.add_sample(name, labels, value)
                continue
            total = 0.0
            for bound, count in zip([*definition.buckets, math.inf], value, strict=False):
                total += count
                le = "+Inf" if bound == math.inf else repr(float(bound))
                out.add_sample(name + "_bucket", {**labels, "le": le}, total)
            out.add_sample(name + "_count", labels, total)
            out.add_sample(name + "_sum", labels, value[-1])
    yield from merged.values()
    target = Metric("target_info", "Target metadata", "gauge")
    target.add_sample("target_info", {}, 1)
    yield target


class _Collector:
    def __init__(self, collect: Callable[[], list[Family]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Any]:
        return metric_families(self._collect())

    def describe(self) -> list[Any]:
        return []  # unknown until collected; keeps registration from collecting early


class PrometheusEndpoint:
    """An HTTP `/metrics` endpoint on `host:port` (port 0 picks one: see `port`)."""

    def __init__(self, host: str, port: int, collect: Callable[[], list[Family]]) -> None:
        self.host = host
        self.port = port
        self._collect = collect
        self._server: Any = None

    def start(self) -> int:
        """Binds and serves; returns the port. Raises OSError when the port is taken."""
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        collector: Collector = _Collector(self._collect)
        registry.register(collector)
        self._server, _thread = start_http_server(self.port, addr=self.host, registry=registry)
        self.port = int(self._server.server_port)
        log.info("metrics served at http://%s:%d/metrics", self.host, self.port)
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
