"""`pocketmq admin` controller-mode commands against real controllers and brokers.

One cluster (three controllers, three brokers of broker-a) serves every test of the module; the
commands run in this process through `pocketmq.cli.main.main`, the entry point `pocketmq`
runs, and the tests read the lines mqadmin would print. The tests run in file order: the ones
that only read come first, electMaster moves the master last.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from pocketmq.cli.main import main
from pocketmq.testing import wait_until
from tests.integration.controlled import BROKER_NAME, ControlledCluster, running_cluster

CLUSTER = "DefaultCluster"


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


class Cli:
    def __init__(self, cluster: ControlledCluster, capsys: pytest.CaptureFixture[str]) -> None:
        self.cluster = cluster
        self.capsys = capsys

    def run(self, *args: str, namesrv: bool = True) -> Result:
        self.capsys.readouterr()
        where = ["-n", self.cluster.namesrv_addr] if namesrv else []
        code = main(["admin", *args, *where, "--timeout", "3"])
        captured = self.capsys.readouterr()
        return Result(code, captured.out, captured.err)

    def ok(self, *args: str) -> list[str]:
        result = self.run(*args)
        assert result.code == 0, f"admin {args} failed: {result.err}"
        return result.lines

    def ok_json(self, *args: str) -> Any:
        result = self.run(*args, "--json")
        assert result.code == 0, f"admin {args} failed: {result.err}"
        return json.loads(result.out)

    def one_line_failure(self, *args: str) -> str:
        result = self.run(*args)
        assert result.code == 1, result.out + result.err
        lines = result.err.strip().splitlines()
        assert len(lines) == 1, result.err
        assert "Traceback" not in result.err
        return lines[0]


@pytest.fixture(scope="module")
def controlled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlledCluster]:
    with running_cluster(tmp_path_factory.mktemp("controlled")) as cluster:
        cluster.wait_in_sync(3)
        yield cluster


@pytest.fixture
def cli(controlled: ControlledCluster, capsys: pytest.CaptureFixture[str]) -> Cli:
    return Cli(controlled, capsys)


def _broker_id(cluster: ControlledCluster, name: str) -> int:
    status = cluster.status(name)
    assert status is not None, f"{name} does not answer"
    return int(status["brokerId"])


def test_controller_metadata_names_the_group_leader_and_peers(cli: Cli) -> None:
    cluster = cli.cluster
    first = cluster.controllers["c0"].address
    lines = cli.ok("getControllerMetaData", "-a", first)
    assert lines[:2] == ["", "#ControllerGroup\tgroup1"]
    leader_id = lines[2].removeprefix("#ControllerLeaderId\t")
    assert leader_id in cluster.controllers, lines
    leader_address = cluster.controllers[leader_id].address
    assert lines[3] == f"#ControllerLeaderAddress\t{leader_address}"
    assert len([line for line in lines[4:] if line.startswith("#Peer:\t")]) == 3
    assert len(lines) == 7

    document = cli.ok_json("getControllerMetaData", "-a", leader_address)
    assert document["isLeader"] is True
    assert document["controllerLeaderAddress"] == leader_address

    unreachable = cli.one_line_failure("getControllerMetaData", "-a", "127.0.0.1:1")
    assert "127.0.0.1:1" in unreachable


def test_controller_commands_need_no_namesrv(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    first = cli.cluster.controllers["c0"].address
    result = cli.run("getControllerMetaData", "-a", first, namesrv=False)
    assert result.code == 0, result.err
    assert "#ControllerGroup\tgroup1" in result.out
    result = cli.run("getSyncStateSet", "-a", first, "-b", BROKER_NAME, namesrv=False)
    assert result.code == 0, result.err
    # A command that needs the NameServer says what to pass, in one line.
    result = cli.run("getBrokerEpoch", "-b", BROKER_NAME, namesrv=False)
    assert result.code == 1
    assert "no NameServer address: pass -n" in result.err


def test_sync_state_set_shows_the_master_and_three_in_sync(cli: Cli) -> None:
    cluster = cli.cluster
    master = cluster.wait_master()
    master_id = _broker_id(cluster, master)
    lines = cli.ok("getSyncStateSet", "-a", cluster.controller_addr, "-b", BROKER_NAME)
    assert lines[:7] == [
        "",
        f"#brokerName\t{BROKER_NAME}",
        f"#MasterBrokerId\t{master_id}",
        f"#MasterAddr\t{cluster.brokers[master].address}",
        "#MasterEpoch\t1",
        lines[5],
        "#SyncStateSetNums\t3",
    ]
    assert re.fullmatch(r"#SyncStateSetEpoch\t\d+", lines[5])
    in_sync = [line for line in lines if line.startswith("InSyncReplica:\t")]
    assert len(in_sync) == 3
    for broker in cluster.brokers.values():
        assert (
            f"InSyncReplica:\tReplicaIdentity{{brokerName='{BROKER_NAME}', "
            f"brokerId={_broker_id(cluster, broker.name)}, brokerAddress='{broker.address}', "
            "alive=true}"
        ) in in_sync
    assert not [line for line in lines if line.startswith("NotInSyncReplica")]

    by_cluster = cli.ok("getSyncStateSet", "-a", cluster.controller_addr, "-c", CLUSTER)
    assert by_cluster[:7] == lines[:7]
    document = cli.ok_json("getSyncStateSet", "-a", cluster.controller_addr, "-c", CLUSTER)
    assert document[BROKER_NAME]["masterBrokerId"] == master_id

    unknown = cli.one_line_failure("getSyncStateSet", "-a", cluster.controller_addr, "-c", "Nope")
    assert "cluster Nope not found" in unknown


def test_broker_epochs_of_every_broker_of_the_group(cli: Cli) -> None:
    cluster = cli.cluster
    lines = cli.ok("getBrokerEpoch", "-b", BROKER_NAME)
    addresses = {line.removeprefix("#brokerAddr\t") for line in lines if "#brokerAddr" in line}
    assert addresses == {b.address for b in cluster.brokers.values()}
    assert lines.count(f"#clusterName\t{CLUSTER}") == 3
    assert lines.count(f"#brokerName\t{BROKER_NAME}") == 3
    epochs = [line for line in lines if line.startswith("#Epoch: ")]
    first_epochs = [e for e in epochs if e.startswith("#Epoch: EpochEntry{epoch=1, startOffset=0,")]
    assert len(first_epochs) == 3, lines

    documents = cli.ok_json("getBrokerEpoch", "-c", CLUSTER)
    assert len(documents) == 3
    for document in documents:
        # mqadmin ends the last epoch at the CommitLog's end.
        assert document["epochList"][-1]["endOffset"] == document["maxOffset"]
        block = lines.index(f"#brokerAddr\t{document['brokerAddr']}")
        assert lines[block + 1] == f"#brokerId\t{document['brokerId']}"

    unknown = cli.one_line_failure("getBrokerEpoch", "-b", "broker-z")
    assert "broker-z not found" in unknown


def test_controller_config_update_shows_in_every_controller(cli: Cli) -> None:
    cluster = cli.cluster
    addresses = [c.address for c in cluster.controllers.values()]
    lines = cli.ok(
        "updateControllerConfig", "-a", cluster.controller_addr,
        "-k", "scanNotActiveBrokerInterval", "-v", "300",
    )  # fmt: skip
    assert lines == [
        f"update controller config success![{', '.join(addresses)}]",
        "scanNotActiveBrokerInterval : 300",
    ]
    shown = cli.ok("getControllerConfig", "-a", cluster.controller_addr)
    assert [line for line in shown if line.startswith("====")] == [
        f"============{address}============" for address in addresses
    ]
    assert shown.count(f"{'scanNotActiveBrokerInterval':<50}=  300") == 3
    document = cli.ok_json("getControllerConfig", "-a", addresses[0])
    assert document[addresses[0]]["scanNotActiveBrokerInterval"] == "300"

    black_listed = cli.one_line_failure(
        "updateControllerConfig", "-a", cluster.controller_addr,
        "-k", "configStorePath", "-v", "/elsewhere",
    )  # fmt: skip
    assert "black list" in black_listed
    unknown = cli.one_line_failure(
        "updateControllerConfig", "-a", addresses[0], "-k", "noSuchSetting", "-v", "1"
    )
    assert "noSuchSetting" in unknown


def test_clean_broker_metadata_refuses_a_living_broker(cli: Cli) -> None:
    cluster = cli.cluster
    master = cluster.wait_master()
    slave = next(name for name in cluster.brokers if name != master)
    slave_id = _broker_id(cluster, slave)
    living = cli.one_line_failure(
        "cleanBrokerMetadata", "-a", cluster.controller_addr,
        "-b", str(slave_id), "-bn", BROKER_NAME, "-c", CLUSTER,
    )  # fmt: skip
    assert "still alive" in living
    no_cluster = cli.one_line_failure(
        "cleanBrokerMetadata", "-a", cluster.controller_addr, "-bn", BROKER_NAME
    )
    assert "-c CLUSTER" in no_cluster
    bad_ids = cli.one_line_failure(
        "cleanBrokerMetadata", "-a", cluster.controller_addr, "-b", "one", "-bn", BROKER_NAME,
        "-c", CLUSTER,
    )  # fmt: skip
    assert "broker ids" in bad_ids
    # Nothing was forgotten: the group still has its three replicas.
    assert cluster.wait_in_sync(3)["syncStateSet"]


def test_elect_master_moves_the_master_to_the_named_broker(cli: Cli) -> None:
    cluster = cli.cluster
    old = cluster.wait_master()
    old_epoch = int(cluster.wait_in_sync(3)["masterEpoch"])
    still = cli.one_line_failure(
        "electMaster", "-a", cluster.controller_addr,
        "-b", str(_broker_id(cluster, old)), "-bn", BROKER_NAME, "-c", CLUSTER,
    )  # fmt: skip
    assert "still alive" in still

    chosen = next(name for name in cluster.brokers if name != old)
    chosen_id = _broker_id(cluster, chosen)
    lines = cli.ok(
        "electMaster", "-a", cluster.controller_addr,
        "-b", str(chosen_id), "-bn", BROKER_NAME, "-c", CLUSTER,
    )  # fmt: skip
    assert lines[:5] == [
        "",
        f"#ClusterName\t{CLUSTER}",
        f"#BrokerName\t{BROKER_NAME}",
        f"#BrokerMasterAddr\t{cluster.brokers[chosen].address}",
        f"#MasterEpoch\t{old_epoch + 1}",
    ]
    assert re.fullmatch(r"#SyncStateSetEpoch\t\d+", lines[5])

    assert cluster.wait_master(other_than=old) == chosen
    wait_until(
        lambda: (cluster.status(chosen) or {}).get("masterEpoch") == old_epoch + 1,
        f"{chosen} serves as master in epoch {old_epoch + 1}",
        describe=lambda: cluster.status(chosen),
    )
    cluster.wait_in_sync(3)
    after = cli.ok("getSyncStateSet", "-a", cluster.controller_addr, "-b", BROKER_NAME)
    assert f"#MasterBrokerId\t{chosen_id}" in after
    assert f"#MasterEpoch\t{old_epoch + 1}" in after
