"""A process's metrics exporter, chosen by `metricsExporterType` as RocketMQ 5 chooses it.

    DISABLE    nothing (the default)
    PROM       `/metrics` on metricsPromExporterHost:metricsPromExporterPort
    OTLP_GRPC  pushes to metricsGrpcExporterTarget every metricGrpcExporterIntervalInMills
    LOG        one JSON line on `pocketmq.metrics` every metricLoggingExporterIntervalInMills

The sources count whatever the choice; only collection depends on it, so a process without
an exporter pays for dict increments and nothing else.
"""

from __future__ import annotations

import asyncio
import logging

from pocketmq.observability.metrics_config import ExporterType, MetricsConfig
from pocketmq.observability.otlp import MetricsPusher, otlp_exporter
from pocketmq.observability.prometheus import PrometheusEndpoint
from pocketmq.observability.registry import MetricsHub, MetricSource

log = logging.getLogger(__name__)


def source_for(
    config: MetricsConfig, scope: str, node_type: str, cluster: str, node_id: str
) -> MetricSource:
    """A component's source with RocketMQ's constant labels and `metricsLabel`'s."""
    constant = {**config.extra_labels()}
    if config.in_delta:
        constant["aggregation"] = "delta"
    constant.update(node_type=node_type, cluster=cluster, node_id=node_id)
    return MetricSource(
        scope, constant, enabled=config.enabled_groups, limit=config.cardinality_limit
    )


class MetricsExporter:
    """Starts and stops the exporter `config` names for the sources of `hub`."""

    def __init__(self, config: MetricsConfig, hub: MetricsHub, default_host: str) -> None:
        config.check()
        self.config = config
        self.hub = hub
        self.default_host = default_host
        self.endpoint: PrometheusEndpoint | None = None
        self.pusher: MetricsPusher | None = None

    @property
    def url(self) -> str | None:
        """Where Prometheus scrapes, once started with PROM."""
        if self.endpoint is None:
            return None
        return f"http://{self.endpoint.host}:{self.endpoint.port}/metrics"

    async def start(self) -> None:
        """Raises OSError when the Prometheus port cannot be bound."""
        config = self.config
        kind = config.exporter_type
        if kind is ExporterType.DISABLE:
            return
        self.hub.bind(asyncio.get_running_loop())
        if kind is ExporterType.PROM:
            host = config.prom_host or self.default_host
            self.endpoint = PrometheusEndpoint(host, config.prom_port, self.hub.collect_threadsafe)
            await asyncio.to_thread(self.endpoint.start)
            return
        if kind is ExporterType.OTLP_GRPC:
            exporter = otlp_exporter(
                config.grpc_target,
                config.grpc_headers(),
                config.grpc_timeout_ms,
                config.export_batch_size,
            )
            interval_s = config.grpc_interval_ms / 1000
            log.info("metrics pushed to %s every %.1f s", config.grpc_target, interval_s)
        else:
            exporter = None
            interval_s = config.logging_interval_ms / 1000
        self.pusher = MetricsPusher(
            self.hub, interval_s, exporter=exporter, in_delta=config.in_delta
        )
        self.pusher.start()

    async def stop(self) -> None:
        if self.pusher is not None:
            # A last push, so counts of the final seconds reach the collector.
            await self.pusher.push()
            await self.pusher.stop()
            self.pusher = None
        if self.endpoint is not None:
            await asyncio.to_thread(self.endpoint.stop)
            self.endpoint = None
