"""The controller-mode example works as its README says: its three controller files and three
broker files start a group (only the ports and data directories moved, in copies of the files),
getSyncStateSet shows all three in sync, the master's death elects another and sends go on;
then the same three broker files start as one `pocketmq container` process and form the group
again. The admin blocks of docs/controller.md and README.md marked as run by this file run as
written against it (only the addresses moved)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing import ServerProcess, free_port_pair, start_server_process, wait_until
from tests.integration.test_docs_examples import DOCS, README, README_NAMESRV, _run_shell, blocks_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "controller"
CONTROLLER_PORTS = (9878, 9868, 9858)
BROKER_PORTS = (30911, 30921, 30931)
CONTAINER_PORT = 10811
EXAMPLE_CONTROLLERS = ";".join(f"127.0.0.1:{port}" for port in CONTROLLER_PORTS)
TOPIC = "ExampleTopic"


class Moved:
    """The example's addresses and data directories, moved to free ports and `root`."""

    def __init__(self, root: Path, namesrv: str) -> None:
        self.root = root
        self.addresses = {
            f"127.0.0.1:{p}": f"127.0.0.1:{free_port_pair()}" for p in CONTROLLER_PORTS
        }
        self.addresses[README_NAMESRV] = namesrv
        self.ports = {p: free_port_pair() for p in BROKER_PORTS}
        self.ports[CONTAINER_PORT] = 0
        self.namesrv = namesrv

    @property
    def controllers(self) -> str:
        return ";".join(self.addresses[f"127.0.0.1:{p}"] for p in CONTROLLER_PORTS)

    def address_of(self, example_port: int) -> str:
        return f"127.0.0.1:{self.ports[example_port]}"

    def copy(self, name: str) -> Path:
        """The example file `name` in `root`, with every address, port and data directory moved
        (the data to `root / "data"`)."""
        text = (EXAMPLE / name).read_text()
        for old, new in self.addresses.items():
            text = text.replace(old, new)
        for old_port, new_port in self.ports.items():
            text = text.replace(f"listenPort={old_port}\n", f"listenPort={new_port}\n")
        text = text.replace("=data/", f"={self.root / 'data'}/")
        for sibling in EXAMPLE.glob("broker-n*.conf"):
            text = text.replace(sibling.name, str(self.root / sibling.name))
        copy = self.root / name
        copy.write_text(text)
        return copy


def admin(*args: str) -> str:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "--timeout", "3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return completed.stdout if completed.returncode == 0 else ""


def in_sync(moved: Moved) -> int:
    """How many brokers getSyncStateSet shows in the SyncStateSet (0 while it cannot tell)."""
    listing = admin("getSyncStateSet", "-a", moved.controllers, "-b", "broker-a")
    found = re.search(r"#SyncStateSetNums\t(\d+)", listing)
    return int(found.group(1)) if found else 0


def master_of(moved: Moved) -> str | None:
    """The master's address as `clusterList` shows it."""
    listing = admin("clusterList", "-n", moved.namesrv)
    found = re.search(r"broker-a\s+0\s+\S*MASTER\s+(\S+)", listing)
    return found.group(1) if found else None


def send(namesrv: str, count: int, prefix: str) -> None:
    with Producer(f"example-{prefix}", namesrv=namesrv, send_timeout_s=10) as producer:
        for i in range(count):
            result = producer.send(Message(TOPIC, f"{prefix}-{i}".encode()))
            assert result.status is SendStatus.SEND_OK, result


def run_marked_blocks(moved: Moved, cwd: Path, log: ServerProcess) -> int:
    """Runs the shell blocks of docs/controller.md and README.md that name this file as their
    runner; returns how many ran."""
    marked = [
        block
        for page in (DOCS / "controller.md", README)
        for block in blocks_of(page)
        if block.marker and "run by" in block.marker and Path(__file__).name in block.marker
    ]
    environment = {**os.environ}
    environment["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environment["PATH"]
    for block in marked:
        code = block.code.replace(EXAMPLE_CONTROLLERS, moved.controllers)
        for old, new in moved.addresses.items():
            code = code.replace(old, new)
        _run_shell(block.name, code, cwd, environment, log.log)
    return len(marked)


@contextmanager
def stopped_at_exit(processes: dict[str, ServerProcess]) -> Iterator[dict[str, ServerProcess]]:
    try:
        yield processes
    finally:
        for process in reversed(processes.values()):
            process.stop(timeout_s=30)


def start_controllers(moved: Moved, processes: dict[str, ServerProcess]) -> None:
    for name in ("controller-n0.conf", "controller-n1.conf", "controller-n2.conf"):
        copy = moved.copy(name)
        log = moved.root / f"{copy.stem}.log"
        processes[copy.stem] = start_server_process(["controller", "-c", str(copy)], log)
    first = moved.controllers.split(";")[0]
    # Brokers that start before a leader exists retry only every syncBrokerMetadataPeriod.
    wait_until(
        lambda: "#ControllerLeaderAddress\t127" in admin("getControllerMetaData", "-a", first),
        "a controller leader",
        timeout_s=30,
    )


def test_the_example_group_fails_over_as_its_readme_says(tmp_path: Path) -> None:
    namesrv = start_server_process(["namesrv", "--port", "0"], tmp_path / "namesrv.log")
    moved = Moved(tmp_path, namesrv.address)
    with stopped_at_exit({"namesrv": namesrv}) as processes:
        start_controllers(moved, processes)
        brokers: dict[str, ServerProcess] = {}
        for name in ("broker-n0.conf", "broker-n1.conf", "broker-n2.conf"):
            copy = moved.copy(name)
            brokers[copy.stem] = start_server_process(
                ["broker", "-c", str(copy)], tmp_path / f"{copy.stem}.log"
            )
        processes.update(brokers)
        wait_until(lambda: in_sync(moved) == 3, "a SyncStateSet of three", timeout_s=30)
        first = wait_until(lambda: master_of(moved), "a master in clusterList", timeout_s=30)
        send(moved.namesrv, 10, "before")
        assert run_marked_blocks(moved, tmp_path, namesrv) >= 1

        victim = next(name for name, b in brokers.items() if b.address == first)
        processes.pop(victim).kill()
        second = wait_until(
            lambda: {master_of(moved)} - {first, None}, "another master", timeout_s=30
        )
        assert first not in second
        send(moved.namesrv, 10, "after")


def test_the_example_brokers_form_the_group_in_one_container(tmp_path: Path) -> None:
    namesrv = start_server_process(["namesrv", "--port", "0"], tmp_path / "namesrv.log")
    moved = Moved(tmp_path, namesrv.address)
    with stopped_at_exit({"namesrv": namesrv}) as processes:
        start_controllers(moved, processes)
        for name in ("broker-n0.conf", "broker-n1.conf", "broker-n2.conf"):
            moved.copy(name)
        container = moved.copy("broker-container.conf")
        processes["container"] = start_server_process(
            ["container", "-c", str(container)], tmp_path / "container.log"
        )
        wait_until(lambda: in_sync(moved) == 3, "a SyncStateSet of three", timeout_s=30)
        assert master_of(moved) in {moved.address_of(port) for port in BROKER_PORTS}
        send(moved.namesrv, 10, "contained")
