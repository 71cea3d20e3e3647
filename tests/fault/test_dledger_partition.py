"""A DLedger group of three broker processes, each in its own network namespace, whose master
is cut off by a network partition (its link brought down) while a producer sends.

The two replicas left elect a new master; the cut-off leader, unable to hear from a majority,
steps down by check-quorum (Ongaro's thesis §9.6) and answers a send made from inside its own
namespace with SERVICE_NOT_AVAILABLE, never SEND_OK (a send caught in flight by the cut may
also time out: its entry may yet commit or vanish); once the link is back it rejoins as a
follower. At the end every acknowledged message (the producer's and the in-namespace probe's)
is at the queue offset its receipt named on the new master, and all three replicas hold the
same CommitLog bytes.

The probe that sends to the old leader from inside its namespace is this module run as a
subprocess (`probe_main`): it prints one JSON line per send and per status read, stamped with
`time.monotonic()`, which is the same clock in every process of the machine.

Needs root and iproute2; skipped otherwise.
"""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Admin
from pocketmq.client.admin import AdminError
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess, start_server_process, wait_until
from pocketmq.testing.plugin import print_log_if_failed
from tests.fault.netns import Host, NamespaceNetwork, NamespacesUnavailable, start_server_in
from tests.integration.dledger import SendLoad, raw_send_header

log = logging.getLogger(__name__)

pytestmark = [pytest.mark.fault, pytest.mark.timeout(120)]

TOPIC = "PartitionTopic"
BROKER_NAME = "broker-a"
# Each replica has a namespace of its own, so all of them use the same ports.
BROKER_PORT = 10911
DLEDGER_PORT = 40911
ELECTION_TIMEOUT_S = 0.8
"""dLegerElectionTimeoutMs, written into every replica's config so the bounds below follow."""
STEP_DOWN_S_MAX = 2 * ELECTION_TIMEOUT_S + 3.0
"""Check-quorum runs once per election timeout and judges the one before it, so a leader cut
off just after a check learns it at the second: two timeouts, plus slack for a loaded box."""
ELECTION_S_MAX = 10.0
REJOIN_S_MAX = 20.0
PROBE_SEND_TIMEOUT_S = 3.0
PROBE_PACE_S = 0.1
PROBE_RUN_S = 60.0
"""The probe exits by itself after this even if the test never stops it."""
REPO_ROOT = Path(__file__).resolve().parents[2]


# -- the probe: runs inside the old leader's namespace ----------------------------------------
def probe_main() -> None:
    """`python -c 'from tests.fault.test_dledger_partition import probe_main; probe_main()'
    ADDRESS`: raw SEND_MESSAGE and GET_BROKER_HA_STATUS requests to the broker at ADDRESS
    until PROBE_RUN_S passes, one JSON line each on stdout."""
    asyncio.run(_probe(sys.argv[1], time.monotonic() + PROBE_RUN_S))


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


async def _probe(address: str, deadline: float) -> None:
    client = RemotingClient(connect_timeout_s=1.0)
    header = raw_send_header("partition-probe", TOPIC)

    async def sends() -> None:
        for sequence in range(int(PROBE_RUN_S / PROBE_PACE_S)):
            if time.monotonic() >= deadline:
                return
            body = f"probe-{sequence}"
            record: dict[str, Any] = {"kind": "send", "body": body, "sent": time.monotonic()}
            request = RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body.encode())
            try:
                response = await client.invoke(address, request, PROBE_SEND_TIMEOUT_S)
            except RemotingError as exc:
                record |= {"code": None, "error": f"{type(exc).__name__}: {exc}"}
            else:
                record |= {
                    "code": response.code,
                    "remark": response.remark,
                    "queueId": response.ext_fields.get("queueId"),
                    "queueOffset": response.ext_fields.get("queueOffset"),
                }
            record["answered"] = time.monotonic()
            _emit(record)
            await asyncio.sleep(PROBE_PACE_S)

    async def statuses() -> None:
        for _ in range(int(PROBE_RUN_S / PROBE_PACE_S)):
            if time.monotonic() >= deadline:
                return
            request = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
            try:
                response = await client.invoke(address, request, 1.0)
                status = json.loads(response.body or b"{}")
            except (RemotingError, ValueError):
                status = {}
            _emit(
                {
                    "kind": "status",
                    "at": time.monotonic(),
                    "master": status.get("master"),
                    "role": status.get("role"),
                    "term": status.get("term"),
                }
            )
            await asyncio.sleep(PROBE_PACE_S)

    try:
        await asyncio.gather(sends(), statuses())
    finally:
        await client.close()


