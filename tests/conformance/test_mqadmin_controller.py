"""The real mqadmin (`rocketmq-tools` 5.5.0) against pocketmq's controllers and its
BrokerContainer: the controller commands an operator types (`getControllerMetaData`,
`getSyncStateSet`, `getBrokerEpoch`, `getControllerConfig`, `updateControllerConfig`,
`electMaster`, `cleanBrokerMetadata`) must succeed or refuse as mqadmin shows them and print
the cluster's real values; `addBroker` / `removeBroker` must change what a container runs. The
same controller commands run against Apache RocketMQ 5.5.0's controllers and brokers, and the
two transcripts, reduced as `tests/conformance/mqadmin.py` reduces them (and with `_MASKS`),
must agree but where mqadmin fails against Apache RocketMQ itself (`REFERENCE_FAILS`).

Each command runs in a JVM of its own (`MQAdminStartup`, as the `mqadmin` script runs it,
through `reference.mqadmin_java`): `AdminBatch` would first need a producer and a consumer,
which these commands do not.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from benchmarks.controller_failover import RocketCluster, healthy_master

from pocketmq.client import Admin
from pocketmq.common.codes import RequestCode
from pocketmq.testing import ServerProcess, free_port_pair, start_server_process, wait_until
from tests.conformance.mqadmin import normalise, outcome
from tests.conformance.reference import ReferenceUnavailable, mqadmin_java
from tests.integration.controlled import FAST, running_cluster

pytestmark = pytest.mark.conformance

BROKER = "broker-a"
CLUSTER = "DefaultCluster"
MQADMIN_TIMEOUT_S = 60

COMMANDS: list[str] = [
    "getControllerMetaData -a {c0}",
    "getSyncStateSet -a {c0} -b broker-a",
    "getBrokerEpoch -n {ns} -b broker-a",
    "getControllerConfig -a {controllers}",
    "updateControllerConfig -a {controllers} -k scanNotActiveBrokerInterval -v 300",
    "electMaster -a {c0} -c DefaultCluster -bn broker-a -b {slave}",
    # The old master still lives, and without -l both servers refuse to forget a living broker.
    "cleanBrokerMetadata -a {c0} -bn broker-a -b {old_master} -c DefaultCluster",
]
"""The controller command lines, in the order they run; {slave} is a broker id of the
SyncStateSet other than the master's, {old_master} the master's before `electMaster`."""


# -- running mqadmin -----------------------------------------------------------------------------


def mqadmin(classpath: str, work: Path, line: str) -> dict[str, str]:
    """One mqadmin command line in its own JVM; what it printed (logback's start-up chatter,
    the lines with `|-`, dropped)."""
    done = subprocess.run(
        [
            *mqadmin_java(
                classpath, f"-Duser.home={work}", f"-Drocketmq.client.logRoot={work / 'logs'}"
            ),
            *line.split(" "),
        ],
        capture_output=True,
        text=True,
        timeout=MQADMIN_TIMEOUT_S,
        cwd=work,
    )
    stdout = "\n".join(line for line in done.stdout.splitlines() if "|-" not in line)
    return {"command": line, "stdout": stdout, "stderr": done.stderr}


def fields(answer: dict[str, str]) -> dict[str, list[str]]:
    """`#Key<tab>value` and `Key:<tab>value` lines by key, every value in order."""
    found: dict[str, list[str]] = {}
    for line in answer["stdout"].splitlines():
        key, tab, value = line.partition("\t")
        if tab:
            found.setdefault(key.strip().lstrip("#").rstrip(":"), []).append(value.strip())
    return found


@dataclass
class Run:
    """What one cluster answered to `COMMANDS`, and what it was before and after them."""

    answers: dict[str, dict[str, str]]
    """By command template."""
    controllers: dict[str, str]
    """Controller id -> address."""
    leader: str
    master_id: int
    master_addr: str
    slave_id: int
    slave_addr: str
    brokers: dict[int, str]
    """Broker id -> address, as the controller leader has them."""
    master_after: str
    """The address the NameServer routes broker-a's master to after `electMaster`."""
    scan_intervals: dict[str, str]
    """Controller address -> its scanNotActiveBrokerInterval after `updateControllerConfig`."""


