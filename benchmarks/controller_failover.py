"""Controller-mode failover, pocketmq beside Apache RocketMQ 5.5.0, measured by one client.

For each system in turn (never both at once: seven servers each, on a machine with few cores),
starts a NameServer, three controllers (one Raft group) and three brokers of broker-a in
controller mode on free loopback ports, with data in a temporary directory. A producer thread
(`pocketmq.client.Producer`, send timeout 3 s, the client's defaults otherwise) sends 1 KiB
messages numbered in their bodies one after the other without pause. Each round waits until
the group is healthy (the NameServer routes broker-a with a brokerId 0, and the controller
leader, found with CONTROLLER_GET_METADATA_INFO, answers CONTROLLER_GET_SYNC_STATE_DATA with
that broker as master and three in its SyncStateSet), lets a random 0.5-2.5 s pass and
SIGKILLs the master broker; every third round it SIGKILLs the controller leader too. It waits
for the first send another broker acknowledges, restarts what it killed and waits for health
again. Per round it records:

- failover: from the killed master's last acknowledgement to the first of its successor
  (which broker stored a message is read from its offset message id), as the client sees
  it: the controllers noticing, electing, the new master registering, the client finding
  it. Within a send the producer asks again after pauses of 50 ms doubling up to 200 ms, so
  a failover is seen only at its next look;
- failed sends: sends that raised, or were answered other than SEND_OK, between the kill and
  the end of the round;
- healthy after: from the kill until the group is healthy again (the restarted broker back in
  the SyncStateSet);
- rejoin pause: the longest gap between acknowledgements after the failover.

After the last round the load stops and every queue of the topic is read from the final
master: an acknowledged (SEND_OK) message missing there is lost, one stored twice is a
duplicate.

Settings, each side as its users run it:
- Both: the brokers as RocketMQ's `distribution/conf/controller/quick-start/broker-n0.conf`
  has them (`brokerId=-1`, `brokerRole=SLAVE`, `enableControllerMode=true`,
  `allAckInSyncStateSet=true`), plus `brokerIP1=127.0.0.1`, `autoCreateTopicEnable=true`,
  `flushDiskType` (`--flush`, ASYNC_FLUSH unless told) and `controllerAddr` naming the three
  controllers. Controllers: `controllerDLegerGroup`, `controllerDLegerPeers`,
  `controllerDLegerSelfId`, `controllerStorePath`, nothing else. The topic is created with 8
  queues on every broker that takes it before the load starts.
- RocketMQ: the timing defaults of its broker (`brokerHeartbeatInterval=1000`,
  `controllerHeartBeatTimeoutMills=10000`, `syncBrokerMetadataPeriod=5000`,
  `checkSyncStateSetPeriod=5000`, `syncControllerMetadataPeriod=10000`,
  `haMaxTimeSlaveNotCatchup=15000`, `haSendHeartbeatInterval=5000`), of its controller
  (`scanNotActiveBrokerInterval=5000`) and of DLedger 0.3.2 under the controllers (heartbeat
  every 2 s, which the controller does not expose); 64 MiB CommitLog files; the JVM flags of
  `tests/conformance/reference.py` (`SERVER_JVM`).
- pocketmq, `--pocketmq-timing default`: the same keys at the same defaults, and its
  controllers' Raft at its own (`controllerDLegerHeartBeatIntervalMs=100`,
  `controllerDLegerElectionTimeoutMs=800`); `--pocketmq-timing fast`: the timing of
  `tests/integration/controlled.py` (`FAST`, `scanNotActiveBrokerInterval=200`). 8 MiB
  CommitLog files.

RocketMQ's jars come from Maven Central through `reference.fetch_jars`
(`tests/interop/java/pom-controller.xml`; cached, the first run fetches them). Every JVM gets
its own `user.home` and `ROCKETMQ_HOME` under the work directory, so its logs
(`<name>/home/logs/rocketmqlogs`) stay there; `--keep DIR` keeps that directory. Every
process started is stopped by PID, on errors too.

`python benchmarks/controller_failover.py [--system pocketmq|rocketmq|both] [--rounds N]
[--seed S] [--flush ASYNC_FLUSH|SYNC_FLUSH] [--pocketmq-timing default|fast] [--keep DIR]`
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.dledger_failover import JavaProcess, create_topic, free_broker_port  # noqa: E402
from tests.conformance.reference import (  # noqa: E402
    JAVA_DIR,
    SERVER_JVM,
    ReferenceUnavailable,
    fetch_jars,
    free_port,
    log_tail,
    wait_until_ready,
)
from tests.integration.controlled import FAST, ControlledCluster  # noqa: E402

from pocketmq.client import Admin, Message, Producer, RocketMQError, SendStatus  # noqa: E402
from pocketmq.common.message_id import MessageIdError, decode_offset_msg_id  # noqa: E402
from pocketmq.common.route import MASTER_ID  # noqa: E402
from pocketmq.testing import wait_until  # noqa: E402

BROKER_NAME = "broker-a"
TOPIC = "ControllerFailoverBench"
SEQUENCE_DIGITS = 12
BODY_PAD = b"x" * (1024 - SEQUENCE_DIGITS)
SEND_TIMEOUT_S = 3.0
FAILOVER_WAIT_S = 180.0
HEALTH_WAIT_S = 240.0
CONTROLLER_KILL_EVERY = 3
BROKERS = ("b0", "b1", "b2")
CONTROLLERS = ("c0", "c1", "c2")


QUICK_START_ROLE = {"brokerId": "-1", "brokerRole": "SLAVE"}
"""How RocketMQ's controller-mode quick start has a broker wait for the controllers to choose
its id and role. pocketmq ignores both in controller mode but refuses a negative brokerId."""


def broker_settings(flush: str) -> dict[str, str]:
    """The keys both systems' brokers get besides ports, paths, addresses and role."""
    return {
        "brokerClusterName": "DefaultCluster",
        "brokerName": BROKER_NAME,
        "brokerIP1": "127.0.0.1",
        "enableControllerMode": "true",
        "allAckInSyncStateSet": "true",
        "autoCreateTopicEnable": "true",
        "flushDiskType": flush,
    }


