"""DLedger failover time, pocketmq beside Apache RocketMQ 5.5.0, measured by one client.

For each system in turn (never both at once: three brokers and a NameServer each, on a
machine with few cores), starts a NameServer and a 3-replica DLedger group of broker-a on
free loopback ports with data in a temporary directory. A producer thread
(`pocketmq.client.Producer`, send timeout 3 s, the client's defaults otherwise) sends 1 KiB
messages one after the other without pause. Each round waits until the group is healthy
(the NameServer routes broker-a's three replicas, one as brokerId 0), lets a random 0.5-2.5 s
pass, SIGKILLs the replica that is brokerId 0, waits for the first send another replica
acknowledges, restarts the killed replica and waits for health again. Per round it records:

- failover: from the killed master's last acknowledgement to the first of its successor
  (which broker stored a message is read from its offset message id), as the client sees
  it: election, the new master registering, the client finding it. Within a send the
  producer asks again after pauses of 50 ms doubling up to 200 ms, so a failover is seen
  only at its next look (0.35, 0.55, 0.75, ... s after the first failed attempt);
- failed sends: sends that raised between the kill and the end of the round. A failover
  shorter than the send timeout costs only a delay; in a longer one each send waits for a
  master for its whole 3 s, then fails;
- healthy after: from the kill until the NameServer routes all three replicas again;
- rejoin pause: the longest gap between acknowledgements after the failover, while the
  killed replica restarts and rejoins.

Settings, each side as its users run it unless the DLedger keys need otherwise:
- pocketmq: its defaults (`dLegerHeartBeatIntervalMs=100`, `dLegerElectionTimeoutMs=800`,
  ASYNC_FLUSH: the Raft log is not fsynced per append), 8 MiB CommitLog files.
- RocketMQ: the defaults of its broker and of DLedger 0.3.2, which the broker does not expose
  (heartbeat every 2 s, a leader given up after 3 missed heartbeats, votes 300-1000 ms apart;
  the DLedger store flushes every 10 ms, not per append), 64 MiB CommitLog files, the JVM
  flags of `tests/conformance/reference.py` (`SERVER_JVM`: 256-512 MiB heap, serial GC, C1).
Both: `brokerIP1=127.0.0.1`, `autoCreateTopicEnable=true`; the topic is created with 8 queues
on every replica that takes it before the load starts.

RocketMQ's jars come from Maven Central through `reference.fetch_jars` (cached; the first run
fetches them). Every process started is stopped by PID, on errors too.

`python benchmarks/dledger_failover.py [--system pocketmq|rocketmq|both] [--rounds N] [--seed S]`
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.conformance.reference import (  # noqa: E402
    JAVA_DIR,
    SERVER_JVM,
    ReferenceUnavailable,
    fetch_jars,
    free_port,
    log_tail,
    wait_until_ready,
)
from tests.integration.dledger import BROKER_NAME, DLedgerGroup  # noqa: E402

from pocketmq.client import Admin, Message, Producer, RocketMQError  # noqa: E402
from pocketmq.client.admin import AdminError, TopicSettings  # noqa: E402
from pocketmq.common.message_id import MessageIdError, decode_offset_msg_id  # noqa: E402
from pocketmq.testing import wait_until  # noqa: E402

TOPIC = "FailoverBench"
BODY = b"x" * 1024
SEND_TIMEOUT_S = 3.0
FAILOVER_WAIT_S = 90.0
HEALTH_WAIT_S = 180.0


class Group(Protocol):
    """What a round needs from a DLedger group, whichever system runs it."""

    namesrv_addr: str

    def addresses(self) -> dict[str, str]:
        """Replica name -> broker address, for every replica."""

    def kill(self, name: str) -> None: ...

    def start(self, name: str) -> None: ...

    def close(self) -> None: ...

    def logs(self) -> str: ...


class PocketGroup:
    """pocketmq's group, as the DLedger integration tests run it, at its default flush."""

    def __init__(self, work: Path) -> None:
        self.group = DLedgerGroup(work, flushDiskType="ASYNC_FLUSH")
        self.namesrv_addr = self.group.namesrv_addr

    def start_all(self) -> None:
        self.group.start_all()

    def addresses(self) -> dict[str, str]:
        return {name: r.address for name, r in self.group.replicas.items()}

    def kill(self, name: str) -> None:
        self.group.kill(name)

    def start(self, name: str) -> None:
        self.group.start(name)

    def close(self) -> None:
        self.group.close()

    def logs(self) -> str:
        return self.group.logs()


