"""The unmodified RocketMQ C++ client (PyPI `rocketmq==0.4.4`) against real pocketmq processes."""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pocketmq.testing import ServerProcess
from tests.interop.cpp_harness import MessagesMissingError, bodies, wait_for_bodies

pytestmark = pytest.mark.interop

ServerFactory = Callable[..., ServerProcess]
TOPIC = "InteropTopic"


def admin(namesrv: str, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def create_topic(namesrv: str, topic: str, queues: int) -> None:
    admin(
        namesrv,
        "updateTopic",
        "-t",
        topic,
        "-c",
        "DefaultCluster",
        "-r",
        str(queues),
        "-w",
        str(queues),
    )


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, *drivers: Any) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    report = "\n".join(
        f"{d.name}: {len(d.messages())} messages, stderr:\n{d.stderr()}" for d in drivers
    )
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}\n{report}")


def send_markers(cpp: Any, namesrv: str, topic: str, queues: int) -> set[str]:
    """Sends one marker to each queue of `topic` (it has `queues`) with the C++ client, after
    everything sent before; returns their bodies.

    A queue is delivered in order: a consumer that has every marker has been handed whatever
    it would get of the messages stored before them. That is the positive signal to wait for
    before checking that something did not arrive.
    """
    producer = cpp("cpp_features.py", ["ordered", namesrv, topic, str(queues), "1"])
    assert producer.finish(timeout_s=120)["sent"] == queues
    return {f"k{key}-0" for key in range(queues)}  # key k goes to queue k


