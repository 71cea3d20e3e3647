"""A broker group of a master and a slave as real processes on loopback, for the replication
tests: fixed ports (a restarted master comes back where its slave looks for it), one data
directory per broker, SIGKILL and restart."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.testing import ServerProcess, free_port_pair, start_server_process


@dataclass
class Broker:
    """One broker's settings and, while it runs, its process."""

    name: str
    broker_id: int
    role: str
    port: int
    data_dir: Path
    extra: dict[str, str] = field(default_factory=dict)
    process: ServerProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self, namesrv: str) -> str:
        settings = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": self.name,
            "brokerId": str(self.broker_id),
            "brokerRole": self.role,
            "brokerIP1": "127.0.0.1",
            "listenPort": str(self.port),
            "namesrvAddr": namesrv,
            "storePathRootDir": str(self.data_dir),
            "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
            **self.extra,
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())


class BrokerGroup:
    """A NameServer, and brokers started, killed and restarted by name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.namesrv = start_server_process(["namesrv", "--port", "0"], root / "namesrv.log")
        self.brokers: dict[str, Broker] = {}
        self._starts = 0

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    def add(self, key: str, name: str, broker_id: int, role: str, **extra: str) -> Broker:
        broker = Broker(name, broker_id, role, free_port_pair(), self.root / key, extra)
        self.brokers[key] = broker
        return broker

    def start(self, key: str) -> Broker:
        broker = self.brokers[key]
        self._starts += 1
        config = self.root / f"{key}.properties"
        config.write_text(broker.properties(self.namesrv_addr))
        broker.process = start_server_process(
            ["broker", "-c", str(config)], self.root / f"{key}-{self._starts}.log"
        )
        return broker

    def kill(self, key: str) -> None:
        broker = self.brokers[key]
        if broker.process is not None:
            broker.process.kill()
            broker.process = None

    def stop(self, key: str) -> None:
        broker = self.brokers[key]
        if broker.process is not None:
            broker.process.stop(timeout_s=30)
            broker.process = None

    def close(self) -> None:
        for key in self.brokers:
            self.stop(key)
        self.namesrv.stop(timeout_s=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in sorted(self.root.glob("*.log"))
        )
