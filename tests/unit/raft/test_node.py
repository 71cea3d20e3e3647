"""The Raft driver over any state machine: a proposal resolves with what applying it returned,
a read barrier waits for the state machine, and a restart restores it from the snapshot."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pocketmq.common.codes import ResponseCode
from pocketmq.raft.node import NodeSettings, NotLeaderError, RaftNode
from pocketmq.raft.state_machine import Applied
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RemotingClient
from pocketmq.testing import free_port

OWNER_CODE = 60001


class Counter:
    """Sums the integers it is given; returns the running total."""

    def __init__(self) -> None:
        self.total = 0
        self.commands: list[tuple[int, bytes]] = []

    def apply(self, index: int, command: bytes) -> int:
        self.commands.append((index, command))
        if command:
            self.total += int(command)
        return self.total

    def snapshot(self) -> bytes:
        return str(self.total).encode()

    def restore(self, image: bytes) -> None:
        self.total = int(image) if image else 0


def settings(directory: Path, port: int, **overrides: int) -> NodeSettings:
    return NodeSettings(1, {1: f"127.0.0.1:{port}"}, directory, tick_ms=5, **overrides)


async def elected(node: RaftNode[int]) -> None:
    async with asyncio.timeout(10):
        while True:
            try:
                await node.read_barrier()
                return
            except NotLeaderError:
                await asyncio.sleep(0.01)


def test_a_proposal_resolves_with_the_state_machines_result(tmp_path: Path) -> None:
    async def scenario() -> None:
        counter = Counter()
        node = RaftNode(settings(tmp_path, free_port()), counter)
        await node.start()
        try:
            await elected(node)
            first = await node.propose(b"5")
            second = await node.propose(b"7")
            assert second == Applied(first.index + 1, 12)
            assert first.result == 5
            assert await node.read_barrier() >= second.index
            assert node.applied == second.index
            assert counter.commands[0] == (1, b"")  # the leader's first entry of its term
        finally:
            await node.stop()

    asyncio.run(scenario())


def test_a_restart_restores_the_state_machine_from_its_snapshot(tmp_path: Path) -> None:
    port = free_port()

    async def first_run() -> None:
        node = RaftNode(settings(tmp_path, port, snapshot_every=3), Counter())
        await node.start()
        try:
            await elected(node)
            for _ in range(5):
                await node.propose(b"1")
        finally:
            await node.stop()

    async def second_run() -> None:
        counter = Counter()
        node = RaftNode(settings(tmp_path, port, snapshot_every=3), counter)
        snapshot_index = node.raft.log.snapshot.index
        assert snapshot_index >= 3
        assert node.applied == snapshot_index
        await node.start()
        try:
            await elected(node)
            assert (await node.propose(b"10")).result == 15
        finally:
            await node.stop()

    asyncio.run(first_run())
    asyncio.run(second_run())


def test_the_owners_handlers_are_served_beside_the_raft_messages(tmp_path: Path) -> None:
    async def answer(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=b"owner")

    async def scenario() -> None:
        port = free_port()
        node = RaftNode(settings(tmp_path, port), Counter(), {OWNER_CODE: answer})
        client = RemotingClient()
        await node.start()
        try:
            request = RemotingCommand.request(OWNER_CODE)
            response = await client.invoke(f"127.0.0.1:{port}", request, 3.0)
            assert response.body == b"owner"
        finally:
            await client.close()
            await node.stop()

    asyncio.run(scenario())
