"""Controller mode under a network partition: three brokers of broker-a, each in its own
network namespace, three controllers and a NameServer in the root namespace (reached through
the bridge), `allAckInSyncStateSet=true`; the master's link is cut while a producer sends.

The controllers stop hearing the master and elect a slave of the SyncStateSet. The cut-off
master acknowledges nothing sent after the cut: a probe inside its namespace sends to it all
along, and no send it made after the cut is answered SUCCESS (its slaves are gone). With
`allAckInSyncStateSet=false` (one copy enough) it acknowledges alone for a while, but never
after its controller lease ran out, which is before the controllers may judge it dead. Once the
link is back the old master learns the new epoch, steps down, cuts back what it stored alone,
and follows. At the end all three brokers hold the same bytes and, with every member's copy
needed, every acknowledged message (the producer's and the probe's) is on the new master.

Needs root and iproute2; skipped otherwise.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Admin
from pocketmq.client.admin import AdminError
from pocketmq.common.codes import ResponseCode
from pocketmq.testing import ServerProcess, free_port_pair, start_server_process, wait_until
from pocketmq.testing.plugin import print_log_if_failed
from tests.fault.netns import Host, NamespaceNetwork, NamespacesUnavailable, start_server_in
from tests.fault.test_dledger_partition import REPO_ROOT, Probe
from tests.fault.test_dledger_partition import TOPIC as PROBE_TOPIC
from tests.integration.controlled import FAST
from tests.integration.dledger import SendLoad

pytestmark = [pytest.mark.fault, pytest.mark.timeout(150)]

TOPIC = "ControlledPartition"
BROKER_PORT = 10911


class PartitionedCluster:
    def __init__(self, root: Path, network: NamespaceNetwork, *, all_ack: bool) -> None:
        self.root = root
        self.all_ack = all_ack
        self.network = network
        self.hosts: dict[str, Host] = {name: network.add_host(name) for name in ("b0", "b1", "b2")}
        self.brokers: dict[str, ServerProcess] = {}
        self.controllers: list[ServerProcess] = []
        self.namesrv: ServerProcess | None = None
        self.admin: Admin | None = None
        self.probes: list[Probe] = []

    def address(self, name: str) -> str:
        return f"{self.hosts[name].address}:{BROKER_PORT}"

    def start(self) -> None:
        gateway = self.network.gateway
        self.namesrv = start_server_process(["namesrv", "--port", "0"], self.root / "namesrv.log")
        self.admin = Admin([self.namesrv.address], timeout_s=2.0)
        ports = [free_port_pair() for _ in range(3)]
        peers = ";".join(f"c{i}-{gateway}:{port}" for i, port in enumerate(ports))
        for i in range(3):
            config = self.root / f"c{i}.conf"
            config.write_text(
                f"controllerDLegerGroup=group1\ncontrollerDLegerPeers={peers}\n"
                f"controllerDLegerSelfId=c{i}\ncontrollerStorePath={self.root / f'c{i}'}\n"
                "scanNotActiveBrokerInterval=200\n"
            )
            self.controllers.append(
                start_server_process(["controller", "-c", str(config)], self.root / f"c{i}.log")
            )
        controller_addr = ";".join(f"{gateway}:{port}" for port in ports)
        for name, host in self.hosts.items():
            settings = {
                "brokerClusterName": "DefaultCluster",
                "brokerName": "broker-a",
                "brokerId": "-1",
                "brokerIP1": host.address,
                "bindAddress": host.address,
                "listenPort": str(BROKER_PORT),
                "namesrvAddr": f"{gateway}:{self.namesrv.port}",
                "storePathRootDir": str(self.root / name),
                "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
                "flushDiskType": "SYNC_FLUSH",
                "enableControllerMode": "true",
                "controllerAddr": controller_addr,
                **FAST,
                "allAckInSyncStateSet": str(self.all_ack).lower(),
            }
            config = self.root / f"{name}.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            self.brokers[name] = start_server_in(
                host, ["broker", "-c", str(config)], self.root / f"{name}.log"
            )

    def start_probe(self, name: str) -> Probe:
        """Raw sends to broker `name` from inside its namespace (see the DLedger partition
        test's `probe_main`)."""
        output = self.root / f"probe-{name}.jsonl"
        entry = "from tests.fault.test_dledger_partition import probe_main; probe_main()"
        with output.open("wb") as out, (self.root / f"probe-{name}.log").open("wb") as err:
            process = subprocess.Popen(
                self.hosts[name].argv([sys.executable, "-c", entry, self.address(name)]),
                stdout=out,
                stderr=err,
                cwd=REPO_ROOT,
            )
        probe = Probe(process, output)
        self.probes.append(probe)
        return probe

    def status(self, name: str) -> dict[str, Any]:
        assert self.admin is not None
        try:
            document: dict[str, Any] = self.admin.ha_status(self.address(name))
        except AdminError:
            return {}
        return document

    def wait_master(self, among: list[str]) -> str:
        def single() -> str | None:
            masters = [name for name in among if self.status(name).get("master")]
            return masters[0] if len(masters) == 1 else None

        return wait_until(
            single, f"one master among {among}", timeout_s=30,
            describe=lambda: {n: self.status(n) for n in among},
        )  # fmt: skip

    def close(self) -> None:
        for probe in self.probes:
            probe.stop()
        if self.admin is not None:
            self.admin.close()
        for name, process in self.brokers.items():
            self.network.heal(self.hosts[name])
            process.stop(timeout_s=30)
        for process in self.controllers:
            process.stop(timeout_s=30)
        if self.namesrv is not None:
            self.namesrv.stop(timeout_s=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in sorted([*self.root.glob("*.log"), *self.root.glob("*.jsonl")])
        )

    def commit_log_bytes(self, name: str, end: int) -> bytes:
        files = sorted((self.root / name / "commitlog").iterdir())
        return b"".join(path.read_bytes() for path in files)[:end]


@pytest.fixture(params=[True, False], ids=["allAck", "oneCopy"])
def cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PartitionedCluster]:
    try:
        network = NamespaceNetwork()
    except NamespacesUnavailable as exc:
        pytest.skip(f"cannot create network namespaces: {exc}")
    started: PartitionedCluster | None = None
    leftovers: list[str] = []
    try:
        try:
            started = PartitionedCluster(tmp_path, network, all_ack=request.param)
        except NamespacesUnavailable as exc:
            pytest.skip(f"cannot create network namespaces: {exc}")
        started.start()
        yield started
    finally:
        try:
            if started is not None:
                started.close()
                print_log_if_failed(request, "logs of the partitioned cluster", started.logs)
        finally:
            leftovers = network.close()
    assert not leftovers, f"links or namespaces left behind: {leftovers}"