class Cluster(Protocol):
    """What a round needs from a controller-mode cluster, whichever system runs it."""

    namesrv_addr: str

    def brokers(self) -> dict[str, str]:
        """Broker name -> address."""

    def controllers(self) -> dict[str, str]:
        """Controller name -> address, for those running."""

    def kill(self, name: str) -> None: ...

    def start(self, name: str) -> None: ...

    def close(self) -> None: ...

    def logs(self) -> str: ...


class PocketCluster:
    """pocketmq's cluster as the controller-mode integration tests run it, with the benchmark's
    broker keys and, unless `fast`, every timing key at its default."""

    def __init__(self, work: Path, flush: str, *, fast: bool) -> None:
        self.cluster = ControlledCluster(work, brokers=len(BROKERS))
        self.cluster.extra = {
            **broker_settings(flush),
            "brokerRole": QUICK_START_ROLE["brokerRole"],
            **(FAST if fast else {}),
        }
        self.cluster.controller_extra = {"scanNotActiveBrokerInterval": "200"} if fast else {}
        self.namesrv_addr = self.cluster.namesrv_addr

    def start_all(self) -> None:
        self.cluster.start_all()

    def brokers(self) -> dict[str, str]:
        return {name: node.address for name, node in self.cluster.brokers.items()}

    def controllers(self) -> dict[str, str]:
        return {n: c.address for n, c in self.cluster.controllers.items() if c.process is not None}

    def kill(self, name: str) -> None:
        self.cluster.kill(name)

    def start(self, name: str) -> None:
        if name in self.cluster.controllers:
            self.cluster.start_controller(name)
        else:
            self.cluster.start_broker(name)

    def close(self) -> None:
        self.cluster.close()

    def logs(self) -> str:
        return self.cluster.logs()


