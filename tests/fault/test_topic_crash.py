"""A topic whose creation was answered survives SIGKILL of the broker, as with RocketMQ (whose
broker writes `topics.json` before it answers `updateTopic`).

`pocketmq up`, with auto-creation off (so that no send could make a lost topic again), gets
`TOPICS` creations at once from one admin client; as soon as the last is answered the process
is killed with SIGKILL, then started again on the same data: every topic must be there, routed
and writable. `POCKETMQ_TOPIC_CRASH_ROUNDS` rounds (3 by default), each on the data of the one
before. With the save left to the background (as before this test), a round lost the topics
of the saves still under way.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient, TopicSettings
from pocketmq.client.aio import Producer
from pocketmq.client.message import Message, SendStatus
from pocketmq.testing.processes import start_up_process

pytestmark = [pytest.mark.fault]

ROUNDS = int(os.environ.get("POCKETMQ_TOPIC_CRASH_ROUNDS", "3"))
TOPICS = 50


def test_answered_topic_creations_survive_sigkill(tmp_path: Path) -> None:
    config = tmp_path / "broker.properties"
    config.write_text("autoCreateTopicEnable=false\n")
    created: list[str] = []
    for round_ in range(ROUNDS):
        server = start_up_process(
            tmp_path / "data", tmp_path / f"up-{round_}.log", "-c", str(config)
        )
        try:
            names = [f"Crash{round_}x{i}" for i in range(TOPICS)]

            async def create(namesrv: str = server.address, names: list[str] = names) -> None:
                async with AdminClient([namesrv]) as admin:
                    await asyncio.gather(
                        *(admin.create_topic(TopicSettings(n, 2, 2), cluster="DefaultCluster")
                          for n in names)
                    )  # fmt: skip

            asyncio.run(create())
        finally:
            server.kill()
        created += names

    server = start_up_process(tmp_path / "data", tmp_path / "up-last.log", "-c", str(config))
    try:

        async def check() -> list[str]:
            async with AdminClient([server.address]) as admin:
                listed = set(await admin.topic_list())
            async with Producer("crash-check", namesrv=server.address) as producer:
                for name in created:
                    if name in listed:
                        result = await producer.send(Message(name, b"after the crash"))
                        assert result.status is SendStatus.SEND_OK
            return [name for name in created if name not in listed]

        assert asyncio.run(check()) == []
    finally:
        server.stop()