def test_produce_10000_then_clustered_consumers_and_a_pull_consumer_get_everything(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = run_server(
        "up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(tmp_path / "up"),
        name="up",
    )  # fmt: skip
    create_topic(up.address, TOPIC, 8)
    producer = cpp("cpp_produce.py", [up.address, TOPIC, "10000", "--mode", "mixed"])
    summary = producer.finish(timeout_s=300)
    assert (summary["sent"], summary["failed"]) == (10000, 0)
    acked = [line for line in producer.lines if line.get("status") == 0]
    assert len(acked) == 9000  # every tenth went oneway
    assert all(len(line["msg_id"]) == 32 for line in acked)
    expected = {f"body-{i}" for i in range(10000)}

    first = cpp("cpp_push_consume.py", [up.address, "CG_CLUSTER", TOPIC, "0", "300"])
    # The second member joins once the first is consuming, so the queues move in a rebalance
    # while messages flow; tests/conformance/test_cpp_client.py starts two at once, against
    # Apache RocketMQ and pocketmq.
    wait_until(lambda: bool(first.messages()), 60, "the first member consuming", first)
    second = cpp("cpp_push_consume.py", [up.address, "CG_CLUSTER", TOPIC, "0", "300"])
    wait_for_bodies(expected, 120, first, second)
    first.finish()
    second.finish()
    received = bodies(first, second)
    duplicates = sum(n - 1 for n in Counter(received).values())
    sys.stdout.write(f"clustering: {len(received)} deliveries, {duplicates} duplicates\n")
    assert set(received) == expected
    assert first.messages(), "both group members get queues"
    assert second.messages(), "both group members get queues"
    line = first.messages()[0]
    assert line["keys"].startswith("key-")
    assert line["tags"] in ("TagA", "TagB")
    assert line["index"] == line["body"].removeprefix("body-")

    puller = cpp("cpp_pull_consume.py", [up.address, "CG_PULL", TOPIC])
    pulled = puller.finish(timeout_s=180)
    assert pulled["received"] == 10000
    assert set(bodies(puller)) == expected


def test_committed_offsets_survive_a_broker_restart(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    namesrv = run_server("namesrv", "--port", "0", name="namesrv")
    broker_args = ["broker", "--port", "0", "--data-dir", str(tmp_path / "broker")]
    broker_args += ["-n", namesrv.address]
    broker = run_server(*broker_args, name="broker")
    create_topic(namesrv.address, "OffsetTopic", 4)
    produced = cpp("cpp_produce.py", [namesrv.address, "OffsetTopic", "100"]).finish()
    assert produced["sent"] == 100
    args = [namesrv.address, "CG_OFFSETS", "OffsetTopic"]
    consumer = cpp("cpp_push_consume.py", [*args, "100", "120"])
    # It stops by itself after 100 messages; its shutdown commits the offsets.
    assert consumer.finish(timeout_s=150, stop=False)["distinct"] >= 100
    assert broker.stop() == 0
    run_server(*broker_args, name="broker")
    producer = cpp("cpp_produce.py", [namesrv.address, "OffsetTopic", "50", "--start", "100"])
    assert producer.finish()["sent"] == 50
    again = cpp("cpp_push_consume.py", [*args, "0", "120"])
    new = {f"body-{i}" for i in range(100, 150)}
    try:
        wait_for_bodies(new, 60, again)
        # Once the markers are in, anything re-delivered from before the committed
        # offsets is in too: it comes before them in its queue.
        markers = send_markers(cpp, namesrv.address, "OffsetTopic", 4)
        wait_for_bodies(markers, 60, again)
    except MessagesMissingError as exc:
        progress = admin(namesrv.address, "consumerProgress", "-g", "CG_OFFSETS")
        raise MessagesMissingError(f"{exc}\n{progress}") from None
    again.finish()
    assert set(bodies(again)) - markers == new, "messages before the committed offsets came again"


def test_broadcasting_delivers_everything_to_each_instance(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = run_server(
        "up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(tmp_path / "up"),
        name="up",
    )  # fmt: skip
    create_topic(up.address, "BroadcastTopic", 4)
    args = [up.address, "CG_BROADCAST", "BroadcastTopic", "0", "300", "--broadcast"]
    first = cpp("cpp_push_consume.py", [*args, "--instance", "first"])
    second = cpp("cpp_push_consume.py", [*args, "--instance", "second"])
    first.wait_for("started", 60)
    second.wait_for("started", 60)
    # Broadcasting consumers start at the queues' max offsets: warm up until both receive.
    warmup = 0
    for _ in range(60):
        cpp("cpp_produce.py", [up.address, "BroadcastTopic", "4", "--start", str(10**6 + warmup)])
        warmup += 4
        time.sleep(0.5)
        if first.messages() and second.messages():
            break
    producer = cpp("cpp_produce.py", [up.address, "BroadcastTopic", "1000"])
    assert producer.finish(timeout_s=120)["sent"] == 1000
    expected = {f"body-{i}" for i in range(1000)}
    for consumer in (first, second):
        wait_until(lambda c=consumer: set(bodies(c)) >= expected, 90, "1,000 messages", consumer)
    first.finish()
    second.finish()


def test_clients_carry_on_through_the_second_namesrv(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    first = run_server("namesrv", "--port", "0", name="namesrv")
    second = run_server("namesrv", "--port", "0", name="namesrv")
    both = f"{first.address};{second.address}"
    run_server(
        "broker", "--port", "0", "--data-dir", str(tmp_path / "broker"), "-n", both,
        name="broker",
    )  # fmt: skip
    create_topic(second.address, "FailoverTopic", 4)
    assert first.stop() == 0
    producer = cpp("cpp_produce.py", [both, "FailoverTopic", "200"])
    summary = producer.finish(timeout_s=120)
    assert (summary["sent"], summary["failed"]) == (200, 0)
    consumer = cpp("cpp_push_consume.py", [both, "CG_FAILOVER", "FailoverTopic", "200", "120"])
    assert consumer.finish(timeout_s=150, stop=False)["distinct"] >= 200
    assert set(bodies(consumer)) == {f"body-{i}" for i in range(200)}


def test_acknowledged_sends_survive_a_broker_sigkill_under_a_running_producer(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    namesrv = run_server("namesrv", "--port", "0", name="namesrv")
    common = ["--data-dir", str(tmp_path / "broker"), "-n", namesrv.address]
    # The broker picks its port (a probed one, or its HA port next to it, can be taken before
    # it binds); the restart takes the same one, as the producer's route names it.
    broker = run_server("broker", "--port", "0", *common, name="broker")
    broker_args = ["broker", "--port", broker.address.rpartition(":")[2], *common]
    create_topic(namesrv.address, "KillTopic", 4)
    producer = cpp("cpp_produce.py", [namesrv.address, "KillTopic", "3000", "--keep-going", "120"])
    wait_until(lambda: len(producer.lines) >= 500, 60, "500 sends before the kill", producer)
    broker.kill()
    assert len(producer.lines) < 3000, "the kill must land while the producer is sending"
    restarted = run_server(*broker_args, name="broker")
    assert "unclean" in restarted.log()  # the restart took the crash-recovery path
    summary = producer.finish(timeout_s=180, stop=False)
    assert summary["sent"] == 3000
    acked = {f"body-{line['index']}" for line in producer.lines if line.get("status") == 0}
    puller = cpp("cpp_pull_consume.py", [namesrv.address, "CG_KILL", "KillTopic"])
    puller.finish(timeout_s=120)
    stored = bodies(puller)
    missing = acked - set(stored)
    assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
    sys.stdout.write(
        f"SIGKILL under load: {len(acked)} acknowledged, {summary['failed']} failed sends, "
        f"{len(stored) - len(set(stored))} duplicates\n"
    )
