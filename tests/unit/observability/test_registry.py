"""The metric registry and its translations: Prometheus text as RocketMQ 5 serves it, OTLP data
as OpenTelemetry's SDK builds it, and the metrics settings."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pocketmq.common.config import ConfigError, apply_properties
from pocketmq.observability import catalog
from pocketmq.observability.exporter import source_for
from pocketmq.observability.metrics_config import ExporterType, MetricsConfig
from pocketmq.observability.otlp import DeltaTracker, metrics_data
from pocketmq.observability.prometheus import metric_families
from pocketmq.observability.registry import OVERFLOW, MetricSource
from pocketmq.observability.rpc import RpcLatency


def broker_source(**config: str) -> MetricSource:
    settings = MetricsConfig()
    apply_properties(settings, config)
    return source_for(settings, "broker-meter", "broker", "DefaultCluster", "broker-a")


def exposition(*sources: MetricSource) -> str:
    class Collector:
        def collect(self):  # type: ignore[no-untyped-def]
            return metric_families([f for s in sources for f in s.collect()])

        def describe(self) -> list[object]:
            return []

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())  # type: ignore[arg-type]
    return generate_latest(registry).decode()


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_counters_and_histograms_read_as_rocketmq_5_names_them() -> None:
    source = broker_source()
    messages = source.counter(catalog.MESSAGES_IN)
    sizes = source.histogram(catalog.MESSAGE_SIZE)
    labels = ("T", "normal", "false")
    messages.add(labels, 3)
    messages.add(labels, 2)
    for size in (1024, 1025, 5000):  # 1024 falls in le=1024: buckets are inclusive
        sizes.record(labels, size)
    text = exposition(source)
    found = samples(text)
    common = {
        "cluster": "DefaultCluster",
        "node_type": "broker",
        "node_id": "broker-a",
        "otel_scope_name": "broker-meter",
        "topic": "T",
        "message_type": "normal",
        "is_system": "false",
    }
    key = frozenset(common.items())
    assert found[("rocketmq_messages_in_total", key)] == 5
    assert "# TYPE rocketmq_messages_in_total counter" in text
    bucket = {le: found[("rocketmq_message_size_bucket", key | {("le", le)})] for le in
              ("1024.0", "4096.0", "524288.0", "+Inf")}  # fmt: skip
    assert bucket == {"1024.0": 1, "4096.0": 2, "524288.0": 3, "+Inf": 3}
    assert found[("rocketmq_message_size_count", key)] == 3
    assert found[("rocketmq_message_size_sum", key)] == 1024 + 1025 + 5000


def test_units_become_suffixes_as_opentelemetrys_prometheus_exporter_writes_them() -> None:
    assert catalog.RPC_LATENCY.exposition_name == "rocketmq_rpc_latency_milliseconds"
    assert catalog.STORAGE_SIZE.exposition_name == "rocketmq_storage_size_bytes"
    assert catalog.FLUSH_BEHIND.exposition_name == "rocketmq_storage_flush_behind_bytes"
    assert catalog.MESSAGES_IN.exposition_name == "rocketmq_messages_in_total"


def test_rpc_latency_names_codes_as_remoting_helper_does() -> None:
    source = broker_source()
    rpc = RpcLatency(source)
    rpc(310, 0, 0.002, False, False)
    rpc(11, 19, 15.0, False, True)  # a held pull that found nothing
    rpc(15, -1, 0.0001, True, False)  # oneway
    rpc(9999, 0, 0.001, False, False)  # unknown code: its number
    rows = {labels: row for labels, row in rpc.histogram.values.items()}
    assert set(rows) == {
        ("remoting", "send_message_v2", "success", "false", "success"),
        ("remoting", "pull_message", "pull_not_found", "true", "success"),
        ("remoting", "update_consumer_offset", "", "false", "oneway"),
        ("remoting", "9999", "success", "false", "success"),
    }
    held = rows[("remoting", "pull_message", "pull_not_found", "true", "success")]
    assert held[-2] == 1  # 15,000 ms: past the last bound (3,000 ms)


def test_label_sets_past_the_cardinality_limit_share_one_overflow_series() -> None:
    source = broker_source(metricsOtelCardinalityLimit="2")
    counter = source.counter(catalog.MESSAGES_IN)
    for topic in ("A", "B", "C", "D"):
        counter.add((topic, "normal", "false"))
    assert counter.values == {
        ("A", "normal", "false"): 1,
        ("B", "normal", "false"): 1,
        (OVERFLOW,): 2,
    }
    assert 'otel_metric_overflow="true"' in exposition(source)


def test_switched_off_groups_are_not_collected() -> None:
    source = broker_source(enableLagAndDlqMetrics="false")
    source.observe(catalog.LAG_MESSAGES, lambda: [(("g", "T", "false", "false"), 5.0)])
    source.observe(catalog.TOPIC_NUMBER, lambda: [((), 3.0)])
    names = {family.definition.name for family in source.collect()}
    assert names == {"rocketmq_topic_number"}


def test_a_broken_gauge_costs_only_itself() -> None:
    source = broker_source()

    def broken() -> list[tuple[tuple[str, ...], float]]:
        raise RuntimeError("boom")

    source.observe(catalog.TOPIC_NUMBER, broken)
    source.observe(catalog.GROUP_NUMBER, lambda: [((), 2.0)])
    assert [f.definition.name for f in source.collect()] == ["rocketmq_consumer_group_number"]


def test_metrics_label_and_delta_add_constant_labels() -> None:
    source = broker_source(metricsLabel="region:eu,zone:a", metricsInDelta="true")
    assert source.constant == {
        "region": "eu",
        "zone": "a",
        "aggregation": "delta",
        "node_type": "broker",
        "cluster": "DefaultCluster",
        "node_id": "broker-a",
    }


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({"metricsLabel": "region"}, "metricsLabel"),
        ({"metricsGrpcExporterHeader": "noseparator"}, "metricsGrpcExporterHeader"),
        ({"metricsExporterType": "OTLP_GRPC"}, "metricsGrpcExporterTarget"),
    ],
)
def test_settings_that_cannot_work_are_refused_naming_the_key(
    settings: dict[str, str], key: str
) -> None:
    config = MetricsConfig()
    apply_properties(config, settings)
    with pytest.raises(ConfigError, match=key):
        config.check()


def test_an_unknown_exporter_type_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="metricsExporterType"):
        apply_properties(MetricsConfig(), {"metricsExporterType": "STATSD"})
    config = MetricsConfig()
    apply_properties(config, {"metricsExporterType": "PROM"})
    assert config.exporter_type is ExporterType.PROM


def test_otlp_data_is_cumulative_or_delta_as_configured() -> None:
    source = broker_source()
    counter = source.counter(catalog.MESSAGES_IN)
    histogram = source.histogram(catalog.MESSAGE_SIZE)
    source.observe(catalog.TOPIC_NUMBER, lambda: [((), 7.0)])
    labels = ("T", "normal", "false")
    counter.add(labels, 4)
    histogram.record(labels, 100)
    delta = DeltaTracker()

    def points(tracker: DeltaTracker | None) -> dict[str, object]:
        data = metrics_data(source.collect(), 1, 2, tracker)
        (resource,) = data.resource_metrics
        (scope,) = resource.scope_metrics
        assert scope.scope.name == "broker-meter"
        return {metric.name: metric.data for metric in scope.metrics}

    first = points(delta)
    assert first["rocketmq_messages_in_total"].data_points[0].value == 4  # type: ignore[attr-defined]
    counter.add(labels, 6)
    histogram.record(labels, 2000)
    second = points(delta)
    assert second["rocketmq_messages_in_total"].data_points[0].value == 6  # type: ignore[attr-defined]
    sizes = second["rocketmq_message_size"].data_points[0]  # type: ignore[attr-defined]
    assert (sizes.count, sizes.sum, list(sizes.bucket_counts)) == (1, 2000, [0, 1, 0, 0, 0, 0, 0])
    assert second["rocketmq_topic_number"].data_points[0].value == 7  # type: ignore[attr-defined]
    cumulative = points(None)
    assert cumulative["rocketmq_messages_in_total"].data_points[0].value == 10  # type: ignore[attr-defined]
    point = cumulative["rocketmq_messages_in_total"].data_points[0]  # type: ignore[attr-defined]
    assert (point.attributes["topic"], point.attributes["node_id"]) == ("T", "broker-a")