@dataclass
class Probe:
    process: subprocess.Popen[bytes]
    output: Path

    def records(self, kind: str) -> list[dict[str, Any]]:
        lines = self.output.read_text(errors="replace").splitlines()
        # The last line may still be half written.
        parsed = []
        for line in lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("kind") == kind:
                parsed.append(record)
        return parsed

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


# -- the group --------------------------------------------------------------------------------
@dataclass
class Replica:
    name: str
    host: Host
    data_dir: Path
    process: ServerProcess | None = None

    @property
    def address(self) -> str:
        return f"{self.host.address}:{BROKER_PORT}"


class PartitionedGroup:
    """A NameServer in the root namespace and three DLedger replicas of broker-a, each in a
    namespace of `network` (as `tests.integration.dledger.DLedgerGroup`, over the bridge)."""

    def __init__(self, root: Path, network: NamespaceNetwork) -> None:
        self.root = root
        self.network = network
        self.replicas = {
            name: Replica(name, network.add_host(name), root / name) for name in ("n0", "n1", "n2")
        }
        self.namesrv: ServerProcess | None = None
        self.admin: Admin | None = None
        self.probes: list[Probe] = []

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.address

    def start(self) -> None:
        self.namesrv = start_server_process(["namesrv", "--port", "0"], self.root / "namesrv.log")
        self.admin = Admin([self.namesrv_addr], timeout_s=2.0)
        peers = ";".join(
            f"{r.name}-{r.host.address}:{DLEDGER_PORT}" for r in self.replicas.values()
        )
        for replica in self.replicas.values():
            settings = {
                "brokerClusterName": "DefaultCluster",
                "brokerName": BROKER_NAME,
                "brokerIP1": replica.host.address,
                "bindAddress": replica.host.address,
                "listenPort": str(BROKER_PORT),
                "namesrvAddr": f"{self.network.gateway}:{self.namesrv.port}",
                "storePathRootDir": str(replica.data_dir),
                "mappedFileSizeCommitLog": str(8 * 1024 * 1024),
                "flushDiskType": "SYNC_FLUSH",
                "enableDLegerCommitLog": "true",
                "dLegerGroup": BROKER_NAME,
                "dLegerPeers": peers,
                "dLegerSelfId": replica.name,
                "dLegerElectionTimeoutMs": str(int(ELECTION_TIMEOUT_S * 1000)),
            }
            config = self.root / f"{replica.name}.properties"
            config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
            replica.process = start_server_in(
                replica.host, ["broker", "-c", str(config)], self.root / f"{replica.name}.log"
            )

    def start_probe(self, name: str) -> Probe:
        """The probe, inside replica `name`'s namespace, aimed at its broker port."""
        replica = self.replicas[name]
        output = self.root / f"probe-{name}.jsonl"
        entry = "from tests.fault.test_dledger_partition import probe_main; probe_main()"
        with output.open("wb") as out, (self.root / f"probe-{name}.log").open("wb") as err:
            process = subprocess.Popen(
                replica.host.argv([sys.executable, "-c", entry, replica.address]),
                stdout=out,
                stderr=err,
                cwd=REPO_ROOT,
            )
        probe = Probe(process, output)
        self.probes.append(probe)
        return probe

    def close(self) -> None:
        for probe in self.probes:
            probe.stop()
        if self.admin is not None:
            self.admin.close()
        for replica in self.replicas.values():
            # Healed first, so a replica can say goodbye to its peers and the NameServer
            # rather than wait out its shutdown timeout.
            self.network.heal(replica.host)
            if replica.process is not None:
                replica.process.stop(timeout_s=30)
                replica.process = None
        if self.namesrv is not None:
            self.namesrv.stop(timeout_s=10)

    def logs(self) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
            for path in sorted([*self.root.glob("*.log"), *self.root.glob("*.jsonl")])
        )

    # -- what the replicas say, from the root namespace --------------------------------------
    def status(self, name: str) -> dict[str, Any]:
        """The replica's status, or {} when it does not answer."""
        assert self.admin is not None
        try:
            document: dict[str, Any] = self.admin.ha_status(self.replicas[name].address)
        except AdminError:
            return {}
        return document

    def wait_master(self, among: list[str], *, term_above: int = -1) -> str:
        def single_master() -> str | None:
            masters = [
                name
                for name in among
                if (s := self.status(name)).get("master") and s.get("term", -1) > term_above
            ]
            return masters[0] if len(masters) == 1 else None

        return wait_until(
            single_master,
            f"one master among {among} in a term above {term_above}",
            timeout_s=ELECTION_S_MAX,
            describe=lambda: {name: self.status(name) for name in among},
        )

    def wait_converged(self) -> int:
        """Every replica applied the same index to the same CommitLog end; returns that end."""

        def converged() -> int | None:
            statuses = [self.status(name) for name in self.replicas]
            seen = {(s.get("appliedIndex"), s.get("commitLogMaxOffset")) for s in statuses}
            caught_up = all(s and s["appliedIndex"] == s["commitIndex"] for s in statuses)
            if len(seen) == 1 and caught_up:
                end: int = statuses[0]["commitLogMaxOffset"]
                return end
            return None

        return wait_until(
            converged,
            "all three replicas applied the same entries",
            describe=lambda: {name: self.status(name) for name in self.replicas},
        )

    def commit_log_bytes(self, name: str, end: int) -> bytes:
        files = sorted((self.replicas[name].data_dir / "commitlog").iterdir())
        return b"".join(path.read_bytes() for path in files)[:end]


