"""Creates the example's topics on a cluster when they are missing (existing ones stay as
they are)."""

from __future__ import annotations

import asyncio

from pocketmq.client.admin import AdminClient, TopicSettings


def ensure_topics(namesrv: str, topics: list[str], *, cluster: str, queues: int) -> list[str]:
    """Creates each of `topics` that the NameServer does not route yet, with `queues` read and
    write queues on every master of `cluster`; returns the ones it created."""

    async def ensure() -> list[str]:
        async with AdminClient(namesrv.split(";"), timeout_s=10.0) as admin:
            known = set(await admin.topic_list())
            created = [topic for topic in topics if topic not in known]
            for topic in created:
                await admin.create_topic(
                    TopicSettings(topic, read_queue_nums=queues, write_queue_nums=queues),
                    cluster=cluster,
                )
                if not await admin.wait_for_route(topic, timeout_s=10.0):
                    raise RuntimeError(f"topic {topic} was created but no NameServer routes it")
            return created

    return asyncio.run(ensure())
