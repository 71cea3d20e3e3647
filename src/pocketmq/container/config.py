"""The broker container's own settings, under RocketMQ's `BrokerContainerConfig` key names.

Only what the container itself uses: its port, the NameServers its brokers register with when
their own file names none, and the broker files it starts with. Broker settings live in each
broker's own file (`pocketmq.broker.config`, `pocketmq.store.config`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pocketmq.common.config import ConfigError, key

LISTEN_PORT_DEFAULT: Final = 10811


@dataclass
class ContainerConfig:
    """Settings of one broker container; defaults are RocketMQ's."""

    listen_port: int = key("listenPort", LISTEN_PORT_DEFAULT)
    bind_address: str = key("bindAddress", "0.0.0.0")
    namesrv_addr: str = key("namesrvAddr", "")
    # RocketMQ separates the files with ':' (so a Windows path cannot be named).
    broker_config_paths: str = key("brokerConfigPaths", "")

    def broker_config_path_list(self) -> list[str]:
        """`brokerConfigPaths` split on `:`, blanks dropped."""
        return [p.strip() for p in self.broker_config_paths.split(":") if p.strip()]

    def namesrv_addresses(self) -> list[str]:
        """`namesrvAddr` split on `;`, blanks dropped."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def check(self) -> None:
        """Raises `ConfigError` for a `namesrvAddr` entry that is not `host:port`, which
        RocketMQ's startup refuses too (no broker could ever register)."""
        for address in self.namesrv_addresses():
            host, sep, port = address.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
                raise ConfigError(
                    "namesrvAddr", self.namesrv_addr, "host:port;host:port (e.g. 127.0.0.1:9876)"
                )
