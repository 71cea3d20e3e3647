"""Metrics of real processes: what a scrape of `pocketmq up` shows after known traffic, that
its families are the ones a RocketMQ 5.5.0 broker serves (names, types, labels), the OTLP push
to a collector the test runs, the LOG exporter, and settings that cannot work.

`tests/conformance/fixtures/rocketmq-5.5.0-broker-metrics.prom` is a scrape of Apache
RocketMQ 5.5.0's broker (`metricsExporterType=PROM`) after 500 sends and a consumer, as
recorded from the reference (`tests/conformance/reference.py`)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from pocketmq.client import Admin, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from pocketmq.testing import ServerProcess, wait_until
from tests.integration.metrics_scrape import scrape, wait_for_value

ServerFactory = Callable[..., ServerProcess]
REFERENCE = (
    Path(__file__).parents[1] / "conformance" / "fixtures" / "rocketmq-5.5.0-broker-metrics.prom"
)
NOT_SERVED = {
    # POP buffer internals and the timer wheel's RocketMQ-specific gauges; pocketmq's timer
    # backlog is `pocketmq_timer_backlog_messages`.
    "rocketmq_pop_buffer_scan_time_consume_milliseconds",
    "rocketmq_pop_checkpoint_buffer_size",
    "rocketmq_pop_offset_buffer_size",
    "rocketmq_pop_revive_lag_milliseconds",
    "rocketmq_pop_revive_latency_milliseconds",
    "rocketmq_timer_dequeue_lag",
    "rocketmq_timer_dequeue_latency_milliseconds",
    "rocketmq_timer_enqueue_lag",
    "rocketmq_timer_enqueue_latency_milliseconds",
    "rocketmq_timer_message_snapshot",
}
TOPIC = "MetricsOrders"
GROUP = "MetricsGroup"


def start_up(run_server: ServerFactory, tmp_path: Path, *settings: str) -> ServerProcess:
    args = ["up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(tmp_path / "up")]
    if settings:
        config = tmp_path / "broker.properties"
        config.write_text("".join(f"{line}\n" for line in settings))
        args += ["-c", str(config)]
    return run_server(*args)


class Counted:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ids: set[str] = set()

    def __call__(self, messages: list[MessageExt]) -> None:
        with self.lock:
            self.ids.update(m.msg_id for m in messages)

    def count(self) -> int:
        with self.lock:
            return len(self.ids)


def consume_all(namesrv: str, expected: int) -> None:
    counted = Counted()
    consumer = PushConsumer(
        GROUP, namesrv=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(counted)
    with consumer:
        wait_until(lambda: counted.count() >= expected, f"{expected} messages consumed")


def test_a_scrape_counts_known_traffic_and_lag_falls_to_zero(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    up = start_up(run_server, tmp_path)
    metrics = up.named_address("metrics")
    with Producer("MetricsProducer", namesrv=up.address) as producer:
        for i in range(20):
            producer.send(Message(TOPIC, f"single-{i}".encode() * 50))
        producer.send_batch([Message(TOPIC, f"batched-{i}".encode()) for i in range(10)])
        found = scrape(metrics)
        assert found.value("rocketmq_producer_connections", language="python") == 1
    labels = {"topic": TOPIC, "message_type": "normal", "is_system": "false"}
    assert found.value("rocketmq_messages_in_total", **labels) == 30
    assert found.value("rocketmq_message_size_count", **labels) == 21  # once per request
    assert found.value("rocketmq_throughput_in_total", **labels) > 20 * 350  # type: ignore[operator]
    assert found.value("pocketmq_durability_receipts_total") >= 30  # type: ignore[operator]
    sends = found.value(
        "rocketmq_rpc_latency_milliseconds_count",
        node_type="broker",
        request_code="send_message_v2",
    )
    assert sends == 20
    assert (
        found.value("rocketmq_rpc_latency_milliseconds_count", request_code="send_batch_message")
        == 1
    )
    assert found.value("rocketmq_rpc_latency_milliseconds_count", node_type="nameserver") >= 1  # type: ignore[operator]

    consume_all(up.address, 30)
    lag = {"consumer_group": GROUP, "topic": TOPIC}
    done = wait_for_value(
        metrics, "rocketmq_consumer_lag_messages", lambda v: v == 0, "lag 0", **lag
    )
    assert done.value("rocketmq_messages_out_total", **lag) == 30
    # Each stored record pulled once: the bytes out are the bytes stored.
    stored_bytes = found.value("rocketmq_throughput_in_total", **labels)
    assert done.value("rocketmq_throughput_out_total", **lag) == stored_bytes
    assert done.value("rocketmq_consumer_ready_messages", **lag) == 0
    assert done.value("rocketmq_consumer_inflight_messages", **lag) == 0

    with Producer("MetricsProducer", namesrv=up.address) as producer:
        for i in range(5):
            producer.send(Message(TOPIC, f"late-{i}".encode()))
    behind = scrape(metrics)
    assert behind.value("rocketmq_consumer_lag_messages", **lag) == 5
    assert behind.value("rocketmq_consumer_ready_messages", **lag) == 5
    assert behind.value("rocketmq_consumer_lag_latency_milliseconds", **lag) > 0  # type: ignore[operator]
    consume_all(up.address, 5)
    wait_for_value(metrics, "rocketmq_consumer_lag_messages", lambda v: v == 0, "lag 0", **lag)


def test_families_are_those_a_rocketmq_5_broker_serves(
    run_server: ServerFactory, tmp_path: Path
) -> None:
    reference = {
        (family.name + "_total" if family.type == "counter" else family.name): family
        for family in text_string_to_metric_families(REFERENCE.read_text())
        if family.name != "target"
    }
    up = start_up(run_server, tmp_path)
    with Producer("MetricsProducer", namesrv=up.address) as producer:
        producer.send(Message(TOPIC, b"one"))
    consume_all(up.address, 1)
    ours = scrape(up.named_address("metrics"))
    for name, family in sorted(reference.items()):
        if name in NOT_SERVED:
            assert name not in ours.types, f"{name} is served now: take it off NOT_SERVED"
            continue
        assert ours.types.get(name) == family.type, f"{name}: {ours.types.get(name)}"
        theirs = {label for s in family.samples for label in s.labels if label != "le"}
        assert ours.label_names(name) >= theirs, f"{name}: {ours.label_names(name)} vs {theirs}"


class Collector(metrics_service_pb2_grpc.MetricsServiceServicer):
    """An OTLP metrics receiver: keeps every export request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Any] = []
        self.headers: list[dict[str, str]] = []

    def Export(self, request: Any, context: Any) -> Any:
        with self.lock:
            self.requests.append(request)
            self.headers.append(dict(context.invocation_metadata()))
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def last_value(self, name: str, topic: str) -> float | None:
        with self.lock:
            requests = list(self.requests)
        found = None
        for request in requests:
            for resource in request.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        if metric.name != name:
                            continue
                        for point in metric.sum.data_points:
                            attributes = {a.key: a.value.string_value for a in point.attributes}
                            if attributes.get("topic") == topic:
                                found = point.as_int or point.as_double
        return found


