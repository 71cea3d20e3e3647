"""A DLedger broker group as real processes on loopback: a NameServer and N replicas of
broker-a, each its own broker port, DLedger port and data directory; replicas are killed
(SIGKILL), paused (SIGSTOP) and restarted by name, and compared byte for byte."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.client import Admin, Message, Producer, RocketMQError, SendStatus
from pocketmq.client.admin import AdminError
from pocketmq.common.message_id import decode_offset_msg_id
from pocketmq.testing import ServerProcess, free_port_pair, start_server_process

BROKER_NAME = "broker-a"
FILE_SIZE = 8 * 1024 * 1024


@dataclass
class Replica:
    name: str
    port: int
    dledger_port: int
    data_dir: Path
    process: ServerProcess | None = None
    paused: bool = False
    starts: int = 0
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


class DLedgerGroup:
    def __init__(self, root: Path, replicas: int = 3, **extra: str) -> None:
        self.root = root
        self.namesrv = start_server_process(["namesrv", "--port", "0"], root / "namesrv.log")
        self.replicas: dict[str, Replica] = {}
        for i in range(replicas):
            name = f"n{i}"
            self.replicas[name] = Replica(name, free_port_pair(), free_port_pair(), root / name)
        self.peers = ";".join(
            f"{r.name}-127.0.0.1:{r.dledger_port}" for r in self.replicas.values()
        )
        self.extra = {"flushDiskType": "SYNC_FLUSH", **extra}
        self.admin = Admin([self.namesrv_addr], timeout_s=3.0)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.address

    def properties(self, replica: Replica) -> str:
        settings = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": BROKER_NAME,
            "brokerIP1": "127.0.0.1",
            "listenPort": str(replica.port),
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(replica.data_dir),
            "mappedFileSizeCommitLog": str(FILE_SIZE),
            "enableDLegerCommitLog": "true",
            "dLegerGroup": BROKER_NAME,
            "dLegerPeers": self.peers,
            "dLegerSelfId": replica.name,
            **self.extra,
            **replica.extra,
        }
        return "".join(f"{k}={v}\n" for k, v in settings.items())

    # -- processes ---------------------------------------------------------------------------
    def start(self, name: str) -> Replica:
        replica = self.replicas[name]
        replica.starts += 1
        config = self.root / f"{name}.properties"
        config.write_text(self.properties(replica))
        replica.process = start_server_process(
            ["broker", "-c", str(config)], self.root / f"{name}-{replica.starts}.log"
        )
        replica.paused = False
        return replica

    def start_all(self) -> None:
        for name in self.replicas:
            self.start(name)

    def kill(self, name: str) -> None:
        replica = self.replicas[name]
        if replica.process is not None:
            if replica.paused:
                os.kill(replica.process.process.pid, signal.SIGCONT)
            replica.process.kill()
            replica.process = None
            replica.paused = False

    def pause(self, name: str) -> None:
        replica = self.replicas[name]
        assert replica.process is not None
        os.kill(replica.process.process.pid, signal.SIGSTOP)
        replica.paused = True

    def resume(self, name: str) -> None:
        replica = self.replicas[name]
        assert replica.process is not None
        os.kill(replica.process.process.pid, signal.SIGCONT)
        replica.paused = False

    def running(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.process is not None and not r.paused]

    def close(self) -> None:
        self.admin.close()
        for name, replica in self.replicas.items():
            if replica.paused:
                self.resume(name)
            if replica.process is not None:
                replica.process.stop(timeout_s=30)
                replica.process = None
        self.namesrv.stop(timeout_s=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in sorted(self.root.glob("*.log"))
        )

    # -- what the replicas say ---------------------------------------------------------------
    def status(self, name: str) -> dict[str, Any] | None:
        try:
            document: dict[str, Any] = self.admin.ha_status(self.replicas[name].address)
        except AdminError:
            return None
        return document

    def wait_master(self, timeout_s: float = 20.0, *, other_than: str | None = None) -> str:
        """The replica serving as master, once exactly one running replica does."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            masters = [
                r.name
                for r in self.running()
                if r.name != other_than and (self.status(r.name) or {}).get("master")
            ]
            if len(masters) == 1:
                return masters[0]
            time.sleep(0.05)
        raise AssertionError(f"no single master within {timeout_s} s\n{self.logs()}")

    def wait_converged(self, timeout_s: float = 30.0) -> int:
        """Waits until every running replica applied the same index with the same CommitLog
        end; returns that end."""
        deadline = time.monotonic() + timeout_s
        seen: list[tuple[int, int]] = []
        while time.monotonic() < deadline:
            statuses = [self.status(r.name) for r in self.running()]
            seen = [
                (s["appliedIndex"], s["commitLogMaxOffset"]) if s else (-1, -1) for s in statuses
            ]
            if len(set(seen)) == 1 and seen[0][0] >= 0:
                statuses_ok = all(s and s["appliedIndex"] == s["commitIndex"] for s in statuses)
                if statuses_ok:
                    return seen[0][1]
            time.sleep(0.1)
        raise AssertionError(f"replicas did not converge within {timeout_s} s: {seen}")

    def commit_log_bytes(self, name: str, end: int) -> bytes:
        """The replica's CommitLog from offset 0 to `end`, read from its files."""
        files = sorted((self.replicas[name].data_dir / "commitlog").iterdir())
        data = b"".join(path.read_bytes() for path in files)
        return data[:end]