class RocketCluster:
    """Apache RocketMQ's NameServer, three standalone controllers (`ControllerStartup`) and
    three broker JVMs in controller mode, each with its own home (its logs), store and ports."""

    def __init__(self, work: Path, flush: str) -> None:
        self.work = work
        self.flush = flush
        self.lib = fetch_jars(JAVA_DIR / "pom-controller.xml")
        self.namesrv_port = free_port()
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.controller_ports = {name: free_port() for name in CONTROLLERS}
        self.broker_ports = {name: free_broker_port() for name in BROKERS}
        self.processes: dict[str, JavaProcess] = {}
        self.starts: dict[str, int] = {}

    def start_all(self) -> None:
        (self.work / "namesrv.properties").write_text(f"listenPort={self.namesrv_port}\n")
        self._launch(
            "namesrv", "org.apache.rocketmq.namesrv.NamesrvStartup", self.namesrv_port, None
        )
        for name in [*CONTROLLERS, *BROKERS]:
            self.start(name)

    def brokers(self) -> dict[str, str]:
        return {name: f"127.0.0.1:{port}" for name, port in self.broker_ports.items()}

    def controllers(self) -> dict[str, str]:
        return {
            name: f"127.0.0.1:{port}"
            for name, port in self.controller_ports.items()
            if name in self.processes
        }

    def start(self, name: str) -> None:
        if name in self.controller_ports:
            peers = ";".join(f"{n}-127.0.0.1:{p}" for n, p in self.controller_ports.items())
            settings = {
                "controllerDLegerGroup": "group1",
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": name,
                "controllerStorePath": str(self.work / name / "store"),
            }
            main, port = "org.apache.rocketmq.controller.ControllerStartup", self.controller_ports
        else:
            store = self.work / name / "store"
            settings = {
                **broker_settings(self.flush),
                **QUICK_START_ROLE,
                "listenPort": str(self.broker_ports[name]),
                "namesrvAddr": self.namesrv_addr,
                "controllerAddr": ";".join(
                    f"127.0.0.1:{p}" for p in self.controller_ports.values()
                ),
                "storePathRootDir": str(store),
                "storePathCommitLog": str(store / "commitlog"),
                "mappedFileSizeCommitLog": str(64 << 20),
            }
            main, port = "org.apache.rocketmq.broker.BrokerStartup", self.broker_ports
        (self.work / f"{name}.properties").write_text(
            "".join(f"{key}={value}\n" for key, value in settings.items())
        )
        self._launch(name, main, port[name], "boot success")

    def _launch(self, name: str, main: str, port: int, ready_line: str | None) -> None:
        home = self.work / name / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.starts[name] = self.starts.get(name, 0) + 1
        log = self.work / f"{name}-{self.starts[name]}.log"
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
        for name in [*BROKERS, *CONTROLLERS, "namesrv"]:
            self.kill(name)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{log_tail(path)}" for path in sorted(self.work.glob("*.log"))
        )


@dataclass
class Load:
    """A producer thread sending numbered messages without pause; which it sent, which were
    acknowledged (SEND_OK), when and by which broker, and when sends failed.

    Acknowledgement times are appended by one thread in increasing order, so they stay
    sorted and the round's questions are binary searches."""

    namesrv: str
    acked: list[float] = field(default_factory=list)
    acked_by_port: list[int] = field(default_factory=list)
    """The port of the broker that stored each acknowledged message (from its offset id)."""
    acked_sequences: set[int] = field(default_factory=set)
    sent: int = 0
    failed: list[tuple[float, float, str]] = field(default_factory=list)
    """(when it failed, how long it took, the error or the status other than SEND_OK)"""
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self) -> None:
        with Producer(
            "controller-failover-bench", namesrv=self.namesrv, send_timeout_s=SEND_TIMEOUT_S
        ) as producer:
            for sequence in itertools.count():
                if self.stop.is_set():
                    break
                body = f"{sequence:0{SEQUENCE_DIGITS}d}".encode() + BODY_PAD
                started = time.monotonic()
                self.sent = sequence + 1
                try:
                    result = producer.send(Message(TOPIC, body))
                except RocketMQError as exc:
                    self._failed(started, f"{type(exc).__name__}: {exc}")
                    continue
                if result.status != SendStatus.SEND_OK:
                    self._failed(started, str(result.status))
                    continue
                acked_at = time.monotonic()
                try:
                    port = decode_offset_msg_id(result.offset_msg_id)[0][1]
                except MessageIdError:
                    port = -1
                with self.lock:
                    self.acked.append(acked_at)
                    self.acked_by_port.append(port)
                    self.acked_sequences.add(sequence)

    def _failed(self, started: float, what: str) -> None:
        ended = time.monotonic()
        with self.lock:
            self.failed.append((ended, ended - started, what))

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


def controller_leader(admin: Admin, cluster: Cluster) -> str | None:
    """The controller leader's name, as the first running controller that knows one says."""
    by_address = {address: name for name, address in cluster.controllers().items()}
    for address in by_address:
        try:
            leader = admin.controller_metadata(address).get("controllerLeaderAddress")
        except RocketMQError:
            continue
        if leader in by_address:
            return by_address[leader]
    return None


