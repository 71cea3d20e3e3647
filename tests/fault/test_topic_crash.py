"""Topic creations and deletions that were answered survive SIGKILL of the broker, as with
RocketMQ (whose broker writes `topics.json` before it answers `updateTopic` or `deleteTopic`).

`pocketmq up`, with auto-creation off (so that no send could make a lost topic again), gets
`TOPICS` creations at once from one admin client, then, every other round, deletions of half
the topics the round before made; as soon as the last is answered the process is killed with
SIGKILL, then started again on the same data. `POCKETMQ_TOPIC_CRASH_ROUNDS` rounds (6 by
default), each on the data of the one before. In the end every topic created and not deleted
must be listed and take a send, and no deleted topic may be listed. With the save left to the
background (as before this test), rounds lost the changes whose save was still under way.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Producer
from pocketmq.client.message import Message, SendStatus
from pocketmq.testing.processes import ServerProcess, start_up_process

pytestmark = [pytest.mark.fault]

ROUNDS = int(os.environ.get("POCKETMQ_TOPIC_CRASH_ROUNDS", "6"))
TOPICS = 50
CLUSTER = "DefaultCluster"


def start(tmp_path: Path, config: Path, name: str) -> ServerProcess:
    return start_up_process(tmp_path / "data", tmp_path / f"up-{name}.log", "-c", str(config))


async def change(server: ServerProcess, created: list[str], doomed: list[str]) -> None:
    """The creations of `created` all at once, then the deletions of `doomed` all at once; the
    kill follows the last answer at once."""
    async with AdminClient([server.address]) as admin:
        await asyncio.gather(
            *(admin.create_topic(TopicSettings(n, 2, 2), cluster=CLUSTER) for n in created)
        )
        await asyncio.gather(*(admin.delete_topic(n, CLUSTER) for n in doomed))
        server.kill()


def test_answered_topic_creations_and_deletions_survive_sigkill(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("autoCreateTopicEnable=false\n")
    alive: list[str] = []
    deleted: list[str] = []
    for round_ in range(ROUNDS):
        server = start(tmp_path, config, str(round_))
        created = [f"Crash{round_}x{i}" for i in range(TOPICS)]
        # In even rounds half of the round before's topics go, and the kill follows the
        # deletions; in odd rounds it follows the creations.
        doomed = alive[-TOPICS::2] if round_ % 2 == 0 else []

        try:
            asyncio.run(change(server, created, doomed))
        finally:
            server.kill()
        alive = [n for n in alive if n not in doomed] + created
        deleted += doomed

    server = start(tmp_path, config, "last")
    try:

        async def listed() -> set[str]:
            async with AdminClient([server.address]) as admin:
                topics = set(await admin.topic_list())
            async with Producer("crash-check", namesrv=server.address) as producer:
                for name in sorted(topics & set(alive)):
                    result = await producer.send(Message(name, b"after the crash"))
                    assert result.status is SendStatus.SEND_OK
            return topics

        topics = asyncio.run(listed())
        assert [n for n in alive if n not in topics] == []
        assert [n for n in deleted if n in topics] == []
    finally:
        server.stop()