def run_commands(
    classpath: str,
    work: Path,
    namesrv: str,
    controllers: dict[str, str],
    brokers: dict[int, str],
    master_id: int,
) -> dict[str, dict[str, str]]:
    slave_id = min(broker_id for broker_id in brokers if broker_id != master_id)
    names = {
        "c0": controllers["c0"],
        "controllers": ";".join(controllers.values()),
        "ns": namesrv,
        "slave": str(slave_id),
        "old_master": str(master_id),
    }
    work.mkdir(parents=True, exist_ok=True)
    return {template: mqadmin(classpath, work, template.format(**names)) for template in COMMANDS}


def replicas(admin: Admin, controllers: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """The controller leader's address and its replica table of broker-a (asked of pocketmq's
    admin client, not of mqadmin: what mqadmin prints is checked against it)."""
    for address in controllers.values():
        meta = admin.raw_request(address, RequestCode.CONTROLLER_GET_METADATA_INFO)
        leader = meta.ext_fields.get("controllerLeaderAddress")
        if leader:
            table = admin.sync_state_data(leader, [BROKER])
            return leader, table[BROKER]
    raise AssertionError("no controller names a leader")


def by_id(table: dict[str, Any]) -> dict[int, str]:
    members = [*table.get("inSyncReplicas", []), *table.get("notInSyncReplicas", [])]
    return {int(m["brokerId"]): m["brokerAddress"] for m in members}


# -- pocketmq ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pocketmq_run(v5_classpath: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    root = tmp_path_factory.mktemp("pocketmq-controllers")
    with running_cluster(root) as cluster:
        cluster.wait_in_sync(3)
        controllers = {name: node.address for name, node in cluster.controllers.items()}
        run = _run_on(
            cluster.admin, cluster.namesrv_addr, controllers, v5_classpath, root / "mqadmin"
        )
        # And the broker itself says so.
        master = cluster.wait_master()
        assert cluster.brokers[master].address == run.slave_addr
        return run


def _run_on(
    admin: Admin, namesrv: str, controllers: dict[str, str], classpath: str, work: Path
) -> Run:
    leader, table = replicas(admin, controllers)
    master_id = int(table["masterBrokerId"])
    brokers = by_id(table)
    answers = run_commands(classpath, work, namesrv, controllers, brokers, master_id)
    slave_id = min(broker_id for broker_id in brokers if broker_id != master_id)

    def routed_master() -> str | None:
        # Not just the controller's word: the elected broker took the role and registered so.
        data = admin.cluster_info().broker_addr_table.get(BROKER)
        address: str | None = data.broker_addrs.get(0) if data else None
        return address if address and address != brokers[master_id] else None

    master_after = wait_until(routed_master, "a master other than the old one", timeout_s=30)
    return Run(
        answers=answers,
        controllers=controllers,
        leader=leader,
        master_id=master_id,
        master_addr=table["masterAddress"],
        slave_id=slave_id,
        slave_addr=brokers[slave_id],
        brokers=brokers,
        master_after=master_after,
        scan_intervals={
            address: admin.controller_config(address)["scanNotActiveBrokerInterval"]
            for address in controllers.values()
        },
    )


def answer(run: Run, index: int) -> dict[str, str]:
    return run.answers[COMMANDS[index]]


def test_get_controller_meta_data_names_the_leader_and_peers(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 0)
    assert outcome(got) == "ok", got
    printed = fields(got)
    assert printed["ControllerGroup"] == ["group1"]
    assert printed["ControllerLeaderAddress"] == [pocketmq_run.leader]
    leader_id = next(n for n, a in pocketmq_run.controllers.items() if a == pocketmq_run.leader)
    assert printed["ControllerLeaderId"] == [leader_id]
    assert printed["Peer"] == [f"{n}:{a}" for n, a in pocketmq_run.controllers.items()]


def test_get_sync_state_set_shows_the_master_and_three_in_sync(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 1)
    assert outcome(got) == "ok", got
    printed = fields(got)
    assert printed["brokerName"] == [BROKER]
    assert printed["MasterBrokerId"] == [str(pocketmq_run.master_id)]
    assert printed["MasterAddr"] == [pocketmq_run.master_addr]
    assert printed["MasterEpoch"] == ["1"]
    assert int(printed["SyncStateSetEpoch"][0]) >= 2
    assert printed["SyncStateSetNums"] == ["3"]
    assert sorted(printed["InSyncReplica"]) == [
        f"ReplicaIdentity{{brokerName='{BROKER}', brokerId={i}, brokerAddress='{a}', alive=true}}"
        for i, a in sorted(pocketmq_run.brokers.items())
    ]
    assert "NotInSyncReplica" not in printed


def test_get_broker_epoch_lists_every_broker_of_the_group(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 2)
    assert outcome(got) == "ok", got
    printed = fields(got)
    assert printed["clusterName"] == [CLUSTER] * 3
    assert printed["brokerName"] == [BROKER] * 3
    assert sorted(printed["brokerAddr"]) == sorted(pocketmq_run.brokers.values())
    # A master reports brokerId 0 (its broker config's), a slave its controller id.
    ids = dict(zip(printed["brokerAddr"], printed["brokerId"], strict=True))
    assert ids == {
        a: "0" if i == pocketmq_run.master_id else str(i) for i, a in pocketmq_run.brokers.items()
    }
    epochs = [line for line in got["stdout"].splitlines() if line.startswith("#Epoch: ")]
    assert len(epochs) == 3
    for line in epochs:
        assert re.fullmatch(r"#Epoch: EpochEntry\{epoch=1, startOffset=0, endOffset=\d+\}", line)


def test_get_controller_config_answers_from_every_controller(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 3)
    assert outcome(got) == "ok", got
    sections = _config_sections(got["stdout"])
    assert sections.keys() == set(pocketmq_run.controllers.values())
    for name, address in pocketmq_run.controllers.items():
        assert sections[address]["controllerDLegerSelfId"] == name
        assert sections[address]["controllerDLegerGroup"] == "group1"
        assert sections[address]["scanNotActiveBrokerInterval"] == "200"


def _config_sections(stdout: str) -> dict[str, dict[str, str]]:
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in stdout.splitlines():
        header = re.fullmatch(r"=+(\S+?)=+", line.strip())
        if header:
            current = sections.setdefault(header.group(1), {})
        elif "=" in line:
            key, _, value = line.partition("=")
            current[key.strip()] = value.strip()
    return sections


def test_update_controller_config_reaches_every_controller(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 4)
    assert outcome(got) == "ok", got
    listed = ", ".join(pocketmq_run.controllers.values())
    assert got["stdout"].strip().splitlines() == [
        f"update controller config success![{listed}]",
        "scanNotActiveBrokerInterval : 300",
    ]
    assert set(pocketmq_run.scan_intervals.values()) == {"300"}


def test_elect_master_makes_the_named_broker_master(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 5)
    assert outcome(got) == "ok", got
    printed = fields(got)
    assert printed["ClusterName"] == [CLUSTER]
    assert printed["BrokerName"] == [BROKER]
    assert printed["BrokerMasterAddr"] == [pocketmq_run.slave_addr]
    assert printed["MasterEpoch"] == ["2"]
    # mqadmin reads the body as a BrokerMemberGroup, which the controller's ElectMasterResponseBody
    # is not, so it lists no brokers (nor does it against RocketMQ's controller, when it can read
    # the body at all).
    assert "Broker" not in printed
    assert pocketmq_run.master_after == pocketmq_run.slave_addr


def test_clean_broker_metadata_of_a_living_broker_is_refused(pocketmq_run: Run) -> None:
    got = answer(pocketmq_run, 6)
    assert outcome(got) == "code 2009", got
    assert (
        # Two spaces after the comma, as RocketMQ's format string has them.
        f"DESC: Broker [{BROKER},  {pocketmq_run.master_id}] is still alive, clean up failure"
        in got["stdout"] + got["stderr"]
    ), got["stderr"]


# -- the container -------------------------------------------------------------------------------


@dataclass
class Container:
    namesrv: ServerProcess
    process: ServerProcess
    work: Path


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    work = tmp_path_factory.mktemp("container")
    namesrv = start_server_process(["namesrv", "--port", "0"], work / "namesrv.log")
    try:
        conf = work / "broker-container.conf"
        conf.write_text(
            f"listenPort=0\nnamesrvAddr={namesrv.address}\n"
            f"brokerConfigPaths={broker_file(work, 'broker-a')}\n"
        )
        process = start_server_process(["container", "-c", str(conf)], work / "container.log")
        try:
            yield Container(namesrv, process, work)
        finally:
            process.stop()
    finally:
        namesrv.stop()


def broker_file(work: Path, name: str) -> Path:
    settings = {
        "brokerClusterName": CLUSTER,
        "brokerName": name,
        "brokerId": "0",
        "listenPort": str(free_port_pair()),
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(work / f"store-{name}"),
    }
    path = work / f"{name}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def registered(namesrv: str) -> set[str]:
    with Admin([namesrv], timeout_s=5.0) as admin:
        info = admin.cluster_info()
    return set(info.cluster_addr_table.get(CLUSTER, set()))


def test_add_and_remove_broker_change_what_the_container_runs(
    container: Container, v5_classpath: str
) -> None:
    namesrv = container.namesrv.address
    work = container.work / "mqadmin"
    work.mkdir()
    wait_until(lambda: BROKER in registered(namesrv), "broker-a of the container registered")

    added = mqadmin(
        v5_classpath,
        work,
        f"addBroker -c {container.process.address} -b {broker_file(container.work, 'broker-x')}",
    )
    assert outcome(added) == "ok", added
    assert added["stdout"].strip() == f"add broker to {container.process.address} success"
    wait_until(lambda: "broker-x" in registered(namesrv), "broker-x registered", timeout_s=20)

    removed = mqadmin(
        v5_classpath,
        work,
        f"removeBroker -c {container.process.address} -b {CLUSTER}:broker-x:0",
    )
    assert outcome(removed) == "ok", removed
    assert removed["stdout"].strip() == f"remove broker from {container.process.address} success"
    wait_until(lambda: "broker-x" not in registered(namesrv), "broker-x unregistered", timeout_s=20)
    assert registered(namesrv) == {BROKER}


# -- beside Apache RocketMQ ----------------------------------------------------------------------


class Rocket(RocketCluster):
    """The benchmark's Apache RocketMQ cluster with the brokers' timing of the integration tests
    (`FAST`), so its SyncStateSet fills within seconds, not tens of them."""

    def _launch(self, name: str, main: str, port: int, ready_line: str | None) -> None:
        if name in self.broker_ports:
            with (self.work / f"{name}.properties").open("a") as properties:
                properties.write("".join(f"{k}={v}\n" for k, v in FAST.items()))
        super()._launch(name, main, port, ready_line)


@pytest.fixture(scope="module")
def reference_run(
    pocketmq_run: Run, v5_classpath: str, tmp_path_factory: pytest.TempPathFactory
) -> Run:
    # After pocketmq's run, never beside it: seven JVMs and seven Python servers at once would
    # starve two cores.
    failures: list[str] = []
    # Twice at most: a port the benchmark's probe found free can be taken before a JVM binds it.
    for _ in range(2):
        cluster = Rocket(tmp_path_factory.mktemp("apache-controllers"), "ASYNC_FLUSH")
        try:
            cluster.start_all()
            with Admin([cluster.namesrv_addr], timeout_s=3.0) as admin:
                wait_until(
                    lambda: healthy_master(admin, cluster),  # noqa: B023 (used at once)
                    "Apache RocketMQ's master with three in its SyncStateSet",
                    timeout_s=90,
                    describe=cluster.logs,
                )
                return _run_on(
                    admin,
                    cluster.namesrv_addr,
                    cluster.controllers(),
                    v5_classpath,
                    cluster.work / "mqadmin",
                )
        except ReferenceUnavailable as exc:
            failures.append(f"{exc}\n{cluster.logs()}")
        finally:
            cluster.close()
    pytest.fail("\n".join(failures), pytrace=False)


_MASKS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(#ControllerLeaderId\t)\S+"), r"\1<leader>"),
    # What each CommitLog holds differs, and so do the SyncStateSet's steps: a set that grew
    # one slave at a time is at epoch 3, one both slaves joined at once at 2.
    (re.compile(r"endOffset=\d+"), "endOffset=<n>"),
    (re.compile(r"(#SyncStateSetEpoch\t)\d+"), r"\1<n>"),
]


def comparable(got: dict[str, str], template: str) -> dict[str, Any]:
    stdout = got["stdout"]
    for pattern, placeholder in _MASKS:
        stdout = pattern.sub(placeholder, stdout)
    lines = [normalise(line) for line in stdout.splitlines() if line.strip()]
    if template.startswith("getControllerConfig"):
        # Which keys each prints is compared by `test_controller_config_keys`.
        lines = [line for line in lines if line.startswith("=")]
    if template.startswith(("getBrokerEpoch", "getSyncStateSet")):
        # Brokers in the NameServer's order, replicas in the controller's.
        lines = sorted(lines)
    return {"outcome": outcome(got), "lines": lines}


REFERENCE_FAILS: dict[str, tuple[str, str]] = {
    COMMANDS[5]: (
        "not support unquoted name",
        "Apache RocketMQ's controller writes the answer's body with fastjson 1, whose map keys "
        'are bare numbers ({1:"127.0.0.1:..."}); mqadmin 5.5.0 reads it with fastjson 2, which '
        "refuses them, and reports a failure although the election happened. pocketmq writes "
        "standard JSON, so mqadmin prints the new master.",
    ),
}
"""Commands the real mqadmin fails on against Apache RocketMQ itself: what its error says, and
why pocketmq answers differently."""


@pytest.mark.parametrize("template", COMMANDS)
def test_controller_commands_answer_as_apache_rocketmq_does(
    template: str, pocketmq_run: Run, reference_run: Run
) -> None:
    ours = comparable(pocketmq_run.answers[template], template)
    reference = comparable(reference_run.answers[template], template)
    if template in REFERENCE_FAILS:
        error, _ = REFERENCE_FAILS[template]
        assert error in reference_run.answers[template]["stderr"], reference_run.answers[template]
        assert ours["outcome"] == "ok"
    else:
        assert ours == reference


def test_both_took_the_changes(pocketmq_run: Run, reference_run: Run) -> None:
    """The new master and setting on each, whatever mqadmin printed about them."""
    for run in (pocketmq_run, reference_run):
        assert run.master_after == run.slave_addr
        assert set(run.scan_intervals.values()) == {"300"}


POCKETMQ_ONLY_SETTINGS = {
    "controllerDLegerElectionTimeoutMs": "RocketMQ's DLedger does not expose its timing",
    "controllerDLegerHeartBeatIntervalMs": "likewise",
    "controllerSnapshotEveryEntries": "pocketmq's Raft log compaction",
    "defaultBrokerGroupQos": "pocketmq's per-group replication QoS",
    "brokerGroupQos": "likewise",
}


def _settings(run: Run) -> dict[str, dict[str, str]]:
    return _config_sections(run.answers[COMMANDS[3]]["stdout"])


def test_controller_config_keys(pocketmq_run: Run, reference_run: Run) -> None:
    """pocketmq prints fewer settings (no Netty or metrics ones), but none RocketMQ lacks
    except its own, and the shared ones as RocketMQ names and writes them."""
    ours = _settings(pocketmq_run)[pocketmq_run.leader]
    reference = _settings(reference_run)[reference_run.leader]
    assert ours.keys() - reference.keys() == POCKETMQ_ONLY_SETTINGS.keys()
    for name in ("controllerDLegerGroup", "controllerType", "configBlackList"):
        assert ours[name] == reference[name]
    for name in ("electMasterMaxRetryCount", "enableElectUncleanMaster", "notifyBrokerRoleChanged"):
        assert ours[name] == reference[name]


def test_controller_config_names_the_port_served_on(pocketmq_run: Run) -> None:
    for address, settings in _settings(pocketmq_run).items():
        assert settings["listenPort"] == address.rsplit(":", 1)[1]
