"""Where a slave puts each metadata document it copies from its master: the broker's topic,
group, consumer offset and delay offset tables (`MetadataSync` does the fetching)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.ha.sync import MetadataSync, MetadataTargets
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.remoting.transport import RemotingClient
from pocketmq.runtime.clock import Clock


def slave_metadata_sync(
    client: RemotingClient,
    master_address: Callable[[], str | None],
    *,
    topics: TopicTable,
    offsets: ConsumerOffsetTable,
    replace_groups: Callable[[Any], Awaitable[None]],
    delay_delivery: DelayDelivery,
    clock: Clock,
    topics_changed: Callable[[], None],
) -> MetadataSync:
    """A sync that copies the master's tables into this slave's.

    Args:
        client: Asks the master.
        master_address: The master's address as last registered, or None.
        topics: Replaced when the master's data version differs.
        offsets: Replaced; progress committed here while the master was away goes back to it.
        replace_groups: Takes the master's subscription group document.
        delay_delivery: Its offsets are replaced and saved.
        clock: Time for the topics' data version.
        topics_changed: Called after the topics were replaced.
    """

    async def take_topics(document: Any) -> None:
        if document.get("dataVersion") != topics.data_version.to_json():
            topics.replace_all(document, clock.now_ms())
            topics_changed()

    async def take_offsets(document: Any) -> None:
        # Progress consumers committed here while the master was away goes back to it
        # first, so that the copy taken next does not roll it back.
        ahead = offsets.ahead_of(document)
        for group, topic, queue_id, offset in ahead:
            await sync.hand_back_offset(group, topic, queue_id, offset)
        offsets.replace_all(document)
        for group, topic, queue_id, offset in ahead:
            offsets.commit(group, topic, queue_id, offset)

    async def take_delay_offsets(document: Any) -> None:
        delay_delivery.offsets.load(document)
        delay_delivery.offsets.changed = True
        await delay_delivery.persist()

    sync = MetadataSync(
        client,
        master_address,
        MetadataTargets(take_topics, replace_groups, take_offsets, take_delay_offsets),
    )
    return sync
