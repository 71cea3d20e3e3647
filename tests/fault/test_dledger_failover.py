"""A DLedger group of three broker processes under producer and consumer load, its master
killed with SIGKILL at random moments round after round (POCKETMQ_DLEDGER_ROUNDS, 20 by
default), then paused with SIGSTOP for longer than the election timeout.

After every round a new master serves and the consumer offset committed before the fault reads
back the same. At the end every replica holds the same CommitLog bytes, every acknowledged
message is at the queue offset its receipt named, and the consumer received every one of them.
The client-side failover time (last acknowledgement before the fault to the first after it) is
printed per round; the figures in BENCHMARKS.md come from `benchmarks/dledger_failover.py`.
"""

from __future__ import annotations

import logging
import os
import random
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import (
    ConsumeResult,
    MessageExt,
    PushConsumer,
)
from pocketmq.testing import wait_until
from tests.integration.dledger import DLedgerGroup, SendLoad, running_group

log = logging.getLogger(__name__)

TOPIC = "FailoverTopic"
ROUNDS = int(os.environ.get("POCKETMQ_DLEDGER_ROUNDS", "20"))
CHECKER_GROUP = "offset-checker"


@pytest.fixture
def group(tmp_path: Path) -> Iterator[DLedgerGroup]:
    with running_group(tmp_path) as dledger:
        yield dledger


def failover_round(group: DLedgerGroup, load: SendLoad, round_no: int, *, pause: bool) -> float:
    """One fault on the master; returns the client-side failover time in seconds."""
    master = group.wait_master()
    time.sleep(random.uniform(0.2, 1.5))  # the fault's moment: random, by design
    address = group.replicas[master].address
    group.admin.update_consumer_offset(address, CHECKER_GROUP, TOPIC, 0, round_no)
    fault_at = time.monotonic()
    if pause:
        group.pause(master)
    else:
        group.kill(master)
    new_master = group.wait_master(other_than=master)
    wait_until(
        lambda: load.first_ack_after(fault_at) is not None,
        "an acknowledged send after the fault",
        timeout_s=30,
    )
    first = load.first_ack_after(fault_at)
    assert first is not None
    failover_s = first - load.last_ack_before(fault_at)
    committed = group.admin.consumer_offset(
        group.replicas[new_master].address, CHECKER_GROUP, TOPIC, 0
    )
    assert committed == round_no, f"round {round_no}: offset {committed} on {new_master}"
    if pause:
        group.resume(master)
    else:
        group.start(master)
    return failover_s


def test_no_acknowledged_message_or_offset_is_lost_across_master_failures(
    group: DLedgerGroup,
) -> None:
    group.wait_master()
    received: set[bytes] = set()
    received_lock = threading.Lock()

    def listener(messages: list[MessageExt]) -> ConsumeResult:
        with received_lock:
            received.update(m.body for m in messages)
        return ConsumeResult.SUCCESS

    load = SendLoad(group.namesrv_addr, TOPIC)
    sender = threading.Thread(target=load.run, daemon=True)
    sender.start()
    consumer = PushConsumer("failover-consumer", namesrv=group.namesrv_addr)
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(listener)
    times: list[float] = []
    try:
        wait_until(lambda: len(load.acked) >= 20, "the first acknowledged sends", timeout_s=30)
        consumer.start()
        times.extend(
            failover_round(group, load, round_no, pause=False) for round_no in range(1, ROUNDS + 1)
        )
        times.append(failover_round(group, load, ROUNDS + 1, pause=True))
    finally:
        load.stop.set()
        sender.join(timeout=30)
    log.warning(
        f"failover over {len(times)} rounds: median {statistics.median(times):.2f} s, "
        f"worst {max(times):.2f} s; {len(load.acked)} acknowledged, "
        f"{len(load.failures)} sends failed"
    )
    master = group.wait_master()
    end = group.wait_converged()
    reference = group.commit_log_bytes(master, end)
    for name in group.replicas:
        assert group.commit_log_bytes(name, end) == reference, f"{name} differs"
    address = group.replicas[master].address
    positions: dict[tuple[int, int], bytes] = {}
    for queue_id, offset, body, _ in load.acked:
        assert positions.setdefault((queue_id, offset), body) == body, "two acks, one offset"
        batch = group.admin.pull(address, TOPIC, queue_id, offset, 1)
        assert batch.messages, (queue_id, offset)
        assert batch.messages[0].queue_offset == offset
        assert batch.messages[0].body == body
    bodies = {body for _, _, body, _ in load.acked}
    try:
        wait_until(
            lambda: bodies <= received,
            "the consumer received every acknowledged message",
            timeout_s=60,
        )
    finally:
        consumer.close()
    assert statistics.median(times) < 3.0, times
