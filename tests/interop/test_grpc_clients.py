"""The unmodified official 5.x gRPC clients against pocketmq's proxy, in local mode (inside
`pocketmq up`) and in cluster mode (`pocketmq proxy` in front of the same cluster), mixed with
pocketmq's remoting client on the same topics: Python (PyPI `rocketmq-python-client` 5.1.2),
Node.js (npm `rocketmq-client-nodejs` 1.0.8), Java (Maven `rocketmq-client-java` 5.0.8) and Go
(`github.com/apache/rocketmq-clients/golang/v5` 5.1.2, which has no PushConsumer).

Each client is installed on first use into the interop cache (the Python one in a virtualenv
of its own: it installs `import rocketmq`, as the C++ client does) and driven by its driver
(`scripts/python5_client.py`, `scripts/node5_client.js`, `java/grpc/GrpcClient.java`,
`go5/main.go`: the same scenarios, the same output).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client.admin import AdminClient, SubscriptionGroupSettings, TopicSettings
from pocketmq.client.aio import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from pocketmq.testing import MessageRecorder, start_up_process
from pocketmq.testing.processes import ServerProcess, start_server_process
from tests.conformance.go_driver import GO5_DIR, go_driver
from tests.conformance.reference import CLIENT_JVM, ReferenceUnavailable, grpc_drivers
from tests.interop.cpp_harness import CACHE, SCRIPTS, drivers, ensure_client_venv

pytestmark = pytest.mark.interop

PYTHON_CLIENT = "rocketmq-python-client==5.1.2"
NODE_CLIENT = "rocketmq-client-nodejs@1.0.8"
DRIVER_TIMEOUT_S = 120.0
LONG_POLLING_MS = 3000
"""The proxies' longest receive: a push consumer's `close` waits for its receives in flight
(the Java client does, rocketmq-clients #992), 20 s each with the default."""
BROKER_SETTINGS = (
    "transactionCheckInterval=1000\ntransactionTimeOut=1000\n"
    f"grpcClientConsumerMaxLongPollingTimeoutMillis={LONG_POLLING_MS}\n"
)


def ensure_node_client() -> Path:
    """The Node.js client under the interop cache (npm install on first use); `node`'s path."""
    node = shutil.which("node")
    npm = shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are needed for the Node.js client")
    folder = CACHE / "node5"
    stamp = folder / ".installed"
    if not stamp.exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "package.json").write_text('{"name": "pocketmq-node5", "private": true}')
        install = subprocess.run(
            [npm, "install", "--silent", NODE_CLIENT],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if install.returncode:
            raise RuntimeError(f"could not install {NODE_CLIENT}: {install.stderr[-2000:]}")
        stamp.touch()
    return Path(node)


@dataclass(frozen=True)
class Client:
    name: str
    command: list[str]


@pytest.fixture(scope="module", params=["python5", "node5", "java5", "go5"])
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Client:
    """One official 5.x client: its name, and the command that runs its driver."""
    if request.param == "python5":
        python = ensure_client_venv(
            CACHE / "python5", PYTHON_CLIENT, "from rocketmq import Producer"
        )
        return Client("python5", [str(python), "-u", str(SCRIPTS / "python5_client.py")])
    if request.param == "node5":
        node = ensure_node_client()
        os.environ["NODE_PATH"] = str(CACHE / "node5" / "node_modules")
        return Client("node5", [str(node), str(SCRIPTS / "node5_client.js")])
    if request.param == "go5":
        try:
            return Client("go5", [str(go_driver(GO5_DIR))])
        except ReferenceUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
    return java_client(tmp_path_factory)


def java_client(tmp_path_factory: pytest.TempPathFactory) -> Client:
    """The Java client's driver (`java/grpc/GrpcClient.java`), compiled on first use."""
    try:
        classpath = grpc_drivers()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    logs = tmp_path_factory.mktemp("java5")
    return Client(
        "java5",
        ["java", *CLIENT_JVM, f"-Drocketmq.log.root={logs}", "-cp", classpath, "GrpcClient"],
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`pocketmq up` (its proxy: local mode) and a `pocketmq proxy` in front of it (cluster
    mode)."""
    work = tmp_path_factory.mktemp("python5")
    settings = work / "broker.properties"
    settings.write_text(BROKER_SETTINGS)
    up = start_up_process(work / "data", work / "up.log", "-c", str(settings))
    proxy: ServerProcess | None = None
    try:
        proxy_settings = work / "rmq-proxy.json"
        proxy_settings.write_text(
            json.dumps({"grpcClientConsumerMaxLongPollingTimeoutMillis": LONG_POLLING_MS})
        )
        proxy = start_server_process(
            ["proxy", "-n", up.address, "--grpc-port", "0", "-c", str(proxy_settings)],
            work / "proxy.log",
        )
        yield {
            "namesrv": up.address,
            "local": up.named_address("proxy"),
            "cluster": proxy.address,
        }
    finally:
        if proxy is not None:
            proxy.stop()
        up.stop()


@pytest.fixture(params=["local", "cluster"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Run:
    def __init__(self, client: Client, log_dir: Path) -> None:
        self.name = client.name
        self.command = client.command
        self.log_dir = log_dir

    def __call__(self, *args: str) -> Any:
        with drivers(Path(self.command[0]), self.log_dir) as start:
            driver = start(self.name, list(args), self.command)
            return driver.finish(DRIVER_TIMEOUT_S, stop=False)["summary"], driver.messages_by(
                "message_id"
            )


@pytest.fixture
def run(client: Client, tmp_path: Path) -> Run:
    return Run(client, tmp_path / "drivers")


def admin_call(namesrv: str, work: Any) -> Any:
    async def go() -> Any:
        async with AdminClient([namesrv]) as admin:
            return await work(admin)

    return asyncio.run(go())


def create_topic(namesrv: str, topic: str, kind: str, queues: int = 4) -> None:
    async def work(admin: AdminClient) -> None:
        settings = TopicSettings(
            topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            attributes=f"+message.type={kind}",
        )
        await admin.create_topic(settings, cluster="DefaultCluster")
        assert await admin.wait_for_route(topic)

    admin_call(namesrv, work)


def create_group(namesrv: str, group: str, **settings: Any) -> None:
    async def work(admin: AdminClient) -> None:
        await admin.update_subscription_group(
            SubscriptionGroupSettings(group, **settings), cluster="DefaultCluster"
        )

    admin_call(namesrv, work)


def test_sends_and_receives_with_acks_and_remoting_clients_on_the_same_topic(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    topic, group = f"{run.name}Normal{mode}", f"{run.name}-normal-{mode}"
    create_topic(cluster["namesrv"], topic, "NORMAL")
    summary, _ = run("produce", cluster[mode], topic, group, "4")
    grpc_ids = summary["sent"]

    async def remoting_side() -> tuple[list[str], dict[str, MessageExt]]:
        recorder = MessageRecorder()
        consumer = PushConsumer(
            f"{group}-remoting",
            namesrv=cluster["namesrv"],
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(topic, "*")
        consumer.register_listener(recorder)
        await consumer.start()
        try:
            await recorder.wait_for_ids(grpc_ids, timeout_s=30)
        finally:
            await consumer.close()
        got = recorder.messages
        async with Producer(f"{group}-producer", namesrv=cluster["namesrv"]) as producer:
            sent = [
                (
                    await producer.send(
                        Message(
                            topic,
                            b"remote%d" % i,
                            tags="TagR",
                            keys=[f"rk{i}"],
                            properties={"origin": "remoting"},
                        )
                    )
                ).msg_id
                for i in range(2)
            ]
        return sent, {m.msg_id: m for m in got}

    remoting_ids, remoting_got = asyncio.run(remoting_side())
    # What the gRPC client sent, the remoting consumer got, with its id, tag, keys, property.
    assert set(remoting_got) == set(grpc_ids)
    for message in remoting_got.values():
        assert message.tags == "TagA"
        assert message.properties["origin"] == run.name
        assert message.keys == [f"key-{message.body.decode()}"]
    summary, received = run("receive", cluster[mode], topic, group, str(len(grpc_ids) + 2))
    assert sorted(summary["received"]) == sorted(grpc_ids + remoting_ids)
    by_id = {line["message_id"]: line for line in received}
    for msg_id in remoting_ids:
        assert by_id[msg_id]["tag"] == "TagR"
        assert by_id[msg_id]["properties"] == {"origin": "remoting"}
        assert by_id[msg_id]["attempt"] == 1
    for msg_id in grpc_ids:
        assert by_id[msg_id]["properties"] == {"origin": run.name}


def test_a_changed_invisible_time_redelivers_and_spends_the_old_handle(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    topic, group = f"{run.name}Redeliver{mode}", f"{run.name}-redeliver-{mode}"
    create_topic(cluster["namesrv"], topic, "NORMAL", queues=1)
    run("produce", cluster[mode], topic, group, "1")
    summary, _ = run("redeliver", cluster[mode], topic, group)
    assert summary["same_message"] is True
    assert summary["attempts"] == [1, 2]
    if run.name != "go5":  # the Go client 5.1.2's Ack returns no error for a refused ack
        assert summary["stale_ack"] is not None


def test_after_its_max_attempts_a_message_goes_to_the_dead_letter_queue(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    topic, group = f"{run.name}Dead{mode}", f"{run.name}-dead-{mode}"
    create_topic(cluster["namesrv"], topic, "NORMAL", queues=1)
    create_group(cluster["namesrv"], group, retry_max_times=1)  # two attempts
    sent, _ = run("produce", cluster[mode], topic, group, "1")
    summary, _ = run("dead-letter", cluster[mode], topic, group, "2")
    assert summary["attempts"] == [1, 2]

    async def dead_letters() -> list[MessageExt]:
        recorder = MessageRecorder()
        consumer = PushConsumer(
            f"{group}-dlq",
            namesrv=cluster["namesrv"],
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe(f"%DLQ%{group}", "*")
        consumer.register_listener(recorder)
        await consumer.start()
        try:
            await recorder.wait_for(1, timeout_s=30)
        finally:
            await consumer.close()
        return recorder.messages

    assert [m.msg_id for m in asyncio.run(dead_letters())] == sent["sent"]


def test_fifo_message_groups_are_consumed_in_order(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    if run.name == "go5":
        pytest.skip("the Go client 5.1.2 has no PushConsumer")
    topic, group = f"{run.name}Fifo{mode}", f"{run.name}-fifo-{mode}"
    create_topic(cluster["namesrv"], topic, "FIFO")
    create_group(cluster["namesrv"], group, consume_message_orderly=True)
    run("fifo", cluster[mode], topic, group, "12")
    summary, lines = run("push-fifo", cluster[mode], topic, group, "12")
    order: dict[str, list[int]] = {}
    for body, _attempt, message_group in summary["consumed"]:
        order.setdefault(message_group, []).append(int(body[1:]))
    assert order == {f"g{g}": list(range(g, 12, 3)) for g in range(3)}
    # A message group always lands on one queue (the handle's seventh field; the Java client
    # does not show its handles).
    queues: dict[str, set[str]] = {}
    for line in lines:
        if line["handle"] is not None:
            queues.setdefault(line["group"], set()).add(line["handle"].split(" ")[6])
    assert all(len(q) == 1 for q in queues.values())


def test_a_delayed_message_arrives_at_its_delivery_time(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    topic, group = f"{run.name}Delay{mode}", f"{run.name}-delay-{mode}"
    create_topic(cluster["namesrv"], topic, "DELAY", queues=1)
    summary, _ = run("delay", cluster[mode], topic, group, "1")
    received, lines = run("receive", cluster[mode], topic, group, "1")
    assert received["received"] == summary["sent"]
    assert lines[0]["t"] >= summary["at"]


def test_transactions_commit_roll_back_and_are_checked_back(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    topic, group = f"{run.name}Tx{mode}", f"{run.name}-tx-{mode}"
    create_topic(cluster["namesrv"], topic, "TRANSACTION", queues=1)
    summary, _ = run("transaction", cluster[mode], topic, group)
    assert summary["checked"][:1] == ["orphan"]
    _, lines = run("receive", cluster[mode], topic, group, "2")
    assert sorted(line["body"] for line in lines) == ["commit", "orphan"]


def test_a_push_consumer_gets_a_failed_message_again(
    cluster: dict[str, str], mode: str, run: Run
) -> None:
    if run.name == "go5":
        pytest.skip("the Go client 5.1.2 has no PushConsumer")
    topic, group = f"{run.name}Push{mode}", f"{run.name}-push-{mode}"
    create_topic(cluster["namesrv"], topic, "NORMAL", queues=2)
    run("produce", cluster[mode], topic, group, "3")
    summary, _ = run("push", cluster[mode], topic, group, "3")
    attempts: dict[str, list[int]] = {}
    for body, attempt, _group in summary["consumed"]:
        attempts.setdefault(body, []).append(attempt)
    assert attempts == {f"m{i}": [1, 2] for i in range(3)}
