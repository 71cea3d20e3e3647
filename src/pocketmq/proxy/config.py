"""The proxy's settings under RocketMQ's `ProxyConfig` key names (`rmq-proxy.json`, or a
`.properties` file with the same keys)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from pathlib import Path

from pocketmq.client.credentials import SessionCredentials, inner_credentials
from pocketmq.common.config import ConfigFileError, key, load_properties
from pocketmq.proxy.convert import SendLimits
from pocketmq.proxy.requests import ProxySettings
from pocketmq.proxy.tls import TlsSettings
from pocketmq.remoting.tls import TlsMode


class ProxyMode(enum.Enum):
    CLUSTER = "CLUSTER"
    LOCAL = "LOCAL"


@dataclass
class ProxyConfig:
    """Defaults are RocketMQ's."""

    rocketmq_cluster_name: str = key("rocketMQClusterName", "DefaultCluster")
    proxy_mode: ProxyMode = key("proxyMode", ProxyMode.CLUSTER)
    namesrv_addr: str = key("namesrvAddr", "")
    grpc_server_port: int = key("grpcServerPort", 8081, minimum=0, maximum=65535)
    bind_address: str = key("bindAddress", "0.0.0.0")
    advertised_host: str = key("localServeAddr", "")
    """The host clients are told to connect to (QueryRoute); the bind address by default."""
    max_message_size: int = key("maxMessageSize", 4 * 1024 * 1024, minimum=1)
    max_user_property_size: int = key("maxUserPropertySize", 16 * 1024, minimum=1)
    user_property_max_num: int = key("userPropertyMaxNum", 128, minimum=1)
    max_message_group_size: int = key("maxMessageGroupSize", 64, minimum=1)
    max_delay_time_mills: int = key("maxDelayTimeMills", 24 * 3600 * 1000, minimum=0)
    max_transaction_recovery_second: int = key("maxTransactionRecoverySecond", 3600, minimum=0)
    enable_topic_message_type_check: bool = key("enableTopicMessageTypeCheck", True)
    producer_max_attempts: int = key("grpcClientProducerMaxAttempts", 3, minimum=1)
    producer_backoff_initial_ms: int = key("grpcClientProducerBackoffInitialMillis", 10)
    producer_backoff_max_ms: int = key("grpcClientProducerBackoffMaxMillis", 1000)
    consumer_min_polling_ms: int = key(
        "grpcClientConsumerMinLongPollingTimeoutMillis", 5_000, minimum=0
    )
    consumer_max_polling_ms: int = key(
        "grpcClientConsumerMaxLongPollingTimeoutMillis", 20_000, minimum=0
    )
    consumer_batch_size: int = key("grpcClientConsumerLongPollingBatchSize", 32, minimum=1)
    default_invisible_ms: int = key("defaultInvisibleTimeMills", 60_000, minimum=0)
    min_invisible_ms: int = key("minInvisibleTimeMillsForRecv", 10_000, minimum=0)
    max_invisible_ms: int = key("maxInvisibleTimeMills", 12 * 3600 * 1000, minimum=0)
    enable_acl: bool = key("enableACL", False)
    acl_file_path: str = key("aclFilePath", "")
    inner_credentials: str = key("innerClientAuthenticationCredentials", "")
    """`{"accessKey": ..., "secretKey": ...}`: the account the proxy signs its requests to
    brokers with when they check ACL (RocketMQ 5.3's key)."""
    tls_mode: TlsMode = key("tls.server.mode", TlsMode.PERMISSIVE)
    tls_test_mode: bool = key("tls.test.mode.enable", True)
    tls_cert_path: str = key("tls.server.certPath", "")
    tls_key_path: str = key("tls.server.keyPath", "")

    def tls(self) -> TlsSettings:
        return TlsSettings(self.tls_mode, self.tls_cert_path, self.tls_key_path, self.tls_test_mode)

    def inner_account(self) -> SessionCredentials | None:
        """The parsed `innerClientAuthenticationCredentials`; raises ConfigError."""
        return inner_credentials(self.inner_credentials)

    def namesrv_addresses(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def settings(self) -> ProxySettings:
        return ProxySettings(
            limits=SendLimits(
                max_body_size=self.max_message_size,
                max_user_property_size=self.max_user_property_size,
                user_property_max_num=self.user_property_max_num,
                max_message_group_size=self.max_message_group_size,
                max_delay_ms=self.max_delay_time_mills,
                max_transaction_recovery_s=self.max_transaction_recovery_second,
            ),
            enable_topic_message_type_check=self.enable_topic_message_type_check,
            producer_max_attempts=self.producer_max_attempts,
            producer_backoff_initial_ms=self.producer_backoff_initial_ms,
            producer_backoff_max_ms=self.producer_backoff_max_ms,
            consumer_min_polling_ms=self.consumer_min_polling_ms,
            consumer_max_polling_ms=self.consumer_max_polling_ms,
            consumer_batch_size=self.consumer_batch_size,
            default_invisible_ms=self.default_invisible_ms,
            min_invisible_ms=self.min_invisible_ms,
            max_invisible_ms=self.max_invisible_ms,
        )


def read_proxy_file(path: str) -> dict[str, str]:
    """The keys of `rmq-proxy.json` (or of a `.properties` file), as strings.

    Raises:
        ConfigError: a file that cannot be read.
    """
    if not path.endswith(".json"):
        return load_properties(path)
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise ConfigFileError(path, f"not a readable JSON object: {exc}") from None
    if not isinstance(document, dict):
        raise ConfigFileError(path, "not a JSON object")
    return {
        str(k): (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in document.items()
    }