def free_broker_port() -> int:
    """A port p with p-2 .. p+1 free: RocketMQ's broker also listens on p-2 (its "fast"
    channel) and reserves p+1 for HA."""
    for _ in range(100):
        port = free_port()
        if port < 1026:
            continue
        probes = [socket.socket() for _ in range(4)]
        try:
            for offset, probe in zip((-2, -1, 0, 1), probes, strict=True):
                probe.bind(("127.0.0.1", port + offset))
        except OSError:
            continue
        finally:
            for probe in probes:
                probe.close()
        return port
    raise RuntimeError("no four adjacent free ports on 127.0.0.1")


@dataclass
class JavaProcess:
    process: subprocess.Popen[bytes]
    log: Path


class RocketGroup:
    """Apache RocketMQ's NameServer and three broker JVMs in DLedger mode, each replica with
    its own home (its logs), store and ports."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.lib = fetch_jars(JAVA_DIR / "pom-server.xml")
        self.namesrv_port = free_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.ports = {f"n{i}": free_broker_port() for i in range(3)}
        self.peers = ";".join(f"{name}-127.0.0.1:{free_port()}" for name in self.ports)
        self.processes: dict[str, JavaProcess] = {}
        self.starts: dict[str, int] = dict.fromkeys(self.ports, 0)

    def start_all(self) -> None:
        (self.work / "namesrv.properties").write_text(f"listenPort={self.namesrv_port}\n")
        self._launch(
            "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", self.namesrv_port, None
        )
        for name in self.ports:
            self.start(name)

    def addresses(self) -> dict[str, str]:
        return {name: f"127.0.0.1:{port}" for name, port in self.ports.items()}

    def start(self, name: str) -> None:
        store = self.work / name / "store"
        settings = {
            "brokerClusterName": "DefaultCluster",
            "brokerName": BROKER_NAME,
            "brokerIP1": "127.0.0.1",
            "listenPort": str(self.ports[name]),
            "namesrvAddr": self.namesrv_addr,
            "storePathRootDir": str(store),
            "storePathCommitLog": str(store / "commitlog"),
            "mappedFileSizeCommitLog": str(64 << 20),
            "autoCreateTopicEnable": "true",
            "enableDLegerCommitLog": "true",
            "dLegerGroup": BROKER_NAME,
            "dLegerPeers": self.peers,
            "dLegerSelfId": name,
        }
        (self.work / f"{name}.properties").write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items())
        )
        self.starts[name] += 1
        self._launch(
            name, "org.apache.rocketmq.broker.BrokerStartup", self.ports[name], "boot success"
        )

    def _launch(self, name: str, main: str, port: int, ready_line: str | None) -> None:
        home = self.work / name / "home"
        home.mkdir(parents=True, exist_ok=True)
        log = self.work / f"{name}-{self.starts.get(name, 1)}.log"
        command = [
            "java",
            *SERVER_JVM,
            f"-Duser.home={home}",
            "-cp",
            f"{self.lib}/*",
            main,
            "-c",
            str(self.work / f"{name}.properties"),
        ]
        env = dict(os.environ, ROCKETMQ_HOME=str(home))
        with log.open("wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self.processes[name] = JavaProcess(process, log)
        wait_until_ready(port, process, log, ready_line)

    def kill(self, name: str) -> None:
        running = self.processes.pop(name, None)
        if running is None:
            return
        if running.process.poll() is None:
            running.process.kill()
        running.process.wait(30)

    def close(self) -> None:
        """Kills every JVM: the stores are throwaways, and an orderly shutdown takes 15 s."""
        for name in [*self.ports, "namesrv"]:
            self.kill(name)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{log_tail(path)}" for path in sorted(self.work.glob("*.log"))
        )


@dataclass
class Load:
    """A producer thread sending without pause; when sends were acknowledged, by which
    broker, and when they failed.

    Acknowledgement times are appended by one thread in increasing order, so they stay
    sorted and the round's questions are binary searches."""

    namesrv: str
    acked: list[float] = field(default_factory=list)
    acked_by_port: list[int] = field(default_factory=list)
    """The port of the broker that stored each acknowledged message (from its offset id)."""
    failed: list[tuple[float, float, str]] = field(default_factory=list)
    """(when it failed, how long it took, the error)"""
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        with Producer(
            "failover-bench", namesrv=self.namesrv, send_timeout_s=SEND_TIMEOUT_S
        ) as producer:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    result = producer.send(Message(TOPIC, BODY))
                except RocketMQError as exc:
                    ended = time.monotonic()
                    with self.lock:
                        self.failed.append((ended, ended - started, f"{type(exc).__name__}: {exc}"))
                    continue
                acked_at = time.monotonic()
                try:
                    port = decode_offset_msg_id(result.offset_msg_id)[0][1]
                except MessageIdError:
                    port = -1
                with self.lock:
                    self.acked.append(acked_at)
                    self.acked_by_port.append(port)

    def failover(self, fault_at: float, killed_port: int) -> tuple[float, float] | None:
        """(the killed master's last acknowledgement, its successor's first), once there is
        one. Not simply the first after the kill: answers the killed master wrote before it
        died can still arrive after the signal."""
        with self.lock:
            index = bisect.bisect_right(self.acked, fault_at)
            while index < len(self.acked) and self.acked_by_port[index] == killed_port:
                index += 1
            if index == len(self.acked) or index == 0:
                return None
            return self.acked[index - 1], self.acked[index]

    def longest_gap(self, start: float, end: float) -> float:
        with self.lock:
            times = self.acked[
                bisect.bisect_left(self.acked, start) : bisect.bisect_right(self.acked, end)
            ]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def failures_between(self, start: float, end: float) -> list[tuple[float, str]]:
        """(how long the send took, the error) of each send that failed in the interval."""
        with self.lock:
            return [(took, what) for moment, took, what in self.failed if start < moment <= end]