def healthy_master(admin: Admin, cluster: Cluster) -> str | None:
    """The master's name once the NameServer routes broker-a with a brokerId 0 and the
    controller leader has that broker as master with all three in its SyncStateSet."""
    try:
        data = admin.cluster_info().broker_addr_table.get(BROKER_NAME)
    except RocketMQError:
        return None
    if data is None or MASTER_ID not in data.broker_addrs:
        return None
    routed = data.broker_addrs[MASTER_ID]
    for controller in cluster.controllers().values():
        try:
            table = admin.sync_state_data(controller, [BROKER_NAME])
        except RocketMQError:
            continue
        replicas = table.get(BROKER_NAME) or {}
        in_sync = {r.get("brokerAddress") for r in replicas.get("inSyncReplicas", [])}
        if replicas.get("masterAddress") != routed or len(in_sync) != len(BROKERS):
            return None
        by_address = {address: name for name, address in cluster.brokers().items()}
        return by_address.get(routed)
    return None


def fail_over(
    cluster: Cluster, admin: Admin, load: Load, rng: random.Random, number: int
) -> dict[str, Any]:
    """One round: the master (and every third round the controller leader) killed at a random
    moment, restarted once a successor serves."""
    master = wait_until(
        lambda: healthy_master(admin, cluster),
        "the group healthy before the fault",
        timeout_s=HEALTH_WAIT_S,
        describe=cluster.logs,
    )
    killed = [master]
    if number % CONTROLLER_KILL_EVERY == 0:
        leader = wait_until(
            lambda: controller_leader(admin, cluster),
            "a controller leader",
            timeout_s=HEALTH_WAIT_S,
            describe=cluster.logs,
        )
        killed.append(leader)
    killed_port = int(cluster.brokers()[master].rpartition(":")[2])
    time.sleep(rng.uniform(0.5, 2.5))  # the fault's moment: random, by design
    fault_at = time.monotonic()
    for name in killed:
        cluster.kill(name)
    last, first = wait_until(
        lambda: load.failover(fault_at, killed_port),
        "an acknowledged send by a new master",
        timeout_s=FAILOVER_WAIT_S,
        describe=cluster.logs,
    )
    # Restarted only after the failover, so that a process booting does not take the CPU
    # the election needs; the controller first, as a broker registers with it.
    for name in reversed(killed):
        cluster.start(name)
    wait_until(
        lambda: healthy_master(admin, cluster),
        "the group healthy after the restart",
        timeout_s=HEALTH_WAIT_S,
        describe=cluster.logs,
    )
    healthy_at = time.monotonic()
    failures = load.failures_between(fault_at, healthy_at)
    return {
        "round": number,
        "killed": "+".join(killed),
        "failover_s": round(first - last, 3),
        "failed_sends": len(failures),
        "failed_sends_after_failover": len(load.failures_between(first, healthy_at)),
        "healthy_after_s": round(healthy_at - fault_at, 3),
        "rejoin_pause_s": round(load.longest_gap(first, healthy_at), 3),
        "failed_send_took_s_max": round(max((took for took, _ in failures), default=0.0), 3),
        "first_failure": failures[0][1] if failures else None,
    }


def stored_sequences(admin: Admin, address: str) -> Counter[int]:
    """How often each numbered message is stored in the topic's queues on `address`."""
    route = admin.topic_route(TOPIC)
    queues = max(q.read_queue_nums for q in route.queue_datas)
    found: Counter[int] = Counter()
    for queue_id in range(queues):
        position = admin.min_offset(address, TOPIC, queue_id)
        end = admin.max_offset(address, TOPIC, queue_id)
        for _ in range(end - position + 8):  # every pull advances, or the queue ends
            if position >= end:
                break
            batch = admin.pull(address, TOPIC, queue_id, position, 32)
            found.update(int(m.body[:SEQUENCE_DIGITS]) for m in batch.messages)
            if batch.next_begin_offset <= position:
                break
            position = batch.next_begin_offset
    return found


