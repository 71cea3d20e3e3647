"""Topic and consumer group creations and deletions that were answered survive SIGKILL of the
broker, as with RocketMQ (whose broker writes `topics.json` before it answers `updateTopic` or
`deleteTopic`, and `subscriptionGroup.json` before `updateSubGroup` or `deleteSubGroup`).

`pocketmq up`, with auto-creation off (so that no send could make a lost topic again), gets
`CREATIONS` creations at once from one admin client, then, every other round, deletions of
half of what the round before made; as soon as the last is answered the process is killed
with SIGKILL, then started again on the same data. `POCKETMQ_TOPIC_CRASH_ROUNDS` rounds (6 by
default), each on the data of the one before. In the end everything created and not deleted
must be listed (and each topic take a send), and nothing deleted may be listed. With the save
left to the background (topics before this test; either kind as a mutant), rounds lost the
changes whose save was still under way.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient, SubscriptionGroupSettings, TopicSettings
from pocketmq.client.aio import Producer
from pocketmq.client.message import Message, SendStatus
from pocketmq.testing.processes import ServerProcess, start_up_process

pytestmark = [pytest.mark.fault]

ROUNDS = int(os.environ.get("POCKETMQ_TOPIC_CRASH_ROUNDS", "6"))
CREATIONS = 50
CLUSTER = "DefaultCluster"


def start(tmp_path: Path, config: Path, name: str) -> ServerProcess:
    return start_up_process(tmp_path / "data", tmp_path / f"up-{name}.log", "-c", str(config))


async def create_topic(admin: AdminClient, name: str) -> None:
    await admin.create_topic(TopicSettings(name, 2, 2), cluster=CLUSTER)


async def delete_topic(admin: AdminClient, name: str) -> None:
    await admin.delete_topic(name, CLUSTER)


async def create_group(admin: AdminClient, name: str) -> None:
    await admin.update_subscription_group(SubscriptionGroupSettings(name), cluster=CLUSTER)


async def delete_group(admin: AdminClient, name: str) -> None:
    await admin.delete_subscription_group(name, cluster=CLUSTER)


async def listed_topics(admin: AdminClient, server: ServerProcess) -> set[str]:
    topics = set(await admin.topic_list())
    async with Producer("crash-check", namesrv=server.address) as producer:
        for name in sorted(topics - {CLUSTER}):
            if name.startswith("Crash"):
                result = await producer.send(Message(name, b"after the crash"))
                assert result.status is SendStatus.SEND_OK
    return topics


async def listed_groups(admin: AdminClient, server: ServerProcess) -> set[str]:
    (broker,) = await admin.targets(cluster=CLUSTER, broker=None)
    return set(await admin.subscription_groups(broker))


Change = Callable[[AdminClient, str], Awaitable[None]]
KINDS: dict[str, tuple[Change, Change, Callable[[AdminClient, ServerProcess], Awaitable[set[str]]]]]
KINDS = {
    "topics": (create_topic, delete_topic, listed_topics),
    "groups": (create_group, delete_group, listed_groups),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_answered_creations_and_deletions_survive_sigkill(kind: str, tmp_path: Path) -> None:
    create, delete, listed = KINDS[kind]
    config = tmp_path / "broker.properties"
    config.write_text("autoCreateTopicEnable=false\nautoCreateSubscriptionGroup=false\n")
    alive: list[str] = []
    deleted: list[str] = []

    async def change(server: ServerProcess, created: list[str], doomed: list[str]) -> None:
        """The creations all at once, then the deletions all at once; the kill follows the
        last answer at once."""
        async with AdminClient([server.address]) as admin:
            await asyncio.gather(*(create(admin, n) for n in created))
            await asyncio.gather(*(delete(admin, n) for n in doomed))
            server.kill()

    for round_ in range(ROUNDS):
        server = start(tmp_path, config, str(round_))
        created = [f"Crash{round_}x{i}" for i in range(CREATIONS)]
        # In even rounds half of the round before's go, and the kill follows the deletions;
        # in odd rounds it follows the creations.
        doomed = alive[-CREATIONS::2] if round_ % 2 == 0 else []
        try:
            asyncio.run(change(server, created, doomed))
        finally:
            server.kill()
        alive = [n for n in alive if n not in doomed] + created
        deleted += doomed

    server = start(tmp_path, config, "last")
    try:

        async def check() -> set[str]:
            async with AdminClient([server.address]) as admin:
                return await listed(admin, server)

        names = asyncio.run(check())
        assert [n for n in alive if n not in names] == []
        assert [n for n in deleted if n in names] == []
    finally:
        server.stop()