def test_a_master_cut_off_acknowledges_nothing_after_the_cut_and_rejoins_identical(
    cluster: PartitionedCluster,
) -> None:
    names = list(cluster.hosts)
    wait_until(
        lambda: len(cluster.status(cluster.wait_master(names)).get("syncStateSet", [])) == 3,
        "a SyncStateSet of three",
        timeout_s=30,
    )
    old = cluster.wait_master(names)
    assert cluster.namesrv is not None
    load = SendLoad(cluster.namesrv.address, TOPIC)
    sender = threading.Thread(target=load.run, daemon=True)
    sender.start()
    probe = cluster.start_probe(old)
    try:
        wait_until(lambda: len(load.acked) >= 50, "sends before the cut")
        wait_until(
            lambda: any(r.get("code") == ResponseCode.SUCCESS for r in probe.records("send")),
            "a probe send acknowledged before the cut",
        )
        cut_at = time.monotonic()
        cluster.network.cut(cluster.hosts[old])
        others = [n for n in names if n != old]
        new = cluster.wait_master(others)
        wait_until(lambda: load.acks_after(cut_at) >= 20, "sends on the new master")
        # Long enough for the old master's lease to run out and the probe to try it.
        wait_until(
            lambda: any(r["sent"] > cut_at + 4.0 for r in probe.records("send")),
            "probe sends well after the cut",
        )
        cluster.network.heal(cluster.hosts[old])
        wait_until(lambda: not cluster.status(old).get("master"), "the old master steps down")
        wait_until(
            lambda: len(cluster.status(new).get("syncStateSet", [])) == 3,
            "the old master back in the SyncStateSet",
            timeout_s=30,
        )
    finally:
        load.stop.set()
        sender.join(timeout=30)
        probe.stop()
    acked_probes = [r for r in probe.records("send") if r.get("code") == ResponseCode.SUCCESS]
    # With every member's copy needed, nothing sent after the cut can be acknowledged. With
    # one copy enough, the master acknowledges alone until its controller lease runs out,
    # before the controllers may judge it dead: never after the heartbeat timeout.
    fence_s = 0.0 if cluster.all_ack else int(FAST["controllerHeartBeatTimeoutMills"]) / 1000
    late = [r for r in acked_probes if r["sent"] > cut_at + fence_s]
    assert not late, f"the cut-off master acknowledged sends made after the cut: {late[:3]}"

    def same_end() -> int | None:
        ends = set()
        for name in names:
            status = cluster.status(name)
            if status.get("master"):
                ends.add(status.get("masterCommitLogMaxOffset"))
            else:
                ends.add(status.get("haClientRuntimeInfo", {}).get("maxOffset"))
        return ends.pop() if len(ends) == 1 and None not in ends else None

    end = wait_until(same_end, "the same CommitLog end on all three", timeout_s=30)
    copies = {name: cluster.commit_log_bytes(name, end) for name in names}
    assert len(set(copies.values())) == 1, "the brokers' CommitLogs differ"
    if not cluster.all_ack:
        return  # one copy was enough: what it acknowledged alone was cut back (as RocketMQ)
    assert cluster.admin is not None
    stored: set[bytes] = set()
    for topic in (TOPIC, PROBE_TOPIC):
        for queue_id in range(8):
            high = cluster.admin.max_offset(cluster.address(new), topic, queue_id)
            offset = 0
            while offset < high:
                batch = cluster.admin.pull(cluster.address(new), topic, queue_id, offset, 32)
                assert batch.messages, f"{topic} queue {queue_id} has a hole at {offset}"
                stored.update(m.body for m in batch.messages)
                offset += len(batch.messages)
    lost = [body for _, _, body, _ in load.acked if body not in stored]
    assert not lost, f"{len(lost)} acknowledged sends lost, e.g. {lost[:3]}"
    assert acked_probes, "no probe send was acknowledged before the cut"
    lost_probes = [r["body"] for r in acked_probes if r["body"].encode() not in stored]
    assert not lost_probes, f"acknowledged probe sends lost: {lost_probes}"
