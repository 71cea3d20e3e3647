"""The broker's metrics: what its request paths count and what its gauges read.

Counting follows RocketMQ 5's broker: a stored send adds to `rocketmq_messages_in_total`,
`rocketmq_throughput_in_total` and `rocketmq_message_size` once per request (a batch adds its
count), labelled by topic, message type and whether the topic is a system one; retry and
dead-letter topics are not counted as traffic. A pull that found messages adds to the `out`
counters and remembers how far the group pulled, which the lag gauges need (ready =
max - pulled, inflight = pulled - committed, lag = max - committed).

Gauges are read only when an exporter collects, from the broker's live tables.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from pocketmq.common import topic_names
from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TRANSACTION_PREPARED,
)
from pocketmq.observability import catalog
from pocketmq.observability.registry import Labels, MetricSource
from pocketmq.observability.rpc import RpcLatency

if TYPE_CHECKING:
    from pocketmq.broker.server import BrokerServer
    from pocketmq.store.message_store import MessageStore

STORAGE_LABELS = ("local", "disk")
_BOOL = ("false", "true")


def message_type(properties: str) -> str:
    """RocketMQ 5's `message_type` label of a send, from its encoded properties
    (`TopicMessageType.parseFromMessageProperty`): transaction, delay, fifo or normal."""
    # Most sends are normal: four scans that build no string rule the others out.
    if (
        PROPERTY_TRANSACTION_PREPARED not in properties
        and PROPERTY_DELAY_TIME_LEVEL not in properties
        and "TIMER_" not in properties
        and PROPERTY_SHARDING_KEY not in properties
    ):
        return "normal"
    if _has(properties, PROPERTY_TRANSACTION_PREPARED + "\x01true"):
        return "transaction"
    if any(_has(properties, name + "\x01") for name in _DELAY_PROPERTIES):
        return "delay"
    if _has(properties, PROPERTY_SHARDING_KEY + "\x01"):
        return "fifo"
    return "normal"


_DELAY_PROPERTIES = (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
)


def _has(properties: str, prefix: str) -> bool:
    """Whether an encoded property (`name\x01value\x02...`) starts with `prefix`."""
    return properties.startswith(prefix) or ("\x02" + prefix) in properties


def _is_traffic(topic: str) -> bool:
    return not topic.startswith(
        (topic_names.RETRY_GROUP_TOPIC_PREFIX, topic_names.DLQ_GROUP_TOPIC_PREFIX)
    )


def _system(topic: str, group: str = "") -> str:
    return _BOOL[topic_names.is_system_topic(topic) or group.startswith(_SYSTEM_GROUPS)]


_SYSTEM_GROUPS = ("CID_RMQ_SYS_", "TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "CID_ONSAPI_")


class BrokerMetrics:
    """Counters the request paths add to, and the gauges of one broker."""

    def __init__(self, source: MetricSource) -> None:
        self.source = source
        self.messages_in = source.counter(catalog.MESSAGES_IN)
        self.throughput_in = source.counter(catalog.THROUGHPUT_IN)
        self.message_size = source.histogram(catalog.MESSAGE_SIZE)
        self.messages_out = source.counter(catalog.MESSAGES_OUT)
        self.throughput_out = source.counter(catalog.THROUGHPUT_OUT)
        self.receipts = source.counter(catalog.DURABILITY_RECEIPTS)
        self.send_to_dlq = source.counter(catalog.SEND_TO_DLQ)
        self.commits = source.counter(catalog.COMMIT_MESSAGES)
        self.rollbacks = source.counter(catalog.ROLLBACK_MESSAGES)
        self.rpc = RpcLatency(source)
        self.pulled: dict[tuple[str, str, int], int] = {}
        """Next offset each (group, topic, queue) pulled from."""
        self._in_labels: dict[tuple[str, str], Labels | None] = {}
        """The labels of each (topic, message type) sent to; None: not counted as traffic."""
        self._out_labels: dict[tuple[str, str], Labels | None] = {}
        """The labels of each (topic, group) pulled by; None: not counted as traffic."""

    # -- request paths -----------------------------------------------------------------------
    def stored(self, topic: str, kind: str, count: int, wrote_bytes: int, durability: str) -> None:
        """A send stored `count` messages (`wrote_bytes` in the CommitLog)."""
        self.receipts.add((durability,), count)
        key = (topic, kind)
        labels = self._in_labels.get(key, ())
        if labels == ():
            labels = self._in_labels[key] = (
                (topic, kind, _system(topic)) if _is_traffic(topic) else None
            )
        if labels is None:
            return
        self.messages_in.add(labels, count)
        self.throughput_in.add(labels, wrote_bytes)
        self.message_size.record(labels, wrote_bytes / count)

    def pulled_messages(
        self, group: str, topic: str, queue_id: int, count: int, size: int, next_offset: int
    ) -> None:
        """A pull (or pop) handed out `count` messages of `size` bytes."""
        self.pulled[(group, topic, queue_id)] = next_offset
        key = (topic, group)
        labels = self._out_labels.get(key, ())
        if labels == ():
            labels = self._out_labels[key] = (
                (topic, group, _system(topic, group)) if _is_traffic(topic) else None
            )
        if labels is None:
            return
        self.messages_out.add(labels, count)
        self.throughput_out.add(labels, size)

    def dead_lettered(self, group: str, topic: str) -> None:
        self.send_to_dlq.add((group, topic, _system(topic, group)))

    def transaction_ended(self, topic: str, committed: bool) -> None:
        (self.commits if committed else self.rollbacks).add((topic,))

    # -- gauges ----------------------------------------------------------------------------
    def watch(self, broker: BrokerServer) -> None:
        """Registers the gauges that read `broker`'s tables (once, before it starts)."""
        source = self.source
        source.observe(catalog.TOPIC_NUMBER, lambda: [((), len(broker.topics.topics))])
        source.observe(catalog.GROUP_NUMBER, lambda: [((), _group_count(broker))])
        source.observe(catalog.BROKER_PERMISSION, lambda: [((), broker.config.broker_permission)])
        source.observe(catalog.PROCESSOR_WATERMARK, lambda: _watermarks(broker))
        source.observe(catalog.PRODUCER_CONNECTIONS, lambda: _producer_connections(broker))
        source.observe(catalog.CONSUMER_CONNECTIONS, lambda: _consumer_connections(broker))
        lag = _LagView(self, broker)
        source.observe(catalog.LAG_MESSAGES, lag.lag)
        source.observe(catalog.LAG_LATENCY, lag.lag_latency)
        source.observe(catalog.INFLIGHT_MESSAGES, lag.inflight)
        source.observe(catalog.QUEUEING_LATENCY, lag.queueing_latency)
        source.observe(catalog.READY_MESSAGES, lag.ready)
        source.observe(catalog.DLQ_DEPTH, lambda: _dlq_depths(broker))
        source.observe(catalog.STORAGE_SIZE, lambda: _disk(broker, used=True))
        source.observe(catalog.STORAGE_FREE, lambda: _disk(broker, used=False))
        source.observe(catalog.FLUSH_BEHIND, lambda: _store_value(broker, _flush_behind))
        source.observe(catalog.DISPATCH_BEHIND, lambda: _store_value(broker, _dispatch_behind))
        source.observe(catalog.MESSAGE_RESERVE_TIME, lambda: _store_value(broker, _reserve_time))
        source.observe(catalog.TIMER_BACKLOG, lambda: _timer_backlog(broker))
        source.observe(catalog.REPLICA_LAG_BYTES, lambda: _replica_lag(broker, latency=False))
        source.observe(catalog.REPLICA_LAG_LATENCY, lambda: _replica_lag(broker, latency=True))
        source.observe(catalog.RAFT_TERM, lambda: _raft(broker, "term"))
        source.observe(catalog.RAFT_COMMIT_INDEX, lambda: _raft(broker, "commitIndex"))
        source.observe(catalog.RAFT_LEADER_CHANGES, lambda: _raft(broker, "roleChanges"))