def audit(admin: Admin, cluster: Cluster, load: Load) -> dict[str, Any]:
    """Acknowledged messages missing from the final master, and messages stored twice."""
    master = wait_until(
        lambda: healthy_master(admin, cluster),
        "the group healthy for the final read",
        timeout_s=HEALTH_WAIT_S,
        describe=cluster.logs,
    )
    address = cluster.brokers()[master]
    found = stored_sequences(admin, address)
    with load.lock:
        acked = set(load.acked_sequences)
    return {
        "final_master": master,
        "sent": load.sent,
        "acked": len(acked),
        "stored": sum(found.values()),
        "acked_lost": len(acked - found.keys()),
        "duplicates": sum(count - 1 for count in found.values() if count > 1),
        "stored_unacked": len(found.keys() - acked),
    }


def run_rounds(
    cluster: Cluster, rounds: int, rng: random.Random, system: str
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    results: list[dict[str, Any]] = []
    with Admin([cluster.namesrv_addr], timeout_s=3.0) as admin:
        wait_until(
            lambda: healthy_master(admin, cluster),
            "the group routed with a master and its SyncStateSet full",
            timeout_s=HEALTH_WAIT_S,
            describe=cluster.logs,
        )
        create_topic(admin, cluster.brokers())
        load = Load(cluster.namesrv_addr)
        sender = threading.Thread(target=load.run, name="failover-load", daemon=True)
        sender.start()
        try:
            wait_until(lambda: len(load.acked) >= 100, "the first sends", timeout_s=60)
            for number in range(1, rounds + 1):
                result = fail_over(cluster, admin, load, rng, number)
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
        return results, audit(admin, cluster, load)


@contextlib.contextmanager
def work_dir(system: str, keep: Path | None) -> Iterator[Path]:
    if keep is None:
        with tempfile.TemporaryDirectory(prefix=f"controller-failover-{system}-") as tmp:
            yield Path(tmp)
    else:
        path = keep / system
        path.mkdir(parents=True, exist_ok=False)
        yield path


def measure(
    system: str, rounds: int, rng: random.Random, flush: str, fast: bool, keep: Path | None
) -> dict[str, Any]:
    with work_dir(system, keep) as work:
        cluster: PocketCluster | RocketCluster
        if system == "pocketmq":
            cluster = PocketCluster(work, flush, fast=fast)
        else:
            cluster = RocketCluster(work, flush)
        try:
            cluster.start_all()
            per_round, audited = run_rounds(cluster, rounds, rng, system)
        finally:
            cluster.close()
    failovers = [r["failover_s"] for r in per_round]
    return {
        "rounds": per_round,
        "failover_s_median": statistics.median(failovers),
        "failover_s_worst": max(failovers),
        "failed_sends": sum(r["failed_sends"] for r in per_round),
        "rounds_with_failed_sends": sum(1 for r in per_round if r["failed_sends"]),
        "healthy_after_s_median": statistics.median(r["healthy_after_s"] for r in per_round),
        "rejoin_pause_s_worst": max(r["rejoin_pause_s"] for r in per_round),
        **audited,
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
    print(f"\n| controller mode, 3 brokers, SIGKILL of the master | {' | '.join(systems)} |")
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
        "acknowledged (SEND_OK)": lambda s: f"{s['acked']} of {s['sent']}",
        "acknowledged but lost": lambda s: str(s["acked_lost"]),
        "stored twice": lambda s: str(s["duplicates"]),
    }
    for name, render in rows.items():
        print(f"| {name} | {' | '.join(render(results[s]) for s in systems)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=("pocketmq", "rocketmq", "both"), default="both")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None, help="for the faults' moments")
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--pocketmq-timing", choices=("default", "fast"), default="default")
    parser.add_argument("--keep", type=Path, default=None, help="work here, and keep it")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    systems = ["pocketmq", "rocketmq"] if args.system == "both" else [args.system]
    results: dict[str, dict[str, Any]] = {}
    for system in systems:
        print(f"{system}: {args.rounds} rounds (seed {seed}) ...", file=sys.stderr, flush=True)
        try:
            # One generator per system from the same seed: both face the same fault moments.
            results[system] = measure(
                system,
                args.rounds,
                random.Random(seed),
                args.flush,
                args.pocketmq_timing == "fast",
                args.keep,
            )
        except ReferenceUnavailable as exc:
            print(f"{system}: could not run: {exc}", file=sys.stderr)
    print_tables(results)
    print(json.dumps({"seed": seed, "flush": args.flush, **results}))


if __name__ == "__main__":
    main()
