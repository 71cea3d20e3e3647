"""Controller mode with real processes: three controllers, three brokers of one group.

What it proves: the group forms (ids, a first master, a SyncStateSet of all three); with
`allAckInSyncStateSet` every acknowledged put is on every member; a killed master is replaced
from the set without losing an acknowledged message; a master that was replaced while it held
bytes nobody acknowledged is cut back when it rejoins and ends byte-identical to the new
master; a master cut off from the controllers acknowledges nothing once a newer epoch exists;
losing the controller leader changes nothing for the brokers.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.client.admin import AdminError
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.testing import start_server_process, wait_until
from tests.integration.controlled import ControlledCluster, running_cluster
from tests.integration.dledger import SendLoad, raw_send_header
from tests.integration.metrics_scrape import scrape

TOPIC = "ControlledTopic"


def _assert_identical(cluster: ControlledCluster) -> int:
    end = cluster.wait_same_end(30)
    copies = {b.name: cluster.commit_log_bytes(b.name, end) for b in cluster.running_brokers()}
    assert len(set(copies.values())) == 1, f"CommitLogs differ up to {end}"
    return end


def test_a_group_forms_and_every_acknowledged_put_is_on_every_member(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cluster:
        status = cluster.wait_in_sync(3)
        assert status["masterEpoch"] == 1
        with Producer("formation", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            results = [producer.send(Message(TOPIC, f"m-{i}".encode())) for i in range(30)]
        assert {r.replicas for r in results} == {3}
        assert {r.durability for r in results} == {"FLUSHED"}
        end = _assert_identical(cluster)
        for broker in cluster.brokers.values():
            epochs = cluster.admin.broker_epochs(broker.address)
            assert [(e["epoch"], e["startOffset"]) for e in epochs["epochList"]] == [(1, 0)]
            assert epochs["maxOffset"] == end
        code, fields, body = cluster.controller_request(
            RequestCode.CONTROLLER_GET_REPLICA_INFO, brokerName="broker-a"
        )
        assert code == ResponseCode.SUCCESS
        assert fields["masterEpoch"] == "1"
        assert b'"syncStateSet":[1,2,3]' in body
        _assert_slaves_hold_their_ha_port(cluster, status)


def _assert_slaves_hold_their_ha_port(cluster: ControlledCluster, status: dict[str, Any]) -> None:
    """Every broker binds its HA port from the start, as RocketMQ does: a slave's port cannot be
    taken by another socket before it is promoted. It closes what connects while it is slave."""
    master_port = int(status["haServerAddr"].rpartition(":")[2])
    for broker in cluster.brokers.values():
        ha_port = broker.port + 1
        if ha_port == master_port:
            continue
        with socket.create_connection(("127.0.0.1", ha_port), timeout=5) as connection:
            connection.settimeout(5)
            connection.sendall(b"\0")  # a listener reads a first byte before it serves
            assert connection.recv(1) == b"", f"slave {broker.name} kept an HA connection"


def test_a_put_is_acknowledged_only_once_every_member_holds_it(tmp_path: Path) -> None:
    """With both slaves stopped (still in the set), the master stores a send but cannot
    acknowledge it; a new master elected after the master dies lacks it, and nobody was told
    it was sent."""
    with running_cluster(
        tmp_path, syncFlushTimeout="1000", haMaxTimeSlaveNotCatchup="60000"
    ) as cluster:
        cluster.wait_in_sync(3)
        master = cluster.wait_master()
        slaves = [b for b in cluster.brokers if b != master]
        with Producer("rule", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            assert producer.send(Message(TOPIC, b"before")).status is SendStatus.SEND_OK
            pids = [cluster.brokers[n].process.process.pid for n in slaves]  # type: ignore[union-attr]
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            try:
                result = producer.send(Message(TOPIC, b"unacknowledged"))
                assert result.status is SendStatus.FLUSH_SLAVE_TIMEOUT, result
                cluster.kill(master)
            finally:
                for pid in pids:
                    os.kill(pid, signal.SIGCONT)
            cluster.wait_master(other_than=master)
            assert producer.send(Message(TOPIC, b"after")).status is SendStatus.SEND_OK
        cluster.start_broker(master)
        cluster.wait_in_sync(3)
        _assert_identical(cluster)


def test_a_killed_master_is_replaced_without_losing_an_acknowledged_message(
    tmp_path: Path,
) -> None:
    rounds = 3
    with running_cluster(tmp_path) as cluster:
        cluster.wait_in_sync(3)
        load = SendLoad(cluster.namesrv_addr, TOPIC)
        sender = threading.Thread(target=load.run, daemon=True)
        sender.start()
        failovers: list[float] = []
        try:
            for _ in range(rounds):
                master = cluster.wait_master()
                cluster.wait_in_sync(3)
                before = len(load.acked)
                deadline = time.monotonic() + 10
                while len(load.acked) < before + 100 and time.monotonic() < deadline:
                    time.sleep(0.02)
                killed_at = time.monotonic()
                cluster.kill(master)
                cluster.wait_master(other_than=master)
                deadline = time.monotonic() + 20
                while load.first_ack_after(killed_at) is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                first = load.first_ack_after(killed_at)
                assert first is not None, f"no send acknowledged after the kill\n{cluster.logs()}"
                failovers.append(first - killed_at)
                cluster.start_broker(master)
        finally:
            load.stop.set()
            sender.join(timeout=30)
        final = cluster.wait_master()
        cluster.wait_in_sync(3)
        _assert_identical(cluster)
        stored = cluster.bodies(final, TOPIC)
        lost = [body for _, _, body, _ in load.acked if body not in stored]
        assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:3]}"
        assert len(failovers) == rounds


def test_a_replaced_master_is_cut_back_to_what_the_new_master_holds(tmp_path: Path) -> None:
    """The old master stores a put that no slave got (both are stopped, and it dropped their
    silent connections), dies, and comes back after a slave was elected: its handshake cuts
    the unacknowledged bytes off."""
    with running_cluster(
        tmp_path, haHousekeepingInterval="1000", haMaxTimeSlaveNotCatchup="60000"
    ) as cluster:
        cluster.wait_in_sync(3)
        with Producer("before", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            for i in range(20):
                producer.send(Message(TOPIC, f"kept-{i}".encode()))
        old = cluster.wait_master()
        slaves = [b for b in cluster.brokers if b != old]
        agreed = _assert_identical(cluster)
        pids = [cluster.brokers[name].process.process.pid for name in slaves]  # type: ignore[union-attr]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + 15
            while (cluster.status(old) or {}).get("haConnectionInfo"):
                assert time.monotonic() < deadline, "the master kept its silent slaves"
                time.sleep(0.05)
            header = raw_send_header("orphan", TOPIC)
            # Stored by the old master, waiting for slaves that cannot answer; never acknowledged.
            threading.Thread(
                target=_send_ignoring_errors, args=(cluster, old, header), daemon=True
            ).start()
            deadline = time.monotonic() + 10
            while (cluster.status(old) or {}).get("masterCommitLogMaxOffset", 0) <= agreed:
                assert time.monotonic() < deadline, "the old master never stored the put"
                time.sleep(0.02)
            cluster.kill(old)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        new = cluster.wait_master(other_than=old)
        with Producer("after", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            for i in range(10):
                producer.send(Message(TOPIC, f"new-{i}".encode()))
        cluster.start_broker(old)
        cluster.wait_in_sync(3)
        end = _assert_identical(cluster)
        assert end > agreed
        log = cluster.brokers[old].process.log()  # type: ignore[union-attr]
        assert "cutting the CommitLog back from" in log, log
        assert f" to {agreed}," in log, log
        bodies = cluster.bodies(old, TOPIC)
        assert b"orphan-body" not in bodies
        assert {f"kept-{i}".encode() for i in range(20)} <= bodies.keys()
        assert {f"new-{i}".encode() for i in range(10)} <= bodies.keys()
        epochs = cluster.admin.broker_epochs(cluster.brokers[old].address)["epochList"]
        assert epochs[-1]["epoch"] == cluster.status(new)["masterEpoch"]
        assert epochs[-1]["startOffset"] == agreed


def _send_ignoring_errors(cluster: ControlledCluster, broker: str, header: dict[str, str]) -> None:
    # The broker is killed while it waits for its slaves: there is no answer to check.
    with contextlib.suppress(AdminError):
        cluster.admin.raw_request(
            cluster.brokers[broker].address, RequestCode.SEND_MESSAGE, header, b"orphan-body"
        )


def test_a_master_cut_off_from_the_controllers_acknowledges_nothing_once_replaced(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path) as cluster:
        cluster.wait_in_sync(3)
        old = cluster.wait_master()
        process = cluster.brokers[old].process
        assert process is not None
        os.kill(process.process.pid, signal.SIGSTOP)
        try:
            new = cluster.wait_master(other_than=old, timeout_s=20)
        finally:
            os.kill(process.process.pid, signal.SIGCONT)
        # Straight to the old master, before it heard of its replacement from anyone.
        response = cluster.admin.raw_request(
            cluster.brokers[old].address,
            RequestCode.SEND_MESSAGE,
            raw_send_header("stale", TOPIC),
            b"stale-body",
        )
        assert response.code != ResponseCode.SUCCESS, response
        deadline = time.monotonic() + 20
        while (cluster.status(old) or {}).get("master"):
            assert time.monotonic() < deadline, "the old master never stepped down"
            time.sleep(0.05)
        cluster.wait_in_sync(3)
        _assert_identical(cluster)
        assert b"stale-body" not in cluster.bodies(new, TOPIC)


def test_losing_the_controller_leader_changes_nothing_for_the_brokers(tmp_path: Path) -> None:
    with running_cluster(tmp_path) as cluster:
        cluster.wait_in_sync(3)
        leader_address = None
        for node in cluster.controllers.values():
            meta = cluster.admin.controller_metadata(node.address)
            leader_address = meta.get("controllerLeaderAddress")
            if leader_address:
                break
        leader = next(n for n in cluster.controllers.values() if n.address == leader_address)
        cluster.kill(leader.name)
        with Producer("steady", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            results = [producer.send(Message(TOPIC, f"s-{i}".encode())) for i in range(10)]
        assert {r.replicas for r in results} == {3}
        master = cluster.wait_master()
        cluster.kill(master)
        cluster.wait_master(other_than=master, timeout_s=20)
        cluster.start_controller(leader.name)
        cluster.start_broker(master)
        cluster.wait_in_sync(3)
        _assert_identical(cluster)


def test_controllers_inside_namesrvs_elect_and_fail_over(tmp_path: Path) -> None:
    """`enableControllerInNamesrv=true`: the NameServer process runs the controller replica
    its file describes (RocketMQ's embedded controller)."""
    with running_cluster(tmp_path, in_namesrv=True) as cluster:
        cluster.wait_in_sync(3)
        log = cluster.controllers["c0"].process.log()  # type: ignore[union-attr]
        assert "NameServer serving on port" in log
        assert "controller c0 of group group1 serving" in log
        master = cluster.wait_master()
        cluster.kill(master)
        cluster.wait_master(other_than=master)
        with Producer("embedded", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            assert producer.send(Message(TOPIC, b"after")).status is SendStatus.SEND_OK


@pytest.mark.parametrize(
    ("args", "text", "message"),
    [
        (["broker"], "enableControllerMode=true\n", "needs controllerAddr"),
        (
            ["broker"],
            "enableControllerMode=true\ncontrollerAddr=127.0.0.1:1\nenableDLegerCommitLog=true\n",
            "exclude each other",
        ),
        (["controller"], "controllerDLegerSelfId=n0\n", "needs controllerDLegerPeers"),
        (
            ["controller"],
            "controllerDLegerPeers=n0-127.0.0.1:1\ncontrollerDLegerSelfId=n9\n",
            "controllerDLegerSelfId='n9' is not one of the controllerDLegerPeers",
        ),
    ],
)
def test_a_broken_setting_is_one_line(
    tmp_path: Path, args: list[str], text: str, message: str
) -> None:
    config = tmp_path / "bad.properties"
    config.write_text(text + f"storePathRootDir={tmp_path / 'store'}\n")
    with pytest.raises(RuntimeError) as caught:
        start_server_process([*args, "-c", str(config)], tmp_path / "bad.log", timeout_s=20)
    output = (tmp_path / "bad.log").read_text()
    assert message in output, output
    assert "Traceback" not in output
    assert "exit code 2" in str(caught.value)


def test_metrics_show_replica_lag_per_slave_and_count_the_election(tmp_path: Path) -> None:
    """Every broker and controller serves Prometheus: the master a replica-lag series per
    slave, and after the master is killed the controllers count one election that chose a new
    master."""
    metrics = {
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": "127.0.0.1",
        "metricsPromExporterPort": "0",
    }
    cluster = ControlledCluster(tmp_path, extra=metrics)
    cluster.controller_extra.update(metrics)
    try:
        cluster.start_all()
        cluster.wait_in_sync(3)
        master = cluster.wait_master()
        process = cluster.brokers[master].process
        assert process is not None
        lags = [
            labels["replica"]
            for name, labels, _ in scrape(process.named_address("metrics")).samples
            if name == "pocketmq_replica_lag_bytes"
        ]
        assert len(lags) == 2, lags
        cluster.kill(master)
        cluster.wait_master(other_than=master)

        def elections() -> float:
            total = 0.0
            for node in cluster.controllers.values():
                assert node.process is not None
                found = scrape(node.process.named_address("metrics")).value(
                    "pocketmq_controller_elections_total", election_result="new_master_elected"
                )
                total += found or 0
            return total

        wait_until(lambda: elections() >= 1, "an election counted", describe=elections)
    finally:
        cluster.close()