def _group_count(broker: BrokerServer) -> int:
    wiring = broker.wiring
    return len(wiring.admin_stats.groups.groups) if wiring is not None else 0


def _watermarks(broker: BrokerServer) -> list[tuple[Labels, float]]:
    """Requests waiting or running: RocketMQ reports its thread pools' queues; pocketmq has
    one event loop, so it reports held pulls and every request in flight."""
    server = broker.server
    if server is None:
        return []
    in_flight = sum(channel.in_flight for channel in server.channels)
    wiring = broker.wiring
    held = wiring.holds.held_count if wiring is not None else 0
    return [(("pull",), held), (("all",), in_flight)]


def _producer_connections(broker: BrokerServer) -> Iterator[tuple[Labels, float]]:
    counts: dict[Labels, int] = {}
    for clients in broker.clients.producer_groups.values():
        for client in clients.values():
            labels = (client.language, str(client.version), "remoting")
            counts[labels] = counts.get(labels, 0) + 1
    return iter(counts.items())


def _consumer_connections(broker: BrokerServer) -> Iterator[tuple[Labels, float]]:
    counts: dict[Labels, int] = {}
    for group, info in broker.clients.consumer_groups.items():
        mode = "push" if info.consume_type.name.endswith("PASSIVELY") else "pull"
        for client in info.clients.values():
            labels = (
                group,
                client.language,
                str(client.version),
                mode,
                "remoting",
                _system("", group),
            )
            counts[labels] = counts.get(labels, 0) + 1
    return iter(counts.items())


