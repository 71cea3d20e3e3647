"""The metrics settings every server reads, under RocketMQ 5's key names.

The broker, the proxy and the controller of RocketMQ 5 read the same keys (`BrokerConfig`,
`ProxyConfig`, `ControllerConfig`); pocketmq's NameServer reads them too. `metricsExportBatchSize`
is pocketmq's: the most data points in one OTLP request.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from pocketmq.common.config import ConfigError, key


class ExporterType(enum.Enum):
    """`metricsExporterType`."""

    DISABLE = "DISABLE"
    OTLP_GRPC = "OTLP_GRPC"
    PROM = "PROM"
    LOG = "LOG"


_GROUP_KEYS = {
    "stats": "enable_stats_metrics",
    "remoting": "enable_remoting_metrics",
    "request": "enable_request_metrics",
    "connection": "enable_connection_metrics",
    "lag": "enable_lag_and_dlq_metrics",
    "transaction": "enable_transaction_metrics",
    "store": "enable_message_store_metrics",
}


@dataclass
class MetricsConfig:
    """Which exporter, where, and which metric groups; defaults are RocketMQ's."""

    exporter_type: ExporterType = key("metricsExporterType", ExporterType.DISABLE)
    prom_host: str = key("metricsPromExporterHost", "")
    """Empty: the address the server advertises (a broker's `brokerIP1`)."""
    prom_port: int = key("metricsPromExporterPort", 5557, minimum=0, maximum=65535)
    grpc_target: str = key("metricsGrpcExporterTarget", "")
    grpc_header: str = key("metricsGrpcExporterHeader", "")
    grpc_timeout_ms: int = key("metricGrpcExporterTimeOutInMills", 3000, minimum=1)
    grpc_interval_ms: int = key("metricGrpcExporterIntervalInMills", 60_000, minimum=100)
    logging_interval_ms: int = key("metricLoggingExporterIntervalInMills", 10_000, minimum=100)
    export_batch_size: int = key("metricsExportBatchSize", 0, minimum=0)
    """Most data points per OTLP request; 0 sends each collection in one request."""
    label: str = key("metricsLabel", "")
    """Extra constant labels, `k1:v1,k2:v2`."""
    in_delta: bool = key("metricsInDelta", False)
    cardinality_limit: int = key("metricsOtelCardinalityLimit", 50_000, minimum=1)
    enable_stats_metrics: bool = key("enableStatsMetrics", True)
    enable_remoting_metrics: bool = key("enableRemotingMetrics", True)
    enable_request_metrics: bool = key("enableRequestMetrics", True)
    enable_connection_metrics: bool = key("enableConnectionMetrics", True)
    enable_lag_and_dlq_metrics: bool = key("enableLagAndDlqMetrics", True)
    enable_transaction_metrics: bool = key("enableTransactionMetrics", True)
    enable_message_store_metrics: bool = key("enableMessageStoreMetrics", True)

    @property
    def enabled_groups(self) -> frozenset[str]:
        return frozenset(group for group, name in _GROUP_KEYS.items() if getattr(self, name))

    def extra_labels(self) -> dict[str, str]:
        """`metricsLabel` as a dict.

        Raises:
            ConfigError: an item that is not `name:value`.
        """
        labels: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in self.label.split(","))):
            name, sep, value = item.partition(":")
            if not sep or not name or not value or ":" in value:
                raise ConfigError("metricsLabel", self.label, "name:value pairs split by commas")
            labels[name] = value
        return labels

    def grpc_headers(self) -> dict[str, str]:
        """`metricsGrpcExporterHeader` (`k1:v1,k2:v2`) as a dict."""
        headers: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in self.grpc_header.split(","))):
            name, sep, value = item.partition(":")
            if not sep or not name:
                raise ConfigError(
                    "metricsGrpcExporterHeader",
                    self.grpc_header,
                    "name:value pairs split by commas",
                )
            headers[name.lower()] = value
        return headers

    def check(self) -> None:
        """Raises ConfigError for settings that cannot work (before any server starts)."""
        if self.exporter_type is ExporterType.OTLP_GRPC and not self.grpc_target.strip():
            raise ConfigError(
                "metricsGrpcExporterTarget", "", "host:port (metricsExporterType is OTLP_GRPC)"
            )
        self.extra_labels()
        self.grpc_headers()
