"""`pocketmq container`: several brokers in one process, added and removed while it runs.

A NameServer and the container run as subprocesses; `pocketmq admin addBroker` / `removeBroker`
run as a user would run them. Compare RocketMQ's `AddAndRemoveBrokerIT`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import ServerProcess, free_port_pair, wait_until

ServerFactory = Callable[..., ServerProcess]
CLUSTER = "ContainerCluster"
CLI_TIMEOUT_S = 60


def write_broker_file(tmp_path: Path, name: str, **extra: str) -> tuple[Path, int]:
    """A broker properties file with its own port and store; returns it and the port."""
    port = free_port_pair()
    settings = {
        "brokerClusterName": CLUSTER,
        "brokerName": name,
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "listenPort": str(port),
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(tmp_path / f"store-{name}"),
        **extra,
    }
    path = tmp_path / f"{name}.conf"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path, port


def registered(namesrv: str) -> dict[str, str]:
    """Broker name -> master address of `CLUSTER`, as the NameServer reports it."""

    async def ask() -> dict[str, str]:
        async with AdminClient([namesrv], timeout_s=5) as admin:
            info = await admin.cluster_info()
        names = info.cluster_addr_table.get(CLUSTER, set())
        return {
            name: info.broker_addr_table[name].broker_addrs[0]
            for name in names
            if name in info.broker_addr_table and 0 in info.broker_addr_table[name].broker_addrs
        }

    return asyncio.run(ask())


def send_and_read(namesrv: str, broker_name: str, address: str) -> None:
    async def run() -> None:
        async with AdminClient([namesrv], timeout_s=5) as admin:
            topic = f"Topic-{broker_name}"
            await admin.create_topic(TopicSettings(topic, 2, 2), broker=address)
            assert await admin.wait_for_route(topic, timeout_s=10)
            body = f"hello {broker_name}".encode()
            await admin.send_message(topic, body, broker_name=broker_name, queue_id=1)
            batch = await admin.pull(address, topic, 1, 0, 32)
            assert [m.body for m in batch.messages] == [body]

    asyncio.run(run())


def admin(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )


def one_line_failure(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_container_runs_adds_and_removes_brokers(run_server: ServerFactory, tmp_path: Path) -> None:
    namesrv = run_server("namesrv", "--port", "0", name="namesrv").address
    file_a, _ = write_broker_file(tmp_path, "broker-a")
    # broker-b names its NameServer itself; broker-a takes the container's.
    file_b, _ = write_broker_file(tmp_path, "broker-b", namesrvAddr=namesrv)
    # A file that cannot start (its port is taken by the NameServer) must not stop the others.
    broken = tmp_path / "broken.conf"
    broken.write_text(
        f"brokerClusterName={CLUSTER}\nbrokerName=broker-x\nlistenPort={namesrv.split(':')[1]}\n"
        f"storePathRootDir={tmp_path / 'store-x'}\n"
    )
    conf = tmp_path / "broker-container.conf"
    conf.write_text(
        f"listenPort=0\nnamesrvAddr={namesrv}\nbrokerConfigPaths={file_a}:{broken}:{file_b}\n"
    )
    container = run_server("container", "-c", str(conf), name="container")

    brokers = wait_until(
        lambda: (found := registered(namesrv)).keys() >= {"broker-a", "broker-b"} and found,
        "both brokers of the container registered",
        timeout_s=20,
    )
    assert "broker-x" not in brokers
    for name in ("broker-a", "broker-b"):
        send_and_read(namesrv, name, brokers[name])

    file_c, _ = write_broker_file(tmp_path, "broker-c")
    added = admin("addBroker", "-c", container.address, "-b", str(file_c))
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == f"add broker to {container.address} success"
    brokers = wait_until(
        lambda: "broker-c" in (found := registered(namesrv)) and found,
        "broker-c added at runtime registered",
        timeout_s=20,
    )
    send_and_read(namesrv, "broker-c", brokers["broker-c"])

    removed = admin("removeBroker", "-c", container.address, "-b", f"{CLUSTER}:broker-a:0")
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == f"remove broker from {container.address} success"
    wait_until(
        lambda: "broker-a" not in registered(namesrv),
        "broker-a removed and unregistered",
        timeout_s=20,
    )
    assert registered(namesrv).keys() == {"broker-b", "broker-c"}

    unknown = one_line_failure(
        admin("removeBroker", "-c", container.address, "-b", f"{CLUSTER}:broker-a:0")
    )
    assert "BROKER_NOT_EXIST" in unknown
    assert f"{CLUSTER}:broker-a:0 is not in this container" in unknown
    missing = one_line_failure(
        admin("addBroker", "-c", container.address, "-b", str(tmp_path / "nope.conf"))
    )
    assert "nope.conf" in missing
    assert "SYSTEM_ERROR" in missing
    duplicate = one_line_failure(admin("addBroker", "-c", container.address, "-b", str(file_b)))
    assert f"{CLUSTER}:broker-b:0 has already been added" in duplicate
    same_store, _ = write_broker_file(
        tmp_path, "broker-d", storePathRootDir=str(tmp_path / "store-broker-c")
    )
    shared = one_line_failure(admin("addBroker", "-c", container.address, "-b", str(same_store)))
    assert "already used by broker" in shared

    async def raw_requests() -> None:
        client = RemotingClient()
        try:
            no_name = RemotingCommand.request(
                RequestCode.REMOVE_BROKER, {"brokerClusterName": CLUSTER, "brokerId": "0"}
            )
            answer = await client.invoke(container.address, no_name, 10)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert answer.remark == "the custom field <brokerName> is null"
            empty = RemotingCommand.request(RequestCode.ADD_BROKER, {})
            answer = await client.invoke(container.address, empty, 10)
            assert answer.code == ResponseCode.SYSTEM_ERROR
            assert answer.remark == "addBroker config path is empty"
            config = await client.invoke(
                container.address, RemotingCommand.request(RequestCode.GET_BROKER_CONFIG), 10
            )
            assert config.code == ResponseCode.SUCCESS
            assert f"listenPort={container.port}" in config.body.decode()
        finally:
            await client.close()

    asyncio.run(raw_requests())
    assert container.stop() == 0
    assert "broker-x" in container.log()  # the broken file was reported, not hidden
    wait_until(lambda: not registered(namesrv), "every broker unregistered after a clean stop")


def test_bad_container_config_is_one_line_and_status_2(tmp_path: Path) -> None:
    bad_port = tmp_path / "bad-port.conf"
    bad_port.write_text("listenPort=ten\n")
    bad_namesrv = tmp_path / "bad-namesrv.conf"
    bad_namesrv.write_text("listenPort=0\nnamesrvAddr=localhost\n")
    for conf, words in ((bad_port, "listenPort"), (bad_namesrv, "namesrvAddr")):
        result = subprocess.run(
            [sys.executable, "-m", "pocketmq.cli.main", "container", "-c", str(conf)],
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT_S,
        )
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert lines[0].startswith("pocketmq container: configuration error:")
        assert words in lines[0]