class _LagView:
    """RocketMQ's `ConsumerLagCalculator` over the committed and pulled offsets."""

    def __init__(self, metrics: BrokerMetrics, broker: BrokerServer) -> None:
        self.metrics = metrics
        self.broker = broker

    def _queues(self) -> Iterator[tuple[Labels, str, int, int, int, int]]:
        """(labels, topic, queue, max, committed, pulled) of every committed queue."""
        store = self.broker.store
        if store is None:
            return
        pulled = self.metrics.pulled
        for (topic, group), queues in self.broker.offsets.entries():
            retry = topic.startswith(topic_names.RETRY_GROUP_TOPIC_PREFIX)
            labels = (group, topic, _BOOL[retry], _system(topic, group))
            for queue_id, committed in queues.items():
                top = store.get_max_offset_in_queue(topic, queue_id)
                at = pulled.get((group, topic, queue_id), committed)
                yield labels, topic, queue_id, top, committed, min(max(at, committed), top)

    def _sum(self, pick: Callable[[int, int, int], int]) -> list[tuple[Labels, float]]:
        totals: dict[Labels, float] = {}
        for labels, _topic, _queue, top, committed, pulled in self._queues():
            totals[labels] = totals.get(labels, 0) + max(0, pick(top, committed, pulled))
        return list(totals.items())

    def lag(self) -> list[tuple[Labels, float]]:
        return self._sum(lambda top, committed, pulled: top - committed)

    def inflight(self) -> list[tuple[Labels, float]]:
        return self._sum(lambda top, committed, pulled: pulled - committed)

    def ready(self) -> list[tuple[Labels, float]]:
        return self._sum(lambda top, committed, pulled: top - pulled)

    def _age(self, from_pulled: bool) -> list[tuple[Labels, float]]:
        store = self.broker.store
        now_ms = self.broker.clock.now_ms()
        earliest: dict[Labels, float] = {}
        for labels, topic, queue_id, top, committed, pulled in self._queues():
            earliest.setdefault(labels, 0)
            at = pulled if from_pulled else committed
            if store is None or at >= top:
                continue
            stamp = store.get_message_store_timestamp(topic, queue_id, at)
            if stamp > 0 and (not earliest[labels] or stamp < earliest[labels]):
                earliest[labels] = stamp
        return [(labels, now_ms - stamp if stamp else 0) for labels, stamp in earliest.items()]

    def lag_latency(self) -> list[tuple[Labels, float]]:
        return self._age(from_pulled=False)

    def queueing_latency(self) -> list[tuple[Labels, float]]:
        return self._age(from_pulled=True)


def _dlq_depths(broker: BrokerServer) -> Iterable[tuple[Labels, float]]:
    store = broker.store
    if store is None:
        return []
    prefix = topic_names.DLQ_GROUP_TOPIC_PREFIX
    out = []
    for topic in broker.topics.topics:
        if topic.startswith(prefix):
            depth = sum(
                store.get_max_offset_in_queue(topic, queue)
                - store.get_min_offset_in_queue(topic, queue)
                for queue in store.queue_ids(topic)
            )
            out.append(((topic.removeprefix(prefix),), float(depth)))
    return out


def _disk(broker: BrokerServer, *, used: bool) -> list[tuple[Labels, float]]:
    try:
        usage = shutil.disk_usage(broker.store_config.store_path_root_dir)
    except OSError:
        return []
    return [(STORAGE_LABELS, float(usage.used if used else usage.free))]


def _store_value(
    broker: BrokerServer, read: Callable[[MessageStore], float]
) -> list[tuple[Labels, float]]:
    store = broker.store
    return [] if store is None else [(STORAGE_LABELS, float(read(store)))]


def _flush_behind(store: MessageStore) -> float:
    return max(0, store.max_phy_offset - store.commit_log.files.flushed_offset)


def _dispatch_behind(store: MessageStore) -> float:
    return max(0, store.max_phy_offset - store.dispatcher.reput_offset)


def _reserve_time(store: MessageStore) -> float:
    """How old the oldest kept message is (0 without messages)."""
    if store.min_phy_offset >= store.max_phy_offset:
        return 0
    stamp = store.store_timestamp_at(store.min_phy_offset)
    return max(0, store.clock.now_ms() - stamp) if stamp > 0 else 0


def _timer_backlog(broker: BrokerServer) -> list[tuple[Labels, float]]:
    waiting = 0
    if broker.delay_delivery is not None:
        waiting += broker.delay_delivery.backlog()
    if broker.timer_store is not None:
        waiting += broker.timer_store.backlog()
    return [((), float(waiting))]


def _replica_lag(broker: BrokerServer, *, latency: bool) -> list[tuple[Labels, float]]:
    """Per connected slave, from the HA master's status (Master/Slave and Controller mode)."""
    replication = getattr(broker.store, "replication", None)
    if replication is None or not hasattr(replication, "runtime_info"):
        return []
    return [
        ((c["addr"],), float(max(0, c["lagMs"] if latency else c["diff"])))
        for c in replication.runtime_info().get("haConnectionInfo", [])
    ]


def _raft(broker: BrokerServer, field: str) -> list[tuple[Labels, float]]:
    dledger = broker.dledger
    if dledger is None:
        return []
    status = dledger.status()
    return [((status["group"], status["selfId"]), float(status[field]))]