def healthy_master(admin: Admin, addresses: dict[str, str]) -> str | None:
    """The master's replica name once the NameServer routes all replicas, one as brokerId 0."""
    try:
        info = admin.cluster_info()
    except RocketMQError:
        return None
    data = info.broker_addr_table.get(BROKER_NAME)
    if data is None or 0 not in data.broker_addrs:
        return None
    if set(data.broker_addrs.values()) != set(addresses.values()):
        return None
    by_address = {address: name for name, address in addresses.items()}
    return by_address.get(data.broker_addrs[0])


def create_topic(admin: Admin, addresses: dict[str, str]) -> None:
    """On every replica that takes it: a RocketMQ follower keeps a topic a master created
    only after its next metadata sync (10 s), a pocketmq follower refuses and gets it from
    the Raft log."""
    took = []
    for address in addresses.values():
        try:
            admin.create_topic(TopicSettings(TOPIC), broker=address)
        except AdminError:
            continue
        took.append(address)
    if not took:
        raise RuntimeError(f"no replica created topic {TOPIC}")


def fail_over(
    group: Group, admin: Admin, load: Load, rng: random.Random, number: int
) -> dict[str, Any]:
    """One round: the master killed at a random moment, restarted once a successor serves."""
    addresses = group.addresses()
    master = wait_until(
        lambda: healthy_master(admin, addresses),
        "the group healthy before the fault",
        timeout_s=HEALTH_WAIT_S,
        describe=group.logs,
    )
    time.sleep(rng.uniform(0.5, 2.5))  # the fault's moment: random, by design
    fault_at = time.monotonic()
    group.kill(master)
    killed_port = int(addresses[master].rpartition(":")[2])
    last, first = wait_until(
        lambda: load.failover(fault_at, killed_port),
        "an acknowledged send by a new master",
        timeout_s=FAILOVER_WAIT_S,
        describe=group.logs,
    )
    # Restarted only after the failover, so that a JVM booting does not take the CPU the
    # election needs.
    group.start(master)
    wait_until(
        lambda: healthy_master(admin, addresses),
        "the group healthy after the restart",
        timeout_s=HEALTH_WAIT_S,
        describe=group.logs,
    )
    healthy_at = time.monotonic()
    failures = load.failures_between(fault_at, healthy_at)
    return {
        "round": number,
        "killed": master,
        "failover_s": round(first - last, 3),
        "failed_sends": len(failures),
        "failed_sends_after_failover": len(load.failures_between(first, healthy_at)),
        "healthy_after_s": round(healthy_at - fault_at, 3),
        "rejoin_pause_s": round(load.longest_gap(first, healthy_at), 3),
        "failed_send_took_s_max": round(max((took for took, _ in failures), default=0.0), 3),
        "first_failure": failures[0][1] if failures else None,
    }


