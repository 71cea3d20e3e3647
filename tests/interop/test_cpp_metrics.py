"""A scrape of `pocketmq up` under load from the official C++ client: the traffic counters
carry exactly what the C++ producer sent and its push consumer took, the consumer shows up as
a `cpp` connection while it runs, and the group's lag falls to 0 once it has caught up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocketmq.client import Admin
from pocketmq.client.admin.values import TopicSettings
from pocketmq.testing import start_up_process
from tests.integration.metrics_scrape import scrape, wait_for_value
from tests.interop.cpp_harness import wait_for_bodies

TOPIC = "CppMetricsTopic"
GROUP = "CG_CPP_METRICS"
SENT = 400


def test_a_scrape_under_cpp_load_counts_exactly_and_lag_falls_to_zero(
    cpp: Any, tmp_path: Path
) -> None:
    server = start_up_process(tmp_path / "data", tmp_path / "up.log")
    try:
        metrics = server.named_address("metrics")
        with Admin([server.address]) as admin:
            admin.create_topic(TopicSettings(TOPIC, 4, 4), cluster="DefaultCluster")
        producer = cpp("cpp_produce.py", [server.address, TOPIC, str(SENT)])
        assert producer.finish(timeout_s=180)["sent"] == SENT
        labels = {"topic": TOPIC, "is_system": "false"}
        sent = scrape(metrics)
        assert sent.value("rocketmq_messages_in_total", message_type="normal", **labels) == SENT
        assert sent.value("rocketmq_message_size_count", **labels) == SENT
        assert (
            sent.value("rocketmq_rpc_latency_milliseconds_count", node_type="broker",
                       request_code="send_message", response_code="success")
            == SENT
        )  # fmt: skip

        # Expected 0: the consumer stays until stopped, so its connection is there to see.
        consumer = cpp("cpp_push_consume.py", [server.address, GROUP, TOPIC, "0", "150"])
        consumer.wait_for("started", timeout_s=60)
        lag = {"consumer_group": GROUP, "topic": TOPIC}
        wait_for_value(
            metrics,
            "rocketmq_consumer_connections",
            lambda value: value == 1,
            "the C++ consumer's connection",
            consumer_group=GROUP,
            language="cpp",
        )
        wait_for_bodies({f"body-{i}" for i in range(SENT)}, 120, consumer)
        # Lag falls to 0 once the consumer has committed what it consumed (every few seconds).
        caught_up = wait_for_value(
            metrics, "rocketmq_consumer_lag_messages", lambda v: v == 0, "lag 0", **lag
        )
        done = consumer.finish(timeout_s=60)
        assert done["distinct"] == SENT
        assert caught_up.value("rocketmq_messages_out_total", **lag) == done["received"]
        assert caught_up.value("rocketmq_consumer_ready_messages", **lag) == 0
        assert caught_up.value("rocketmq_consumer_inflight_messages", **lag) == 0
        assert caught_up.value("rocketmq_consumer_lag_latency_milliseconds", **lag) == 0
    finally:
        server.stop()
