"""What a client derives from topic routes: the queues it may write, the queues it may read, and
where each broker group lives.

`publish_queues` follows `MQClientInstance.topicRouteData2TopicPublishInfo`: writable queues of
brokers that have a master, ordered by broker name; an ordered topic's `orderTopicConf`
(`broker-a:4;broker-b:4`) fixes the list instead, so a sharding key keeps its queue while a
broker is merely slow. `subscribe_queues` lists readable queues
(`topicRouteData2TopicSubscribeInfo`).

`RouteCache` keeps the latest route per topic and the broker address table built from all of
them; it does not fetch (the client instance does) and has no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from pocketmq.client.message import MessageQueue
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.route import MASTER_ID, TopicRouteData


@dataclass(frozen=True, slots=True)
class TopicPublishInfo:
    """The queues a producer chooses from for one topic.

    Attributes:
        topic: The topic.
        queues: Writable queues on brokers with a master, in RocketMQ's order.
        order_topic: Whether the route carries an `orderTopicConf` (strictly ordered topic).
        awaiting_master: Some broker group of the topic's route has no master now (it
            failed; a DLedger group is electing another).
    """

    topic: str
    queues: tuple[MessageQueue, ...]
    order_topic: bool = False
    awaiting_master: bool = False


def publish_queues(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """The producer's view of `route`."""
    if route.order_topic_conf:
        queues: list[MessageQueue] = []
        for item in route.order_topic_conf.split(";"):
            name, _, count = item.partition(":")
            if name and count.strip().isdigit():
                queues.extend(MessageQueue(topic, name, i) for i in range(int(count)))
        return TopicPublishInfo(topic, tuple(queues), order_topic=True)
    masters = {data.broker_name for data in route.broker_datas if data.broker_addrs.get(MASTER_ID)}
    queues = [
        MessageQueue(topic, data.broker_name, queue_id)
        for data in sorted(route.queue_datas, key=lambda q: q.broker_name)
        if data.perm & PERM_WRITE and data.broker_name in masters
        for queue_id in range(data.write_queue_nums)
    ]
    # A NameServer drops a group's queues with its master, and keeps its slaves.
    awaiting = any(MASTER_ID not in data.broker_addrs for data in route.broker_datas)
    return TopicPublishInfo(topic, tuple(queues), awaiting_master=awaiting)


def subscribe_queues(topic: str, route: TopicRouteData) -> list[MessageQueue]:
    """The readable queues of `route`, sorted."""
    return sorted(
        MessageQueue(topic, data.broker_name, queue_id)
        for data in route.queue_datas
        if data.perm & PERM_READ
        for queue_id in range(data.read_queue_nums)
    )


class RouteCache:
    """The latest route of each topic a client uses, and the broker addresses they name."""

    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.publish: dict[str, TopicPublishInfo] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}

    def update(self, topic: str, route: TopicRouteData) -> bool:
        """Stores `route` for `topic`; returns whether it differs from the one held."""
        changed = self.routes.get(topic) != route
        self.routes[topic] = route
        self.publish[topic] = publish_queues(topic, route)
        if changed:
            # Rebuilt from every route: a broker that left the cluster must not keep an
            # address here, or sends would go on trying a dead one.
            self.broker_addrs = {
                data.broker_name: dict(data.broker_addrs)
                for held in self.routes.values()
                for data in held.broker_datas
            }
        return changed

    def master_address(self, broker_name: str) -> str | None:
        """The master's address of a broker group, if a route named it."""
        return self.broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def any_address(self, broker_name: str) -> str | None:
        """The master's address, else the lowest-id slave's (reads survive a master's loss)."""
        addrs = self.broker_addrs.get(broker_name) or {}
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        return addrs[min(addrs)] if addrs else None

    def read_address(self, broker_name: str, broker_id: int) -> str | None:
        """Where to pull from: the replica the broker suggested (`suggestWhichBrokerId`) if
        the route names it, else the master, else any slave (`findBrokerAddressInSubscribe`)."""
        addrs = self.broker_addrs.get(broker_name) or {}
        return addrs.get(broker_id) or self.any_address(broker_name)

    def all_broker_addresses(self, *, masters_only: bool = False) -> list[str]:
        """Every known broker address (consumers heartbeat all of them, producers only the
        masters, as RocketMQ's clients do)."""
        return sorted(
            {
                address
                for addrs in self.broker_addrs.values()
                for broker_id, address in addrs.items()
                if not masters_only or broker_id == MASTER_ID
            }
        )
