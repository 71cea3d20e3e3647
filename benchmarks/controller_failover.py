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

import json
import random
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.failover_common import (  # noqa: E402
    Benchmark,
    JavaServers,
    Load,
    Row,
    Servers,
    argument_parser,
    audit_stored,
    free_broker_port,
    measure,
    measure_each,
    print_tables,
    seed_of,
)
from tests.conformance.reference import free_port  # noqa: E402
from tests.integration.controlled import FAST, ControlledCluster  # noqa: E402

from pocketmq.client import Admin, RocketMQError  # noqa: E402
from pocketmq.common.route import MASTER_ID  # noqa: E402
from pocketmq.testing import wait_until  # noqa: E402

BROKER_NAME = "broker-a"
HEALTH_WAIT_S = 240.0
BENCH = Benchmark(
    name="controller-failover",
    topic="ControllerFailoverBench",
    producer_group="controller-failover-bench",
    failover_wait_s=180.0,
    health_wait_s=HEALTH_WAIT_S,
    healthy_means="the group routed with a master and its SyncStateSet full",
    summary_title="controller mode, 3 brokers, SIGKILL of the master",
)
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


class Cluster(Servers, Protocol):
    """What a round needs from a controller-mode cluster, whichever system runs it."""

    def controllers(self) -> dict[str, str]:
        """Controller name -> address, for those running."""


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


class RocketCluster(JavaServers):
    """Apache RocketMQ's NameServer, three standalone controllers (`ControllerStartup`) and
    three broker JVMs in controller mode, each with its own home (its logs), store and ports."""

    def __init__(self, work: Path, flush: str) -> None:
        super().__init__(work, "pom-controller.xml")
        self.flush = flush
        self.controller_ports = {name: free_port() for name in CONTROLLERS}
        self.broker_ports = {name: free_broker_port() for name in BROKERS}

    def start_all(self) -> None:
        """The NameServer, then the three controllers together, then the three brokers
        together: a JVM's start is mostly one thread's class loading, so two cores start three
        in less time than one after another."""
        self.start_namesrv()
        for names in (CONTROLLERS, BROKERS):
            with ThreadPoolExecutor(len(names)) as pool:
                # list() raises the first start that failed, after all of them ended.
                list(pool.map(self.start, names))

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
        self.write_properties(name, settings)
        self._launch(name, main, port[name], "boot success")


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


def also_kill(admin: Admin, cluster: Cluster, number: int) -> list[str]:
    """Every third round the controller leader, killed with the master."""
    if number % CONTROLLER_KILL_EVERY != 0:
        return []
    leader = wait_until(
        lambda: controller_leader(admin, cluster),
        "a controller leader",
        timeout_s=HEALTH_WAIT_S,
        describe=cluster.logs,
    )
    return [leader]


def audit(admin: Admin, cluster: Cluster, load: Load) -> dict[str, Any]:
    """Acknowledged messages missing from the final master, and messages stored twice."""
    master = wait_until(
        lambda: healthy_master(admin, cluster),
        "the group healthy for the final read",
        timeout_s=HEALTH_WAIT_S,
        describe=cluster.logs,
    )
    return {"final_master": master, **audit_stored(admin, cluster.brokers()[master], load)}


AUDIT_ROWS: dict[str, Row] = {
    "acknowledged (SEND_OK)": lambda s: f"{s['acked']} of {s['sent']}",
    "acknowledged but lost": lambda s: str(s["acked_lost"]),
    "stored twice": lambda s: str(s["duplicates"]),
}


def main() -> None:
    parser = argument_parser(__doc__, rounds=10)
    parser.add_argument("--flush", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), default="ASYNC_FLUSH")
    parser.add_argument("--pocketmq-timing", choices=("default", "fast"), default="default")
    parser.add_argument("--keep", type=Path, default=None, help="work here, and keep it")
    args = parser.parse_args()

    def servers(system: str) -> Callable[[Path], Cluster]:
        if system == "pocketmq":
            return lambda work: PocketCluster(work, args.flush, fast=args.pocketmq_timing == "fast")
        return lambda work: RocketCluster(work, args.flush)

    seed = seed_of(args)
    # One generator per system from the same seed: both face the same fault moments.
    results = measure_each(
        args,
        seed,
        lambda system: measure(
            BENCH,
            system,
            servers(system),
            args.rounds,
            random.Random(seed),
            healthy=healthy_master,
            also_kill=also_kill,
            audit=audit,
            keep=args.keep,
        ),
    )
    print_tables(results, BENCH.summary_title, AUDIT_ROWS)
    print(json.dumps({"seed": seed, "flush": args.flush, **results}))


if __name__ == "__main__":
    main()