@pytest.fixture
def collector() -> Any:
    receiver = Collector()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(receiver, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    receiver.port = port  # type: ignore[attr-defined]
    yield receiver
    server.stop(grace=None)


def test_otlp_pushes_reach_a_collector(
    run_server: ServerFactory, tmp_path: Path, collector: Any
) -> None:
    up = start_up(
        run_server,
        tmp_path,
        "metricsExporterType=OTLP_GRPC",
        f"metricsGrpcExporterTarget=http://127.0.0.1:{collector.port}",
        "metricsGrpcExporterHeader=x-tenant:pocketmq",
        "metricGrpcExporterIntervalInMills=300",
        "metricsLabel=region:test",
    )
    with Producer("MetricsProducer", namesrv=up.address) as producer:
        for i in range(7):
            producer.send(Message(TOPIC, f"pushed-{i}".encode()))
    wait_until(
        lambda: collector.last_value("rocketmq_messages_in_total", TOPIC) == 7,
        "the collector receives rocketmq_messages_in_total = 7",
        describe=lambda: collector.last_value("rocketmq_messages_in_total", TOPIC),
    )
    assert collector.headers[-1].get("x-tenant") == "pocketmq"
    request = collector.requests[-1]
    scopes = {s.scope.name for r in request.resource_metrics for s in r.scope_metrics}
    assert {"broker-meter", "namesrv-meter"} <= scopes
    point = next(
        p
        for r in request.resource_metrics
        for s in r.scope_metrics
        for m in s.metrics
        if m.name == "rocketmq_messages_in_total"
        for p in m.sum.data_points
    )
    attributes = {a.key: a.value.string_value for a in point.attributes}
    assert attributes["region"] == "test"
    assert attributes["cluster"] == "DefaultCluster"


def test_the_log_exporter_writes_otlp_json_lines(run_server: ServerFactory, tmp_path: Path) -> None:
    up = start_up(
        run_server,
        tmp_path,
        "metricsExporterType=LOG",
        "metricLoggingExporterIntervalInMills=200",
    )
    with Producer("MetricsProducer", namesrv=up.address) as producer:
        producer.send(Message(TOPIC, b"logged"))
    wait_until(
        lambda: "pocketmq.metrics" in up.log() and "rocketmq_messages_in_total" in up.log(),
        "a metrics line in the log",
    )


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (["metricsExporterType=OTLP_GRPC"], "metricsGrpcExporterTarget"),
        (["metricsExporterType=PROM", "metricsLabel=region"], "metricsLabel"),
        (["metricsExporterType=STATSD"], "metricsExporterType"),
    ],
)
def test_settings_that_cannot_work_stop_the_broker_with_one_line(
    tmp_path: Path, settings: list[str], expected: str
) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("".join(f"{line}\n" for line in settings))
    done = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "broker", "-c", str(config), "--port", "0",
         "--data-dir", str(tmp_path / "data"), "-n", "127.0.0.1:1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert expected in line
    assert "Traceback" not in done.stderr


