"""Every metric pocketmq serves: name, kind, unit, labels and buckets.

RocketMQ 5's names, units, labels and histogram buckets come first (`BrokerMetricsConstant`,
`RemotingMetricsConstant`, `DefaultStoreMetricsConstant`, as a 5.5.0 broker serves them), so
its dashboards and alert rules work unchanged; then pocketmq's own, prefixed `pocketmq_`, for
what RocketMQ 5 has no name for (replica lag, durability receipts, Raft, controller elections,
timer backlog, dead-letter depth).

Every series also carries the process's constant labels (`cluster`, `node_type`, `node_id`, and
`metricsLabel`'s), which are not listed here.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final


class Kind(enum.Enum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class Definition:
    """One instrument. `unit` is OpenTelemetry's; Prometheus names get it as a suffix."""

    name: str
    kind: Kind
    description: str
    labels: tuple[str, ...] = ()
    unit: str = ""
    buckets: tuple[float, ...] = ()
    group: str = "stats"
    """Which of RocketMQ's `enable<Group>Metrics` switches turns it off."""

    @property
    def exposition_name(self) -> str:
        """The Prometheus name, as OpenTelemetry's Prometheus exporter writes it."""
        suffix = {"milliseconds": "_milliseconds", "bytes": "_bytes"}.get(self.unit, "")
        if suffix and not self.name.endswith(suffix):
            return self.name + suffix
        return self.name


MS: Final = "milliseconds"
BYTES: Final = "bytes"
TOPIC_IN: Final = ("topic", "message_type", "is_system")
TOPIC_OUT: Final = ("topic", "consumer_group", "is_system")
LAG: Final = ("consumer_group", "topic", "is_retry", "is_system")
STORAGE: Final = ("storage_type", "storage_medium")
RPC_LABELS: Final = ("protocol_type", "request_code", "response_code", "is_long_polling", "result")

MESSAGE_SIZE_BUCKETS: Final = (1024.0, 4096.0, 524288.0, 1048576.0, 2097152.0, 4194304.0)
RPC_LATENCY_BUCKETS: Final = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
CREATE_TIME_BUCKETS: Final = (10.0, 100.0, 1000.0, 3000.0, 5000.0)


def _d(
    name: str,
    kind: Kind,
    description: str,
    labels: tuple[str, ...] = (),
    unit: str = "",
    buckets: tuple[float, ...] = (),
    group: str = "stats",
) -> Definition:
    return Definition(name, kind, description, labels, unit, buckets, group)


C, G, H = Kind.COUNTER, Kind.GAUGE, Kind.HISTOGRAM