@pytest.fixture
def group(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PartitionedGroup]:
    try:
        network = NamespaceNetwork()
    except NamespacesUnavailable as exc:
        pytest.skip(f"cannot create network namespaces: {exc}")
    leftovers: list[str] = []
    started: PartitionedGroup | None = None
    try:
        try:
            started = PartitionedGroup(tmp_path, network)
        except NamespacesUnavailable as exc:
            pytest.skip(f"cannot create network namespaces: {exc}")
        started.start()
        yield started
    finally:
        try:
            if started is not None:
                started.close()
                print_log_if_failed(request, "logs of the partitioned group", started.logs)
        finally:
            leftovers = network.close()
    assert not leftovers, f"links or namespaces left behind: {leftovers}"


# -- the load -----------------------------------------------------------------------------------
def test_a_cut_off_master_steps_down_and_rejoins_without_losing_an_acknowledged_message(
    group: PartitionedGroup,
) -> None:
    everyone = list(group.replicas)
    old = group.wait_master(everyone)
    old_term = group.status(old)["term"]
    others = [name for name in everyone if name != old]
    load = SendLoad(group.namesrv_addr, TOPIC)
    sender = threading.Thread(target=load.run, daemon=True)
    sender.start()
    try:
        wait_until(lambda: load.acks_after(0) >= 20, "the first acknowledged sends")
        probe = group.start_probe(old)
        # The probe must be able to get SEND_OK before the cut, or its silence after proves
        # nothing.
        wait_until(
            lambda: any(r["code"] == ResponseCode.SUCCESS for r in probe.records("send")),
            "a SEND_OK to the probe before the partition",
            describe=lambda: probe.records("send")[-3:],
        )

        cut_at = time.monotonic()
        group.network.cut(group.replicas[old].host)
        new = group.wait_master(others, term_above=old_term)
        elected_s = time.monotonic() - cut_at

        def stepped_down() -> float | None:
            return next(
                (
                    r["at"]
                    for r in probe.records("status")
                    if r["at"] > cut_at and r["master"] is False and r["role"] != "leader"
                ),
                None,
            )

        stepped_down_at = wait_until(
            stepped_down,
            f"{old}, cut off, stops serving as master",
            timeout_s=STEP_DOWN_S_MAX + 2.0,
            describe=lambda: probe.records("status")[-3:],
        )
        assert stepped_down_at - cut_at <= STEP_DOWN_S_MAX, (
            f"{old} kept serving as master {stepped_down_at - cut_at:.2f} s into the partition"
        )
        wait_until(
            lambda: any(
                r["sent"] > stepped_down_at
                and r["code"] == ResponseCode.SERVICE_NOT_AVAILABLE
                and "follower" in (r["remark"] or "")
                for r in probe.records("send")
            ),
            f"{old} answers a send made after it stepped down with SERVICE_NOT_AVAILABLE",
            timeout_s=2 * PROBE_SEND_TIMEOUT_S,
            describe=lambda: probe.records("send")[-3:],
        )
        wait_until(lambda: load.acks_after(cut_at) >= 10, "sends acknowledged by the new master")
        partition_s = time.monotonic() - cut_at
        assert partition_s > ELECTION_TIMEOUT_S

        healed_at = time.monotonic()
        group.network.heal(group.replicas[old].host)
        wait_until(
            lambda: (
                (s := group.status(old)).get("role") == "follower"
                and not s.get("master")
                and s.get("leader") not in (None, old)
                and s.get("term", -1) > old_term
            ),
            f"{old} rejoins as a follower",
            timeout_s=REJOIN_S_MAX,
            describe=lambda: group.status(old),
        )
        rejoin_s = time.monotonic() - healed_at
        wait_until(lambda: load.acks_after(healed_at) >= 10, "sends acknowledged after healing")
    finally:
        load.stop.set()
        sender.join(timeout=30)
    probe.stop()
    log.warning(
        f"new master {new} {elected_s:.2f} s after the cut; {old} stepped down after "
        f"{stepped_down_at - cut_at:.2f} s; partition {partition_s:.2f} s; rejoined "
        f"{rejoin_s:.2f} s after healing; {len(load.acked)} acknowledged, "
        f"{len(load.failures)} sends failed"
    )

    sends = probe.records("send")
    # After healing the old leader may lead again and rightly acknowledge; until then it cannot
    # have heard from a majority.
    acked_while_cut_off = [
        r for r in sends if cut_at < r["sent"] < healed_at and r["code"] == ResponseCode.SUCCESS
    ]
    assert not acked_while_cut_off, f"{old} acknowledged while cut off: {acked_while_cut_off}"

    end = group.wait_converged()
    reference = group.commit_log_bytes(new, end)
    assert len(reference) == end > 0
    for name in group.replicas:
        assert group.commit_log_bytes(name, end) == reference, f"{name} differs"

    acked = [(queue_id, offset, body) for queue_id, offset, body, _ in load.acked]
    acked += [
        (int(r["queueId"]), int(r["queueOffset"]), r["body"].encode())
        for r in sends
        if r["code"] == ResponseCode.SUCCESS
    ]
    assert group.admin is not None
    address = group.replicas[new].address
    positions: dict[tuple[int, int], bytes] = {}
    for queue_id, offset, body in acked:
        assert positions.setdefault((queue_id, offset), body) == body, "two acks, one offset"
        batch = group.admin.pull(address, TOPIC, queue_id, offset, 1)
        assert batch.messages, f"nothing at {TOPIC}/{queue_id}@{offset} on {new}"
        assert batch.messages[0].queue_offset == offset
        assert batch.messages[0].body == body
