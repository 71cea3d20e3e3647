"""The two-masters-two-slaves example configurations work as written (only ports and data
directories moved, by command-line flags), and `pocketmq up --slaves 1` runs a pair."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pocketmq.client.aio import Message, Producer, SendStatus
from pocketmq.testing import (
    ServerProcess,
    async_wait_until,
    free_port_pair,
    start_server_process,
    wait_until,
)
from tests.integration.test_master_slave import admin

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ha"


def wait_for_two_synced_pairs(namesrv: str) -> list[dict[str, object]]:
    status: list[dict[str, object]] = []

    def synced() -> list[dict[str, object]] | None:
        status[:] = json.loads(admin(namesrv, "haStatus", "-c", "DefaultCluster", "--json"))
        links = [c for b in status if b.get("master") for c in b.get("haConnectionInfo", [])]
        return list(status) if len(links) == 2 and all(c["diff"] == 0 for c in links) else None

    return wait_until(synced, "two slaves in sync", poll_s=0.2, describe=lambda: status)


@pytest.mark.parametrize("variant", ["2m-2s-sync", "2m-2s-async"])
def test_the_example_cluster_replicates_both_groups(variant: str, tmp_path: Path) -> None:
    namesrv = start_server_process(["namesrv", "--port", "0"], tmp_path / "namesrv.log")
    brokers: list[ServerProcess] = []
    try:
        for config in sorted((EXAMPLES / variant).glob("*.properties")):
            args = ["broker", "-c", str(config), "-n", namesrv.address]
            args += ["--port", str(free_port_pair()), "--data-dir", str(tmp_path / config.stem)]
            brokers.append(start_server_process(args, tmp_path / f"{config.stem}.log"))

        async def send() -> set[str]:
            placed = set()
            async with Producer("example", namesrv=namesrv.address) as producer:
                for i in range(40):
                    result = await producer.send(Message("ExampleTopic", f"m{i}".encode()))
                    assert result.status is SendStatus.SEND_OK
                    if variant == "2m-2s-sync":
                        assert (result.durability, result.replicas) == ("FLUSHED", 2)
                    placed.add(result.queue.broker_name)
            return placed

        admin(namesrv.address, "updateTopic", "-t", "ExampleTopic", "-c", "DefaultCluster")
        wait_for_two_synced_pairs(namesrv.address)
        assert asyncio.run(send()) == {"broker-a", "broker-b"}
        wait_for_two_synced_pairs(namesrv.address)
        listing = admin(namesrv.address, "clusterList")
        assert listing.count("SLAVE") == 2
    finally:
        for broker in brokers:
            broker.stop(timeout_s=15)
        namesrv.stop(timeout_s=10)


def test_up_with_a_slave_runs_a_replicated_pair(tmp_path: Path) -> None:
    up = start_server_process(
        ["up", "--namesrv-port", "0", "--broker-port", "0", "--slaves", "1", "--sync",
         "--data-dir", str(tmp_path / "up")],
        tmp_path / "up.log",
    )  # fmt: skip
    try:

        async def send() -> None:
            async with Producer("pair", namesrv=up.address) as producer:

                async def replicated() -> bool:
                    return (await producer.send(Message("Pair", b"x"))).replicas == 2

                await async_wait_until(replicated, "a send acknowledged by the slave", poll_s=0.1)

        asyncio.run(send())
        (master,) = [b for b in json.loads(admin(up.address, "haStatus", "-c", "DefaultCluster",
                                                  "--json")) if b.get("master")]  # fmt: skip
        assert len(master["haConnectionInfo"]) == 1
    finally:
        up.stop(timeout_s=15)
