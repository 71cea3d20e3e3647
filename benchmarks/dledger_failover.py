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

import json
import random
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks.failover_common import (  # noqa: E402
    Benchmark,
    JavaServers,
    Servers,
    argument_parser,
    free_broker_port,
    measure,
    measure_each,
    print_tables,
    seed_of,
)
from tests.conformance.reference import free_port  # noqa: E402
from tests.integration.dledger import BROKER_NAME, DLedgerGroup  # noqa: E402

from pocketmq.client import Admin, RocketMQError  # noqa: E402

BENCH = Benchmark(
    name="dledger-failover",
    topic="FailoverBench",
    producer_group="failover-bench",
    failover_wait_s=90.0,
    health_wait_s=180.0,
    healthy_means="the group routed with a master",
    summary_title="3 replicas, SIGKILL of the master",
    # Any answer acknowledges and only a send that raised failed, as when the figures in
    # BENCHMARKS.md were measured.
    send_ok_only=False,
)


class PocketGroup(DLedgerGroup):
    """pocketmq's group, as the DLedger integration tests run it, at its default flush."""

    def __init__(self, work: Path) -> None:
        super().__init__(work, flushDiskType="ASYNC_FLUSH")

    def brokers(self) -> dict[str, str]:
        return {name: r.address for name, r in self.replicas.items()}


class RocketGroup(JavaServers):
    """Apache RocketMQ's NameServer and three broker JVMs in DLedger mode, each replica with
    its own home (its logs), store and ports."""

    def __init__(self, work: Path) -> None:
        super().__init__(work, "pom-server.xml")
        self.ports = {f"n{i}": free_broker_port() for i in range(3)}
        self.peers = ";".join(f"{name}-127.0.0.1:{free_port()}" for name in self.ports)

    def start_all(self) -> None:
        self.start_namesrv()
        for name in self.ports:
            self.start(name)

    def brokers(self) -> dict[str, str]:
        return {name: f"127.0.0.1:{port}" for name, port in self.ports.items()}

    def start(self, name: str) -> None:
        store = self.work / name / "store"
        self.write_properties(
            name,
            {
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
            },
        )
        self._launch(
            name, "org.apache.rocketmq.broker.BrokerStartup", self.ports[name], "boot success"
        )


def healthy_master(admin: Admin, group: Servers) -> str | None:
    """The master's replica name once the NameServer routes all replicas, one as brokerId 0."""
    try:
        info = admin.cluster_info()
    except RocketMQError:
        return None
    data = info.broker_addr_table.get(BROKER_NAME)
    if data is None or 0 not in data.broker_addrs:
        return None
    addresses = group.brokers()
    if set(data.broker_addrs.values()) != set(addresses.values()):
        return None
    by_address = {address: name for name, address in addresses.items()}
    return by_address.get(data.broker_addrs[0])


def main() -> None:
    args = argument_parser(__doc__, rounds=5).parse_args()
    seed = seed_of(args)
    # One generator for both systems: the second faces the moments that follow the first's.
    rng = random.Random(seed)

    def servers(system: str) -> Callable[[Path], Servers]:
        return PocketGroup if system == "pocketmq" else RocketGroup

    results = measure_each(
        args,
        seed,
        lambda system: measure(
            BENCH, system, servers(system), args.rounds, rng, healthy=healthy_master
        ),
    )
    print_tables(results, BENCH.summary_title)
    print(json.dumps({"seed": seed, **results}))


if __name__ == "__main__":
    main()
