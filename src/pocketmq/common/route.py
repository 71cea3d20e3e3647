"""Routes as clients and NameServers exchange them: queues, broker groups, clusters, topics.

RocketMQ's `TopicRouteData`, `QueueData`, `BrokerData`, `ClusterInfo`, `TopicList` and the
broker's per-topic config as registered; their JSON forms are in `route_json.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Final

from pocketmq.common.constants import PERM_READ, PERM_WRITE

MASTER_ID: Final = 0
"""The broker id of a group's master; slaves have ids above it."""


@dataclass(slots=True)
class BrokerTopicConfig:
    """One topic as a broker reports it when it registers (`TopicConfig`)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_sys_flag: int = 0
    topic_filter_type: str = "SINGLE_TAG"
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class QueueData:
    """How one broker serves one topic (`QueueData`)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0


@dataclass(slots=True)
class BrokerData:
    """One broker group (`BrokerData`): its addresses by broker id, 0 being the master."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def copy(self) -> BrokerData:
        return replace(self, broker_addrs=dict(self.broker_addrs))


@dataclass(slots=True)
class TopicRouteData:
    """What a client learns about a topic (`TopicRouteData`)."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None


@dataclass(slots=True)
class ClusterInfo:
    """Every broker group and cluster (`ClusterInfo`, GET_BROKER_CLUSTER_INFO)."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)


@dataclass(slots=True)
class TopicList:
    """A list of topic names (`TopicList`), with one broker address for system topic lists."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None
