"""The DLedger example works as its README says: its three files start a group (only the ports
and data directories moved: the broker ports and data by flags, the DLedger ports in a copy of
the files), `clusterList` shows one SYNC_MASTER and two SLAVEs, the master's death elects
another and sends go on, and `pocketmq up --dledger 3` starts such a group in one process."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing import (
    ServerProcess,
    free_port_pair,
    start_server_process,
    start_up_process,
    wait_until,
)
from tests.integration.test_dledger import admin
from tests.integration.test_docs_examples import README, README_NAMESRV, _run_shell, blocks_of

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dledger"


def moved_copy(config: Path, target: Path, ports: dict[str, int]) -> Path:
    """The example file with its DLedger ports replaced by free ones."""
    text = config.read_text()
    for old, new in ports.items():
        text = text.replace(f"127.0.0.1:{old}", f"127.0.0.1:{new}")
    copy = target / config.name
    copy.write_text(text)
    return copy


def send(namesrv: str, count: int) -> None:
    with Producer("example", namesrv=namesrv) as producer:
        for i in range(count):
            assert producer.send(Message("ExampleTopic", f"m{i}".encode())).status is (
                SendStatus.SEND_OK
            )


def master_address(namesrv: str) -> str | None:
    """The group's master as `clusterList` shows it, once it shows one SYNC_MASTER and two
    SLAVEs."""
    listing = admin(namesrv, "clusterList").stdout
    found = re.search(r"RaftNode00\s+0\s+SYNC_MASTER\s+(\S+)", listing)
    if found is None or listing.count("SLAVE") != 2:
        return None
    return found.group(1)


def test_the_example_group_fails_over_as_its_readme_says(tmp_path: Path) -> None:
    configs = sorted(EXAMPLE.glob("broker-n*.conf"))
    assert len(configs) == 3
    ports = {str(40911 + i): free_port_pair() for i in range(3)}
    namesrv = start_server_process(["namesrv", "--port", "0"], tmp_path / "namesrv.log")
    brokers: dict[str, ServerProcess] = {}
    try:
        for config in configs:
            copy = moved_copy(config, tmp_path, ports)
            args = ["broker", "-c", str(copy), "-n", namesrv.address]
            args += ["--port", str(free_port_pair()), "--data-dir", str(tmp_path / config.stem)]
            brokers[config.stem] = start_server_process(args, tmp_path / f"{config.stem}.log")

        first = wait_until(
            lambda: master_address(namesrv.address), "one SYNC_MASTER, two SLAVEs", timeout_s=30
        )
        send(namesrv.address, 20)
        status = admin(namesrv.address, "dledgerStatus", "-c", "RaftCluster").stdout
        assert "#MatchIndex" in status
        victim = next(name for name, b in brokers.items() if first.endswith(f":{b.port}"))
        brokers.pop(victim).kill()
        second = wait_until(
            lambda: {master_of(namesrv.address)} - {first, None}, "another master", timeout_s=30
        )
        assert first not in second
        send(namesrv.address, 20)
    finally:
        for broker in brokers.values():
            broker.stop(timeout_s=30)
        namesrv.stop(timeout_s=10)


def master_of(namesrv: str) -> str | None:
    listing = admin(namesrv, "clusterList").stdout
    found = re.search(r"RaftNode00\s+0\s+SYNC_MASTER\s+(\S+)", listing)
    return found.group(1) if found else None


def test_up_starts_a_dledger_group_that_the_readme_commands_show(tmp_path: Path) -> None:
    """`pocketmq up --dledger 3`, then README.md's DLedger admin block as written (only the
    NameServer address moved)."""
    up = start_up_process(tmp_path / "data", tmp_path / "up.log", "--dledger", "3")
    try:
        ready = up.log()
        assert "DLedger group of 3" in ready
        assert "(master)" in ready
        send(up.address, 5)
        listing = admin(up.address, "clusterList").stdout
        assert listing.count("SLAVE") == 2
        (block,) = [
            b
            for b in blocks_of(README)
            if b.marker and "run by" in b.marker and Path(__file__).name in b.marker
        ]
        environment = {**os.environ}
        environment["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environment["PATH"]
        code = block.code.replace(README_NAMESRV, up.address)
        _run_shell(block.name, code, tmp_path, environment, up.log)
    finally:
        up.stop(timeout_s=30)
