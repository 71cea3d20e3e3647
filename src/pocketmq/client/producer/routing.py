"""Where a producer's sends go: a topic's writable queues and their brokers' masters.

A topic the NameServer does not know yet borrows the auto-create topic's route (the broker
creates the topic on the first send, with `defaultTopicQueueNums` queues); a route is asked
again when a send found it stale.
"""

from __future__ import annotations

import logging

from pocketmq.client.errors import ConnectionFailedError, RocketMQError, TopicNotFoundError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.producer.wire import AUTO_CREATE_TOPIC
from pocketmq.client.route_cache import TopicPublishInfo, publish_queues
from pocketmq.common.codes import ResponseCode

log = logging.getLogger(__name__)


class PublishRoutes:
    """A producer's view of its topics' routes, kept by its client instance."""

    def __init__(self, instance: ClientInstance, default_topic_queue_nums: int) -> None:
        self._instance = instance
        self._default_topic_queue_nums = default_topic_queue_nums

    async def publish_info(self, topic: str) -> TopicPublishInfo:
        info = self._instance.routes.publish.get(topic)
        if info is not None and info.queues:
            return info
        self._instance.watch_topic(topic)
        try:
            await self._instance.fetch_route(topic)
        except TopicNotFoundError:
            return await self._borrowed(topic, fresh=False)
        await self._instance.send_heartbeats()
        return self._instance.routes.publish[topic]

    async def _borrowed(self, topic: str, *, fresh: bool) -> TopicPublishInfo:
        """Queues for a topic the broker will create on the first send, taken from the
        auto-create topic's route (re-asked when `fresh`).

        Raises:
            TopicNotFoundError: no broker group would create it, now or after an election.
        """
        if fresh:
            default = await self._instance.fetch_route(AUTO_CREATE_TOPIC)
        else:
            default = await self._instance.route(AUTO_CREATE_TOPIC)
        borrowed = publish_queues(topic, default)
        # The broker creates the topic with this many queues (`defaultTopicQueueNums`).
        queues = tuple(q for q in borrowed.queues if q.queue_id < self._default_topic_queue_nums)
        if not queues and not borrowed.awaiting_master:
            raise TopicNotFoundError(
                f"topic {topic} does not exist: create it with `pocketmq admin updateTopic "
                f"-t {topic} -c <cluster>`, or enable autoCreateTopicEnable on the broker",
                ResponseCode.TOPIC_NOT_EXIST,
            )
        if queues:
            log.info("topic %s has no route yet: sending through %s", topic, AUTO_CREATE_TOPIC)
        return TopicPublishInfo(topic, queues, awaiting_master=not queues)

    async def master_address(self, broker_name: str, topic: str | None = None) -> str:
        address = self._instance.routes.master_address(broker_name)
        if address is None and topic is not None:  # a broker of a route not fetched yet
            await self._instance.fetch_route(topic)
            address = self._instance.routes.master_address(broker_name)
        if address is None:
            raise ConnectionFailedError(
                f"broker {broker_name} has no master: it may be down or not registered"
            )
        return address

    async def refreshed(
        self, topic: str, current: TopicPublishInfo, *, keep_empty: bool = False
    ) -> TopicPublishInfo:
        """The topic's route asked again; `current` when that fails or (unless
        `keep_empty`) names no writable queue."""
        try:
            await self._instance.fetch_route(topic)
        except TopicNotFoundError:
            try:
                return await self._borrowed(topic, fresh=True)
            except RocketMQError:
                return current
        except RocketMQError:
            return current
        refreshed = self._instance.routes.publish.get(topic)
        if refreshed is None or not (refreshed.queues or keep_empty):
            return current
        return refreshed
