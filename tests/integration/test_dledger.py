"""DLedger mode with real broker processes on loopback: three replicas elect a master that
registers as brokerId 0; sends are acknowledged by a majority and every replica holds the same
CommitLog bytes; followers refuse writes with SERVICE_NOT_AVAILABLE and serve reads; killing
the master elects another that has every acknowledged message, the consumer offsets and the
topics, and delivers the timer and delayed messages the old one had not, none twice; a restarted
replica catches up; leadership moves to a named replica on demand."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.testing import wait_until
from tests.integration.dledger import DLedgerGroup, raw_send_header, running_group

TOPIC = "DLedgerTopic"


@pytest.fixture
def group(tmp_path: Path) -> Iterator[DLedgerGroup]:
    with running_group(tmp_path) as dledger:
        yield dledger


def admin(namesrv: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if check:
        assert completed.returncode == 0, completed.stderr
    return completed


def send_all(group: DLedgerGroup, count: int, prefix: str) -> list[tuple[int, int, bytes]]:
    """Sends `count` messages; returns (queue id, queue offset, body) of each."""
    acked = []
    with Producer("dledger-producer", namesrv=group.namesrv_addr, send_timeout_s=6) as producer:
        for i in range(count):
            body = f"{prefix}-{i}".encode()
            result = producer.send(Message(TOPIC, body, keys=f"{prefix}-{i}"))
            assert result.status is SendStatus.SEND_OK
            acked.append((result.queue.queue_id, result.queue_offset, body))
    return acked


def read_back(group: DLedgerGroup, address: str, acked: list[tuple[int, int, bytes]]) -> None:
    """Every acknowledged message is at its queue offset on the replica at `address`."""
    for queue_id, offset, body in acked:
        batch = group.admin.pull(address, TOPIC, queue_id, offset, 1)
        assert batch.messages, f"nothing at {TOPIC}/{queue_id}@{offset} on {address}"
        assert batch.messages[0].queue_offset == offset
        assert batch.messages[0].body == body


def test_a_group_elects_one_master_and_every_replica_holds_the_same_bytes(
    group: DLedgerGroup,
) -> None:
    master = group.wait_master()
    acked = send_all(group, 40, "a")
    with Producer("p2", namesrv=group.namesrv_addr) as producer:
        result = producer.send(Message(TOPIC, b"receipt"))
        # A DLedger writer takes a batch message by message (it has no batch path).
        bodies = [f"batch-{i}".encode() for i in range(5)]
        batch = producer.send_batch([Message(TOPIC, b, keys=b.decode()) for b in bodies])
    assert result.durability == "FLUSHED"
    assert result.replicas >= 2
    assert batch.status is SendStatus.SEND_OK
    assert batch.replicas >= 2
    acked += [(batch.queue.queue_id, batch.queue_offset + i, b) for i, b in enumerate(bodies)]
    end = group.wait_converged()
    reference = group.commit_log_bytes(master, end)
    assert len(reference) == end > 0
    for name in group.replicas:
        assert group.commit_log_bytes(name, end) == reference, f"{name} differs"
        read_back(group, group.replicas[name].address, acked)
    listing = admin(group.namesrv_addr, "clusterList").stdout
    assert "SYNC_MASTER" in listing
    assert listing.count("SLAVE") == 2
    status = admin(group.namesrv_addr, "dledgerStatus", "-c", "DefaultCluster").stdout
    assert f"{master}  " in status
    assert "MASTER" in status
    assert "#MatchIndex" in status


def test_a_follower_refuses_writes_with_a_clear_code_and_serves_reads(
    group: DLedgerGroup,
) -> None:
    master = group.wait_master()
    acked = send_all(group, 5, "b")
    group.wait_converged()
    follower = next(name for name in group.replicas if name != master)
    address = group.replicas[follower].address
    header = raw_send_header("raw", TOPIC)
    response = group.admin._broker(
        address, RequestCode.SEND_MESSAGE, header, b"to a follower", what="send"
    )
    assert response.code == ResponseCode.SERVICE_NOT_AVAILABLE, response.remark
    assert "follower" in (response.remark or "")
    assert master in (response.remark or "")
    read_back(group, address, acked)


def test_the_new_master_has_every_acknowledged_message_offset_and_topic(
    group: DLedgerGroup,
) -> None:
    master = group.wait_master()
    acked = send_all(group, 30, "c")
    group.admin.update_consumer_offset(
        group.replicas[master].address, "dledger-group", TOPIC, acked[0][0], 7
    )
    group.kill(master)
    new_master = group.wait_master(other_than=master)
    assert new_master != master
    address = group.replicas[new_master].address
    read_back(group, address, acked)
    offset = group.admin.consumer_offset(address, "dledger-group", TOPIC, acked[0][0])
    assert offset == 7
    # Sends go on through the new master (the client follows the NameServer's route).
    more = send_all(group, 10, "d")
    read_back(group, address, more)
    # The killed replica comes back as a follower and catches up byte for byte.
    group.start(master)
    end = group.wait_converged()
    reference = group.commit_log_bytes(new_master, end)
    assert group.commit_log_bytes(master, end) == reference
    read_back(group, group.replicas[master].address, acked + more)


def test_leadership_moves_to_a_named_replica_without_losing_writes(
    group: DLedgerGroup,
) -> None:
    master = group.wait_master()
    acked = send_all(group, 10, "e")
    target = next(name for name in group.replicas if name != master)
    answer = admin(
        group.namesrv_addr,
        "dledgerTransferLeader",
        "-b",
        group.replicas[master].address,
        "-t",
        target,
    )
    assert target in answer.stdout
    wait_until(
        lambda: (group.status(target) or {}).get("master") is True,
        f"{target} serving as master",
        timeout_s=20,
    )
    acked += send_all(group, 10, "f")
    group.wait_converged()
    read_back(group, group.replicas[target].address, acked)
    refused = admin(
        group.namesrv_addr,
        "dledgerTransferLeader",
        "-b",
        group.replicas[master].address,
        "-t",
        "n9",
        check=False,
    )
    assert refused.returncode == 1
    assert "n9 is not one of the peers" in refused.stderr


def test_a_broken_dledger_setting_stops_the_broker_with_one_line(tmp_path: Path) -> None:
    config = tmp_path / "broker.conf"
    config.write_text(
        "enableDLegerCommitLog=true\ndLegerPeers=n0-127.0.0.1:40911\ndLegerSelfId=n3\n"
        f"storePathRootDir={tmp_path / 'data'}\nlistenPort=0\n"
    )
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "broker", "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 2
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert "dLegerSelfId='n3' is not one of the dLegerPeers (n0)" in lines[0]


def test_timer_and_delayed_messages_are_delivered_once_across_a_failover(
    group: DLedgerGroup,
) -> None:
    """Six timers a second apart and five level-1 delays: the master delivers some, dies half
    a second after a slot, and the next master delivers the rest, none twice."""
    master = group.wait_master()
    now_ms = int(time.time() * 1000)
    first_slot = now_ms - now_ms % 1000 + 2000
    with Producer("timers", namesrv=group.namesrv_addr, send_timeout_s=6) as producer:
        for i in range(6):
            message = Message(
                "TimerTarget", f"timer-{i}".encode(), deliver_time_ms=first_slot + i * 1000
            )
            assert producer.send(message).status is SendStatus.SEND_OK
        for i in range(5):
            message = Message("TimerTarget", f"delay-{i}".encode(), delay_level=1)
            assert producer.send(message).status is SendStatus.SEND_OK
    # Half a second after the third timer's slot: the first three (and the delays) are out and
    # their progress replicated long before; three timers are still waiting.
    kill_at = (first_slot + 2 * 1000 + 500) / 1000
    wait_until(lambda: time.time() >= kill_at, "the moment to kill the master", timeout_s=10)
    delivered_before = {m.message.body for m in group.admin.consume("TimerTarget", count=100)}
    assert {b"timer-0", b"timer-1", b"timer-2"} <= delivered_before
    group.kill(master)
    new_master = group.wait_master(other_than=master)
    expected = {f"timer-{i}".encode() for i in range(6)} | {f"delay-{i}".encode() for i in range(5)}

    def bodies() -> list[bytes]:
        return [m.message.body for m in group.admin.consume("TimerTarget", count=100)]

    wait_until(lambda: set(bodies()) >= expected, "every timer and delay delivered", timeout_s=30)
    delivered = bodies()
    assert sorted(delivered) == sorted(expected), f"delivered twice on {new_master}"


@pytest.mark.parametrize("topic", [TOPIC, "CreatedOnFirstSend"])
def test_a_send_waits_within_its_timeout_for_a_group_without_a_master(
    group: DLedgerGroup, topic: str
) -> None:
    """Two of three replicas down: no majority, no master; the send started then succeeds
    once one of them is back, instead of failing at once for want of a writable queue. The
    same holds for a topic the broker is to create on that send (its queues are borrowed from
    the auto-create topic's route, which has no master either)."""
    master = group.wait_master()
    send_all(group, 3, "g")
    others = [name for name in group.replicas if name != master]
    group.kill(master)
    group.kill(others[0])
    with Producer("waiting", namesrv=group.namesrv_addr, send_timeout_s=20) as producer:
        wait_until(
            lambda: (
                not any(b.broker_addrs.get(0) for b in group.admin.topic_route(TOPIC).broker_datas)
            ),
            "the NameServer routing no master",
            timeout_s=30,
        )
        restarter = threading.Timer(1.0, group.start, args=(master,))
        restarter.start()
        try:
            result = producer.send(Message(topic, b"after the outage"))
        finally:
            restarter.join(timeout=60)
    assert result.status is SendStatus.SEND_OK


def test_leadership_settles_on_the_preferred_leader(tmp_path: Path) -> None:
    with running_group(tmp_path, preferredLeaderId="n2") as dledger:
        wait_until(
            lambda: (dledger.status("n2") or {}).get("master") is True,
            "n2, the preferred leader, serving as master",
            timeout_s=30,
        )
        send_all(dledger, 5, "p")


def test_a_replica_down_for_long_catches_up_from_a_leader_that_compacted_as_follower(
    tmp_path: Path,
) -> None:
    """Snapshots every 20 entries. n-c is down while 120 sends go through a and b; then a dies
    and b, which compacted its log as a follower, leads c: b must still hold the entries c
    lacks (a replica compacts only what every replica holds; a Raft snapshot carries no
    CommitLog bytes, so c could not use one)."""
    with running_group(tmp_path, dLegerSnapshotEveryEntries="20") as group:
        first = group.wait_master()
        second, lagging = (name for name in group.replicas if name != first)
        group.kill(lagging)
        acked = send_all(group, 120, "h")
        group.kill(first)
        group.start(lagging)
        assert group.wait_master() == second
        acked += send_all(group, 5, "i")
        end = group.wait_converged()
        assert group.commit_log_bytes(lagging, end) == group.commit_log_bytes(second, end)
        read_back(group, group.replicas[lagging].address, acked)