def raw_send_header(producer_group: str, topic: str) -> dict[str, str]:
    """A SEND_MESSAGE header as a producer writes it, for requests sent to one replica."""
    return {
        "producerGroup": producer_group,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": "0",
        "flag": "0",
        "properties": "",
        "reconsumeTimes": "0",
        "unitMode": "false",
    }


@contextlib.contextmanager
def running_group(root: Path, **extra: str) -> Iterator[DLedgerGroup]:
    """A started group of three, closed (every process stopped) on the way out."""
    group = DLedgerGroup(root)
    group.extra.update(extra)
    try:
        group.start_all()
        yield group
    finally:
        group.close()


@dataclass
class SendLoad:
    """A producer thread sending to `topic` without pause: what was acknowledged (SEND_OK),
    where (queue id, queue offset) and when (`time.monotonic()`), and what failed."""

    namesrv: str
    topic: str
    acked: list[tuple[int, int, bytes, float]] = field(default_factory=list)
    stored: list[tuple[str, int, bytes]] = field(default_factory=list)
    """Each acknowledged message's store host and CommitLog offset (from its offset id)."""
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        with Producer("load-producer", namesrv=self.namesrv, send_timeout_s=5) as producer:
            sequence = 0
            while not self.stop.is_set():
                body = f"m-{sequence}".encode()
                sequence += 1
                try:
                    result = producer.send(Message(self.topic, body))
                except RocketMQError as exc:
                    with self.lock:
                        self.failures.append(str(exc))
                    continue
                if result.status is not SendStatus.SEND_OK:
                    # Stored but not acknowledged as asked (a replica missing): no promise.
                    with self.lock:
                        self.failures.append(result.status.value)
                    continue
                (host, port), offset = decode_offset_msg_id(result.offset_msg_id)
                with self.lock:
                    self.acked.append(
                        (result.queue.queue_id, result.queue_offset, body, time.monotonic())
                    )
                    self.stored.append((f"{host}:{port}", offset, body))

    def last_ack_before(self, moment: float) -> float:
        with self.lock:
            return max((t for *_, t in self.acked if t <= moment), default=moment)

    def first_ack_after(self, moment: float) -> float | None:
        with self.lock:
            return min((t for *_, t in self.acked if t > moment), default=None)

    def acks_after(self, moment: float) -> int:
        with self.lock:
            return sum(1 for *_, at in self.acked if at > moment)
