"""Controller mode under faults: three controllers and three brokers of one group with
`allAckInSyncStateSet=true`, a producer sending without pause, the master killed with SIGKILL
round after round (POCKETMQ_CONTROLLER_ROUNDS, 20 by default); every third round the controller
leader is killed with it.

After every round a new master serves and the consumer offset committed before the fault reads
back the same from it. At the end: every broker holds the same CommitLog bytes; every
acknowledged message is in the final master's queues; and no two masters acknowledged writes
in one epoch: each receipt's CommitLog offset lies in an epoch of the final epoch list whose
master (from the brokers' logs, one master per epoch) is the broker that stored it.
"""

from __future__ import annotations

import logging
import os
import random
import re
import statistics
import threading
import time
from pathlib import Path

from pocketmq.testing import wait_until
from tests.integration.controlled import ControlledCluster, running_cluster
from tests.integration.dledger import SendLoad

log = logging.getLogger(__name__)

TOPIC = "ControlledFailover"
ROUNDS = int(os.environ.get("POCKETMQ_CONTROLLER_ROUNDS", "20"))
CHECKER_GROUP = "offset-checker"
_MASTER_LINE = re.compile(r"master of broker-a in epoch (\d+) from CommitLog offset (\d+)")


def _masters_by_epoch(cluster: ControlledCluster) -> dict[int, str]:
    """Epoch -> the address of the broker whose log says it mastered that epoch; a second
    claim of one epoch fails the test."""
    masters: dict[int, str] = {}
    for node in cluster.brokers.values():
        for path in cluster.root.glob(f"{node.name}-*.log"):
            for match in _MASTER_LINE.finditer(path.read_text(errors="replace")):
                epoch = int(match.group(1))
                claimed = masters.setdefault(epoch, node.address)
                assert claimed == node.address, f"epoch {epoch} claimed by {claimed} and {node}"
    return masters


def _leader_controller(cluster: ControlledCluster) -> str | None:
    for node in cluster.controllers.values():
        if node.process is None:
            continue
        meta = cluster.admin.controller_metadata(node.address)
        leader = meta.get("controllerLeaderAddress")
        if leader:
            return next(n.name for n in cluster.controllers.values() if n.address == leader)
    return None


def failover_round(cluster: ControlledCluster, load: SendLoad, round_no: int) -> float:
    master = cluster.wait_master()
    cluster.wait_in_sync(3, timeout_s=30)
    time.sleep(random.uniform(0.2, 1.5))  # the fault's moment: random, by design
    address = cluster.brokers[master].address
    cluster.admin.update_consumer_offset(address, CHECKER_GROUP, TOPIC, 0, round_no)
    controller = _leader_controller(cluster) if round_no % 3 == 2 else None
    fault_at = time.monotonic()
    cluster.kill(master)
    if controller is not None:
        cluster.kill(controller)
    new_master = cluster.wait_master(other_than=master, timeout_s=30)
    wait_until(
        lambda: load.first_ack_after(fault_at) is not None,
        "an acknowledged send after the fault",
        timeout_s=30,
    )
    first = load.first_ack_after(fault_at)
    assert first is not None
    committed = cluster.admin.consumer_offset(
        cluster.brokers[new_master].address, CHECKER_GROUP, TOPIC, 0
    )
    assert committed == round_no, f"round {round_no}: offset {committed} on {new_master}"
    if controller is not None:
        cluster.start_controller(controller)
    cluster.start_broker(master)
    return first - fault_at


def test_no_acknowledged_message_or_offset_is_lost_and_no_epoch_has_two_masters(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path) as cluster:
        cluster.wait_in_sync(3)
        load = SendLoad(cluster.namesrv_addr, TOPIC)
        sender = threading.Thread(target=load.run, daemon=True)
        sender.start()
        failovers: list[float] = []
        try:
            failovers.extend(failover_round(cluster, load, n) for n in range(ROUNDS))
        finally:
            load.stop.set()
            sender.join(timeout=30)
        log.info(
            "failover (fault to first acknowledged send), %d rounds: median %.3f s, worst %.3f s",
            len(failovers), statistics.median(failovers), max(failovers),
        )  # fmt: skip
        final = cluster.wait_master()
        cluster.wait_in_sync(3, timeout_s=30)
        end = cluster.wait_same_end(30)
        copies = {b.name: cluster.commit_log_bytes(b.name, end) for b in cluster.brokers.values()}
        assert len(set(copies.values())) == 1, "the brokers' CommitLogs differ"

        stored = cluster.bodies(final, TOPIC)
        lost = [body for _, _, body, _ in load.acked if body not in stored]
        assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:3]}"

        masters = _masters_by_epoch(cluster)
        epochs = cluster.admin.broker_epochs(cluster.brokers[final].address)["epochList"]
        starts = [(e["epoch"], e["startOffset"], e["endOffset"]) for e in epochs]
        for host, offset, body in load.stored:
            epoch = next((e for e, start, stop in starts if start <= offset < stop), None)
            assert epoch is not None, f"{body!r} at {offset} lies in no epoch of {starts}"
            assert masters.get(epoch) == host, (
                f"{body!r} at {offset} was acknowledged by {host}, but epoch {epoch}'s master "
                f"was {masters.get(epoch)}"
            )