# -- RocketMQ 5 ---------------------------------------------------------------------------------
MESSAGES_IN: Final = _d(
    "rocketmq_messages_in_total", C, "Total number of incoming messages", TOPIC_IN
)
MESSAGES_OUT: Final = _d(
    "rocketmq_messages_out_total", C, "Total number of outgoing messages", TOPIC_OUT
)
THROUGHPUT_IN: Final = _d(
    "rocketmq_throughput_in_total", C, "Total traffic of incoming messages", TOPIC_IN
)
THROUGHPUT_OUT: Final = _d(
    "rocketmq_throughput_out_total", C, "Total traffic of outgoing messages", TOPIC_OUT
)
MESSAGE_SIZE: Final = _d(
    "rocketmq_message_size", H, "Incoming messages size", TOPIC_IN, buckets=MESSAGE_SIZE_BUCKETS
)
RPC_LATENCY: Final = _d(
    "rocketmq_rpc_latency", H, "Rpc latency", RPC_LABELS, MS, RPC_LATENCY_BUCKETS, "remoting"
)
TOPIC_CREATE_TIME: Final = _d(
    "rocketmq_topic_create_execution_time",
    H,
    "The distribution of create topic time",
    unit=MS,
    buckets=CREATE_TIME_BUCKETS,
    group="request",
)
GROUP_CREATE_TIME: Final = _d(
    "rocketmq_consumer_group_create_execution_time",
    H,
    "The distribution of create subscription time",
    unit=MS,
    buckets=CREATE_TIME_BUCKETS,
    group="request",
)
PROCESSOR_WATERMARK: Final = _d(
    "rocketmq_processor_watermark",
    G,
    "Request processor watermark",
    ("processor",),
    group="request",
)
BROKER_PERMISSION: Final = _d("rocketmq_broker_permission", G, "Broker permission", group="request")
TOPIC_NUMBER: Final = _d("rocketmq_topic_number", G, "Active topic number", group="request")
GROUP_NUMBER: Final = _d(
    "rocketmq_consumer_group_number", G, "Active subscription group number", group="request"
)
PRODUCER_CONNECTIONS: Final = _d(
    "rocketmq_producer_connections",
    G,
    "Producer connections",
    ("language", "version", "protocol_type"),
    group="connection",
)
CONSUMER_CONNECTIONS: Final = _d(
    "rocketmq_consumer_connections",
    G,
    "Consumer connections",
    ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"),
    group="connection",
)
LAG_MESSAGES: Final = _d(
    "rocketmq_consumer_lag_messages", G, "Consumer lag messages", LAG, group="lag"
)
LAG_LATENCY: Final = _d(
    "rocketmq_consumer_lag_latency", G, "Consumer lag time", LAG, MS, group="lag"
)
INFLIGHT_MESSAGES: Final = _d(
    "rocketmq_consumer_inflight_messages", G, "Consumer inflight messages", LAG, group="lag"
)
QUEUEING_LATENCY: Final = _d(
    "rocketmq_consumer_queueing_latency", G, "Consumer queueing time", LAG, MS, group="lag"
)
READY_MESSAGES: Final = _d(
    "rocketmq_consumer_ready_messages", G, "Consumer ready messages", LAG, group="lag"
)
SEND_TO_DLQ: Final = _d(
    "rocketmq_send_to_dlq_messages_total",
    C,
    "Consumer send to DLQ messages",
    ("consumer_group", "topic", "is_system"),
    group="lag",
)
COMMIT_MESSAGES: Final = _d(
    "rocketmq_commit_messages_total",
    C,
    "Total number of commit messages",
    ("topic",),
    group="transaction",
)
ROLLBACK_MESSAGES: Final = _d(
    "rocketmq_rollback_messages_total",
    C,
    "Total number of rollback messages",
    ("topic",),
    group="transaction",
)
HALF_MESSAGES: Final = _d(
    "rocketmq_half_messages", G, "Half messages of all topics", ("topic",), group="transaction"
)
STORAGE_SIZE: Final = _d(
    "rocketmq_storage_size", G, "Broker storage size", STORAGE, BYTES, group="store"
)
FLUSH_BEHIND: Final = _d(
    "rocketmq_storage_flush_behind_bytes",
    G,
    "Broker flush behind bytes",
    STORAGE,
    BYTES,
    group="store",
)
DISPATCH_BEHIND: Final = _d(
    "rocketmq_storage_dispatch_behind_bytes",
    G,
    "Broker dispatch behind bytes",
    STORAGE,
    BYTES,
    group="store",
)
MESSAGE_RESERVE_TIME: Final = _d(
    "rocketmq_storage_message_reserve_time",
    G,
    "Broker message reserve time",
    STORAGE,
    MS,
    group="store",
)

STORAGE_FREE: Final = _d(
    "pocketmq_storage_free_bytes",
    G,
    "Free bytes on the store's disk",
    STORAGE,
    BYTES,
    group="store",
)

# -- pocketmq's own -----------------------------------------------------------------------------
REPLICA_LAG_BYTES: Final = _d(
    "pocketmq_replica_lag_bytes",
    G,
    "Bytes of the commit log a replica has not confirmed yet",
    ("replica",),
    group="store",
)
REPLICA_LAG_LATENCY: Final = _d(
    "pocketmq_replica_lag_latency",
    G,
    "Time since a lagging replica last confirmed all of the commit log",
    ("replica",),
    MS,
    group="store",
)
DURABILITY_RECEIPTS: Final = _d(
    "pocketmq_durability_receipts_total",
    C,
    "Send answers by the durability they report (the put status)",
    ("receipt",),
)
RAFT_TERM: Final = _d(
    "pocketmq_raft_term", G, "Current Raft term", ("group", "peer_id"), group="store"
)
RAFT_COMMIT_INDEX: Final = _d(
    "pocketmq_raft_commit_index", G, "Raft commit index", ("group", "peer_id"), group="store"
)
RAFT_LEADER_CHANGES: Final = _d(
    "pocketmq_raft_leader_changes_total",
    C,
    "Times this peer saw the group's leader change",
    ("group", "peer_id"),
    group="store",
)
CONTROLLER_ELECTIONS: Final = _d(
    "pocketmq_controller_elections_total",
    C,
    "Master elections the controller ran, by result",
    ("broker_set", "election_result"),
)
TIMER_BACKLOG: Final = _d(
    "pocketmq_timer_backlog_messages",
    G,
    "Delayed and timer messages waiting for their time",
    group="store",
)
DLQ_DEPTH: Final = _d(
    "pocketmq_dlq_messages",
    G,
    "Messages in a consumer group's dead-letter queue",
    ("consumer_group",),
    group="lag",
)
PROXY_UP: Final = _d("rocketmq_proxy_up", G, "Whether the proxy is up", ("proxy_mode",))

ALL: Final = tuple(value for value in list(globals().values()) if isinstance(value, Definition))
"""Every definition, in the order above."""

GROUPS: Final = ("stats", "remoting", "request", "connection", "lag", "transaction", "store")
"""RocketMQ's `enable<Group>Metrics` switches (stats is `enableStatsMetrics` ...)."""
