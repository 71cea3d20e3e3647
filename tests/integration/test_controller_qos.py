"""The replication states of controller mode (`pocketmq.common.ha_qos`) with real processes:
slaves that stop answering and come back move the master from SYNC down and back up, and the
group's QoS level decides what happens meanwhile: AVAILABILITY acknowledges on the master
alone, NO_LOSS acknowledges nothing a second broker does not hold."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing import wait_until
from tests.integration.controlled import ControlledCluster, running_cluster
from tests.integration.dledger import SendLoad

TOPIC = "QosTopic"
QUICK = {"haMaxTimeSlaveNotCatchup": "1500", "syncFlushTimeout": "1000"}


def _status(cluster: ControlledCluster) -> dict[str, Any]:
    master = cluster.wait_master()
    status = cluster.status(master)
    assert status is not None
    return status


def _wait_state(cluster: ControlledCluster, state: str, members: int) -> dict[str, Any]:
    found: dict[str, Any] = {}

    def reached() -> bool:
        found.update(_status(cluster))
        return found.get("haState") == state and len(found.get("syncStateSet", [])) == members

    wait_until(reached, f"{state} with {members} in the SyncStateSet", timeout_s=30)
    return found


def _stop(cluster: ControlledCluster, names: list[str]) -> list[int]:
    pids = [cluster.brokers[n].process.process.pid for n in names]  # type: ignore[union-attr]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    return pids


def _resume(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGCONT)


def test_availability_falls_back_to_the_master_alone_and_climbs_back_to_sync(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path, **QUICK) as cluster:
        cluster.wait_in_sync(3)
        master = cluster.wait_master()
        slaves = [b for b in cluster.brokers if b != master]
        load = SendLoad(cluster.namesrv_addr, TOPIC)
        sender = threading.Thread(target=load.run, daemon=True)
        sender.start()
        try:
            _wait_state(cluster, "SYNC", 3)
            first = _stop(cluster, slaves[:1])
            _wait_state(cluster, "SYNC", 2)
            second = _stop(cluster, slaves[1:])
            status = _wait_state(cluster, "ASYNC", 1)
            assert status["haQos"] == "AVAILABILITY"
            stopped_at = time.monotonic()
            wait_until(lambda: load.acks_after(stopped_at) >= 20, "sends on the master alone")
            _resume(first + second)
            status = _wait_state(cluster, "SYNC", 3)
        finally:
            load.stop.set()
            sender.join(timeout=30)
        states = [state for _, state in status["haTransitions"]]
        assert "ASYNC" in states
        assert states[-1] == "SYNC"
        # Coming back under load, a slave is held for before it joins.
        assert "SEMI_SYNC" in states[states.index("ASYNC") :], states
        cluster.wait_same_end(30)


def test_no_loss_acknowledges_nothing_on_one_copy(tmp_path: Path) -> None:
    with running_cluster(tmp_path, **QUICK) as cluster:
        cluster.controller_extra["brokerGroupQos"] = "broker-a:NO_LOSS"
        for name in cluster.controllers:
            cluster.kill(name)
            cluster.start_controller(name)
        cluster.wait_in_sync(3)
        wait_until(lambda: _status(cluster).get("haQos") == "NO_LOSS", "the NO_LOSS level")
        master = cluster.wait_master()
        slaves = [b for b in cluster.brokers if b != master]
        with Producer("no-loss", namesrv=cluster.namesrv_addr, send_timeout_s=5) as producer:
            assert producer.send(Message(TOPIC, b"both")).status is SendStatus.SEND_OK
            pids = _stop(cluster, slaves)
            try:
                # Past haMaxTimeSlaveNotCatchup: AVAILABILITY would have shrunk the set by now.
                wait_until(
                    lambda: all(
                        c["lastReportAgoMs"] > 2_500 for c in _status(cluster)["haConnectionInfo"]
                    ),
                    "both slaves silent for longer than haMaxTimeSlaveNotCatchup",
                )
                result = producer.send(Message(TOPIC, b"alone"))
                assert result.status is not SendStatus.SEND_OK, result
                status = _status(cluster)
                assert len(status["syncStateSet"]) >= 2, status
            finally:
                _resume(pids)
            cluster.wait_in_sync(3)
            assert producer.send(Message(TOPIC, b"back")).status is SendStatus.SEND_OK