def run_rounds(group: Group, rounds: int, rng: random.Random, system: str) -> list[dict[str, Any]]:
    addresses = group.addresses()
    results: list[dict[str, Any]] = []
    with Admin([group.namesrv_addr], timeout_s=3.0) as admin:
        wait_until(
            lambda: healthy_master(admin, addresses),
            "the group routed with a master",
            timeout_s=HEALTH_WAIT_S,
            describe=group.logs,
        )
        create_topic(admin, addresses)
        load = Load(group.namesrv_addr)
        sender = threading.Thread(target=load.run, name="failover-load", daemon=True)
        sender.start()
        try:
            wait_until(lambda: len(load.acked) >= 100, "the first sends", timeout_s=60)
            for number in range(1, rounds + 1):
                result = fail_over(group, admin, load, rng, number)
                results.append(result)
                print(
                    f"{system} round {number}: killed {result['killed']}, failover "
                    f"{result['failover_s']:.2f} s, {result['failed_sends']} failed sends, "
                    f"healthy after {result['healthy_after_s']:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            load.stop.set()
            sender.join(timeout=SEND_TIMEOUT_S + 30)
    return results


def measure(system: str, rounds: int, rng: random.Random) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"dledger-failover-{system}-") as tmp:
        work = Path(tmp)
        group: PocketGroup | RocketGroup
        group = PocketGroup(work) if system == "pocketmq" else RocketGroup(work)
        try:
            group.start_all()
            per_round = run_rounds(group, rounds, rng, system)
        finally:
            group.close()
    failovers = [r["failover_s"] for r in per_round]
    return {
        "rounds": per_round,
        "failover_s_median": statistics.median(failovers),
        "failover_s_worst": max(failovers),
        "failed_sends": sum(r["failed_sends"] for r in per_round),
        "rounds_with_failed_sends": sum(1 for r in per_round if r["failed_sends"]),
        "healthy_after_s_median": statistics.median(r["healthy_after_s"] for r in per_round),
        "rejoin_pause_s_worst": max(r["rejoin_pause_s"] for r in per_round),
    }


def print_tables(results: dict[str, dict[str, Any]]) -> None:
    print("| system | round | killed | failover s | failed sends | healthy after s | "
          "rejoin pause s |")  # fmt: skip
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for system, summary in results.items():
        for r in summary["rounds"]:
            print(
                f"| {system} | {r['round']} | {r['killed']} | {r['failover_s']:.2f} | "
                f"{r['failed_sends']} | {r['healthy_after_s']:.1f} | {r['rejoin_pause_s']:.2f} |"
            )
    systems = list(results)
    print(f"\n| 3 replicas, SIGKILL of the master | {' | '.join(systems)} |")
    print(f"| --- |{' ---: |' * len(systems)}")

    rows: dict[str, Callable[[dict[str, Any]], str]] = {
        "failover median / worst": lambda s: (
            f"{s['failover_s_median']:.2f} s / {s['failover_s_worst']:.2f} s"
        ),
        "rounds with a failed send (sends)": lambda s: (
            f"{s['rounds_with_failed_sends']} of {len(s['rounds'])} ({s['failed_sends']})"
        ),
        "healthy again after (median)": lambda s: f"{s['healthy_after_s_median']:.1f} s",
        "longest pause while the old master rejoins": lambda s: (
            f"{s['rejoin_pause_s_worst']:.2f} s"
        ),
    }
    for name, render in rows.items():
        print(f"| {name} | {' | '.join(render(results[s]) for s in systems)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("pocketmq", "rocketmq", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None, help="for the faults' moments")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    rng = random.Random(seed)
    systems = ["pocketmq", "rocketmq"] if args.system == "both" else [args.system]
    results: dict[str, dict[str, Any]] = {}
    for system in systems:
        print(f"{system}: {args.rounds} rounds (seed {seed}) ...", file=sys.stderr, flush=True)
        try:
            results[system] = measure(system, args.rounds, rng)
        except ReferenceUnavailable as exc:
            print(f"{system}: could not run: {exc}", file=sys.stderr)
    print_tables(results)
    print(json.dumps({"seed": seed, **results}))


if __name__ == "__main__":
    main()