def test_a_taken_metrics_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "pocketmq.cli.main", "up", "--namesrv-port", "0",
             "--broker-port", "0", "--metrics-port", str(port),
             "--data-dir", str(tmp_path / "up")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"metrics port {port} is already in use" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_lone_namesrv_and_proxy_serve_theirs(run_server: ServerFactory, tmp_path: Path) -> None:
    prom = {
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": "0",
    }
    namesrv_file = tmp_path / "namesrv.properties"
    namesrv_file.write_text("".join(f"{k}={v}\n" for k, v in prom.items()))
    namesrv = run_server("namesrv", "--port", "0", "-c", str(namesrv_file), name="namesrv")
    proxy_file = tmp_path / "rmq-proxy.json"
    proxy_file.write_text(json.dumps(prom))
    proxy = run_server(
        "proxy", "-n", namesrv.address, "--grpc-port", "0", "-c", str(proxy_file), name="proxy"
    )
    served = scrape(proxy.named_address("metrics"))
    assert served.value("rocketmq_proxy_up", node_type="proxy", proxy_mode="cluster") == 1
    with Admin([namesrv.address]) as admin:
        admin.cluster_info()
    timed = scrape(namesrv.named_address("metrics"))
    assert (
        timed.value(
            "rocketmq_rpc_latency_milliseconds_count",
            node_type="nameserver",
            request_code="get_broker_cluster_info",
        )
        == 1
    )


def test_a_dledger_group_shows_its_raft_state(run_server: ServerFactory, tmp_path: Path) -> None:
    up = run_server(
        "up",
        *("--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(tmp_path / "up")),
        *("--dledger", "3"),
    )
    found = wait_for_value(
        up.named_address("metrics"),
        "pocketmq_raft_term",
        lambda term: term is not None and term >= 3,  # three peers, each in term 1 or later
        "three peers' Raft terms",
    )
    peers = {
        labels["peer_id"]
        for name, labels, _ in found.samples
        if name == "pocketmq_raft_commit_index"
    }
    assert peers == {"n0", "n1", "n2"}
    assert found.value("pocketmq_raft_leader_changes_total") >= 1  # type: ignore[operator]
    node_ids = {labels["node_id"] for _, labels, _ in found.samples if "node_id" in labels}
    assert {"broker-a", "broker-a-n1", "broker-a-n2"} <= node_ids
