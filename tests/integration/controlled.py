"""A controller-mode cluster as real processes on loopback: a NameServer, three controllers
and three brokers of broker-a, each with its own ports and data directory; any of them is
killed (SIGKILL) and restarted by name, and broker CommitLogs are compared byte for byte."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.client import Admin
from pocketmq.client.admin import AdminError
from pocketmq.common.codes import RequestCode
from pocketmq.testing import ServerProcess, free_port_pair, start_server_process

BROKER_NAME = "broker-a"
FILE_SIZE = 8 * 1024 * 1024
FAST = {
    # Failover within about a second: a killed broker's connection closes at once; one cut off
    # is judged dead after the heartbeat timeout.
    "brokerHeartbeatInterval": "200",
    "controllerHeartBeatTimeoutMills": "3000",
    "syncBrokerMetadataPeriod": "500",
    "checkSyncStateSetPeriod": "300",
    "haMaxTimeSlaveNotCatchup": "5000",
    "haSendHeartbeatInterval": "500",
    "syncFlushTimeout": "3000",
}


@dataclass
class Node:
    name: str
    port: int
    data_dir: Path
    process: ServerProcess | None = None
    starts: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class ControlledCluster:
    def __init__(self, root: Path, brokers: int = 3, extra: dict[str, str] | None = None) -> None:
        self.root = root
        self.namesrv = start_server_process(["namesrv", "--port", "0"], root / "namesrv.log")
        self.controllers = {
            f"c{i}": Node(f"c{i}", free_port_pair(), root / f"c{i}") for i in range(3)
        }
        self.peers = ";".join(f"{c.name}-127.0.0.1:{c.port}" for c in self.controllers.values())
        self.brokers = {
            f"b{i}": Node(f"b{i}", free_port_pair(), root / f"b{i}") for i in range(brokers)
        }
        self.extra = {
            "flushDiskType": "SYNC_FLUSH",
            "allAckInSyncStateSet": "true",
            **FAST,
            **(extra or {}),
        }
        self.controller_extra: dict[str, str] = {"scanNotActiveBrokerInterval": "200"}
        self.in_namesrv = False
        """Controllers run inside NameServers (`enableControllerInNamesrv=true`)."""
        self.admin = Admin([self.namesrv_addr], timeout_s=3.0)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    @property
    def controller_addr(self) -> str:
        return ";".join(c.address for c in self.controllers.values())

    # -- processes -----------------------------------------------------------------------------
    def start_controller(self, name: str) -> Node:
        node = self.controllers[name]
        node.starts += 1
        settings = {
            "controllerDLegerGroup": "group1",
            "controllerDLegerPeers": self.peers,
            "controllerDLegerSelfId": name,
            "controllerStorePath": str(node.data_dir),
            **self.controller_extra,
            **node.extra,
        }
        command = ["controller"]
        if self.in_namesrv:
            settings["enableControllerInNamesrv"] = "true"
            command = ["namesrv", "--port", "0"]
        config = self.root / f"{name}.conf"
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        node.process = start_server_process(
            [*command, "-c", str(config)], self.root / f"{name}-{node.starts}.log"
        )
        return node

    def broker_properties(self, node: Node) -> str:
        settings = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": BROKER_NAME,
            "brokerIP1": "127.0.0.1",
            "listenPort": str(node.port),
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(node.data_dir),
            "mappedFileSizeCommitLog": str(FILE_SIZE),
            # As RocketMQ's controller quick start writes them: the controller decides both.
            "brokerId": "-1",
            "brokerRole": "SLAVE",
            "enableControllerMode": "true",
            "controllerAddr": self.controller_addr,
            **self.extra,
            **node.extra,
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    def start_broker(self, name: str) -> Node:
        node = self.brokers[name]
        node.starts += 1
        config = self.root / f"{name}.properties"
        config.write_text(self.broker_properties(node))
        node.process = start_server_process(
            ["broker", "-c", str(config)], self.root / f"{name}-{node.starts}.log"
        )
        return node

    def start_all(self) -> None:
        for name in self.controllers:
            self.start_controller(name)
        for name in self.brokers:
            self.start_broker(name)

    def kill(self, name: str) -> None:
        node = {**self.controllers, **self.brokers}[name]
        if node.process is not None:
            node.process.kill()
            node.process = None

    def running_brokers(self) -> list[Node]:
        return [b for b in self.brokers.values() if b.process is not None]

    def close(self) -> None:
        self.admin.close()
        for node in [*self.brokers.values(), *self.controllers.values()]:
            if node.process is not None:
                node.process.stop(timeout_s=30)
                node.process = None
        self.namesrv.stop(timeout_s=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-5000:]}"
            for path in sorted(self.root.glob("*.log"))
        )

    # -- what the servers say --------------------------------------------------------------------
    def status(self, name: str) -> dict[str, Any] | None:
        try:
            document: dict[str, Any] = self.admin.ha_status(self.brokers[name].address)
        except AdminError:
            return None
        return document

    def controller_request(self, code: int, **fields: str) -> tuple[int, dict[str, str], bytes]:
        """Sends `code` to the controller leader (asked of each controller in turn)."""
        for node in self.controllers.values():
            if node.process is None:
                continue
            try:
                meta = self.admin.raw_request(
                    node.address, RequestCode.CONTROLLER_GET_METADATA_INFO
                )
            except AdminError:
                continue
            leader = meta.ext_fields.get("controllerLeaderAddress")
            if leader:
                response = self.admin.raw_request(leader, code, fields)
                return response.code, response.ext_fields, response.body
        raise AssertionError("no controller names a leader")

    def wait_master(self, timeout_s: float = 20.0, *, other_than: str | None = None) -> str:
        """The broker serving as master, once exactly one running broker does."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            masters = [
                b.name
                for b in self.running_brokers()
                if b.name != other_than and (self.status(b.name) or {}).get("master")
            ]
            if len(masters) == 1:
                return masters[0]
            time.sleep(0.05)
        raise AssertionError(f"no single master within {timeout_s} s\n{self.logs()}")

    def wait_in_sync(self, size: int, timeout_s: float = 20.0) -> dict[str, Any]:
        """The master's status once its SyncStateSet holds `size` brokers."""
        deadline = time.monotonic() + timeout_s
        status: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            master = self.wait_master(timeout_s)
            status = self.status(master)
            if status and len(status.get("syncStateSet", [])) == size:
                return status
            time.sleep(0.1)
        raise AssertionError(f"SyncStateSet never reached {size}: {status}\n{self.logs()}")

    def wait_same_end(self, timeout_s: float = 30.0) -> int:
        """Waits until every running broker's CommitLog ends at the same offset."""
        deadline = time.monotonic() + timeout_s
        ends: list[int] = []
        while time.monotonic() < deadline:
            statuses = [self.status(b.name) for b in self.running_brokers()]
            ends = [_max_offset(s) for s in statuses]
            if len(set(ends)) == 1 and ends[0] >= 0:
                return ends[0]
            time.sleep(0.1)
        raise AssertionError(f"brokers did not converge within {timeout_s} s: {ends}")

    def bodies(self, broker: str, topic: str) -> dict[bytes, int]:
        """Every message body of `topic` in the broker's queues, with how often it is there."""
        address = self.brokers[broker].address
        seen: dict[bytes, int] = {}
        for queue_id in range(8):
            high = self.admin.max_offset(address, topic, queue_id)
            offset = 0
            while offset < high:
                batch = self.admin.pull(address, topic, queue_id, offset, 32)
                assert batch.messages, f"{topic} queue {queue_id} has a hole at {offset}"
                for message in batch.messages:
                    seen[message.body] = seen.get(message.body, 0) + 1
                offset += len(batch.messages)
        return seen

    def commit_log_bytes(self, name: str, end: int) -> bytes:
        files = sorted((self.brokers[name].data_dir / "commitlog").iterdir())
        return b"".join(path.read_bytes() for path in files)[:end]


def _max_offset(status: dict[str, Any] | None) -> int:
    if not status:
        return -1
    if status.get("master"):
        return int(status["masterCommitLogMaxOffset"])
    return int(status["haClientRuntimeInfo"]["maxOffset"])


def sync_state_body(body: bytes) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(body)
    return document


@contextlib.contextmanager
def running_cluster(
    root: Path, *, in_namesrv: bool = False, **extra: str
) -> Iterator[ControlledCluster]:
    cluster = ControlledCluster(root, extra=extra)
    cluster.in_namesrv = in_namesrv
    try:
        cluster.start_all()
        yield cluster
    finally:
        cluster.close()
