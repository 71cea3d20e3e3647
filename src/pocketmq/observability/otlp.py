"""Pushed metrics: OTLP over gRPC (`OTLP_GRPC`) and JSON log lines (`LOG`), as RocketMQ 5 pushes.

The registry's families become OpenTelemetry SDK `MetricsData`, which OpenTelemetry's own OTLP
exporter sends (batched by `metricsExportBatchSize`, with `metricsGrpcExporterHeader` as
headers). Counters and histograms are cumulative unless `metricsInDelta`, which sends what
changed since the last push, as RocketMQ does for counters and histograms. The LOG exporter
writes the same data as one OTLP-JSON line on the `pocketmq.metrics` logger.

Collection happens on the event loop; the blocking gRPC export runs on a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Any, cast

from pocketmq.observability.catalog import Kind
from pocketmq.observability.registry import Family, Labels, MetricsHub, labels_of

log = logging.getLogger(__name__)
metrics_log = logging.getLogger("pocketmq.metrics")


class DeltaTracker:
    """What each cumulative series held at the last push, to send differences."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str, Labels], Any] = {}

    def delta(self, family: Family, labels: Labels, value: Any) -> Any:
        key = (family.scope, family.definition.name, labels)
        previous = self._last.get(key)
        self._last[key] = value
        if previous is None:
            return value
        if isinstance(value, float | int):
            return value - previous
        return [now - before for now, before in zip(value, previous, strict=True)]


def metrics_data(
    families: Sequence[Family], start_ns: int, now_ns: int, delta: DeltaTracker | None = None
) -> Any:
    """OpenTelemetry SDK `MetricsData` for `families`: one scope per source."""
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        Gauge,
        Histogram,
        HistogramDataPoint,
        Metric,
        MetricsData,
        NumberDataPoint,
        ResourceMetrics,
        ScopeMetrics,
        Sum,
    )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    temporality = (
        AggregationTemporality.DELTA if delta is not None else AggregationTemporality.CUMULATIVE
    )
    by_scope: dict[str, list[Any]] = {}
    for family in families:
        if not family.points:
            continue  # an instrument nothing has touched yet sends no empty metric
        definition = family.definition
        cumulative = definition.kind is not Kind.GAUGE
        points: list[Any] = []
        for values, raw in family.points:
            value: Any = delta.delta(family, values, raw) if delta and cumulative else raw
            attributes = {**family.constant, **labels_of(definition, values)}
            if definition.kind is Kind.HISTOGRAM:
                counts = [int(count) for count in value[:-1]]
                points.append(
                    HistogramDataPoint(
                        attributes=attributes,
                        start_time_unix_nano=start_ns,
                        time_unix_nano=now_ns,
                        count=sum(counts),
                        sum=value[-1],
                        bucket_counts=counts,
                        explicit_bounds=list(definition.buckets),
                        # Not kept (a comparison per record); an absent field in OTLP.
                        min=cast(float, None),
                        max=cast(float, None),
                    )
                )
            else:
                points.append(NumberDataPoint(attributes, start_ns, now_ns, value))
        data: Any
        if definition.kind is Kind.HISTOGRAM:
            data = Histogram(points, temporality)
        elif definition.kind is Kind.COUNTER:
            data = Sum(points, temporality, is_monotonic=True)
        else:
            data = Gauge(points)
        metric = Metric(definition.name, definition.description, definition.unit, data)
        by_scope.setdefault(family.scope, []).append(metric)
    scopes = [
        ScopeMetrics(InstrumentationScope(scope), metrics, "")
        for scope, metrics in by_scope.items()
    ]
    return MetricsData([ResourceMetrics(Resource.get_empty(), scopes, "")])


class MetricsPusher:
    """Collects every `interval_s` seconds and hands the data to an exporter (`OTLP_GRPC`) or
    writes it as a log line (`LOG`)."""

    def __init__(
        self,
        hub: MetricsHub,
        interval_s: float,
        *,
        exporter: Any = None,
        in_delta: bool = False,
    ) -> None:
        self.hub = hub
        self.interval_s = interval_s
        self.exporter = exporter
        self.delta = DeltaTracker() if in_delta else None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="metrics-push")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.push()

    async def push(self) -> None:
        data = metrics_data(self.hub.collect(), self.hub.started_ns, time.time_ns(), self.delta)
        if self.exporter is None:
            metrics_log.info("%s", data.to_json(indent=None))  # one line of OTLP JSON
            return
        try:
            result = await asyncio.to_thread(self.exporter.export, data)
        except Exception as exc:  # noqa: BLE001 - a collector that is down: try next time
            log.warning("metrics push failed: %s", exc)
            return
        if getattr(result, "name", "") != "SUCCESS":
            log.warning("metrics push to the OTLP collector failed (%s)", result)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.exporter is not None:
            await asyncio.to_thread(self.exporter.shutdown)


def otlp_exporter(target: str, headers: dict[str, str], timeout_ms: int, batch_size: int) -> Any:
    """OpenTelemetry's gRPC OTLP metric exporter for `target` (`host:port`, or a URL: an
    `http://` one is plaintext, anything else TLS, as RocketMQ reads it)."""
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

    endpoint = target if target.startswith("http") else f"https://{target}"
    return OTLPMetricExporter(
        endpoint=endpoint,
        insecure=endpoint.startswith("http://"),
        headers=headers or None,
        timeout=timeout_ms / 1000,
        max_export_batch_size=batch_size or None,
    )
