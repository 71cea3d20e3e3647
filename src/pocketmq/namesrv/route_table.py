"""The NameServer's route table (RocketMQ's `RouteInfoManager`): brokers, topics, liveness.

Owns five tables, as RocketMQ keeps them:

* cluster table: cluster name -> broker names;
* broker table: broker name -> `BrokerData` (cluster, name, `{brokerId: addr}`, 0 = master);
* topic table: topic -> `{brokerName: QueueData}`;
* live table: broker addr -> `BrokerLiveInfo` (last update, data version, HA addr, channel id;
  develop keys it by cluster and addr, which only differs if two clusters share an address);
* filter server table: broker addr -> filter server addrs.

Pure: no sockets, no asyncio, no clock. Time arrives as `now_ms` arguments; the server runs
`scan_not_active` every few seconds (RocketMQ develop: 5 s) and calls `on_channel_closed` when a
broker's connection drops. Answers are copies, so callers may keep or change them freely.

Invariants kept after every call:

* a broker name in the broker table has at least one address, and its cluster lists it;
* every address in the broker table is in the live table (and the other way round);
* within a group an address holds one broker id only (a slave promoted in place moves to 0);
* a topic in the topic table has at least one queue entry, each for a listed group.

Deliberately missing: static topics (`topicQueueMappingInfo`), NOTIFY_MIN_BROKER_ID_CHANGE
pushes and the acting-master rewrite of routes (`supportActingMaster`, default off), and the
develop quirk that refuses a first registration carrying exactly one topic.

Deliberately different: a registration from another address for a broker name and id whose
holder is still live (same `stateVersion`) is refused (`RegisterResult.slot_holder_addr`)
instead of replacing the holder, so a mistyped `brokerName` cannot hijack a running broker.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.data_version import DataVersion
from pocketmq.common.route import (
    MASTER_ID,
    BrokerData,
    BrokerTopicConfig,
    ClusterInfo,
    QueueData,
    TopicList,
    TopicRouteData,
)

BROKER_CHANNEL_EXPIRED_TIME_MS: Final = 120_000
"""A broker silent this long is dropped (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`)."""
NAMESPACE_ORDER_TOPIC_CONFIG: Final = "ORDER_TOPIC_CONFIG"
"""KV namespace of `brokerName:queueNum;...` strings, sent as a route's `orderTopicConf`."""


@dataclass(slots=True)
class BrokerLiveInfo:
    """Liveness of one broker address (`BrokerLiveInfo`)."""

    cluster: str
    last_update_ms: int
    data_version: DataVersion
    ha_server_addr: str
    channel_id: int | None = None
    heartbeat_timeout_ms: int | None = None
    """The broker's own `heartbeatTimeoutMillis`; None means the scan's default."""


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """The answer to REGISTER_BROKER (`RegisterBrokerResult`).

    `master_addr` and `ha_server_addr` are filled for a slave whose master is alive.
    `accepted` is False when a broker with a newer `stateVersion` already holds that broker id;
    RocketMQ then answers SUCCESS with an empty header and changes nothing else. It is also
    False, with `slot_holder_addr` set, when a live broker at another address holds the id.
    """

    ha_server_addr: str | None = None
    master_addr: str | None = None
    accepted: bool = True
    slot_holder_addr: str | None = None
    """Set when another live address already holds this broker name and id: the registration
    changed nothing, and the NameServer answers it with an error naming that address."""


class RouteTable:
    """Brokers, topics and liveness as one NameServer sees them (`RouteInfoManager`)."""

    def __init__(
        self,
        *,
        delete_topic_with_broker_registration: bool = False,
        broker_expiry_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS,
    ) -> None:
        """Creates an empty table.

        Args:
            delete_topic_with_broker_registration: `deleteTopicWithBrokerRegistration`: when a
                master registers, forget its topics that its topic table no longer lists.
            broker_expiry_ms: how long a silent broker keeps its slot against a registration
                from another address (the server's `brokerChannelExpiredTime`).
        """
        self._delete_topic_with_registration = delete_topic_with_broker_registration
        self._broker_expiry_ms = broker_expiry_ms
        self._cluster_addr_table: dict[str, set[str]] = {}
        self._broker_addr_table: dict[str, BrokerData] = {}
        self._topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self._broker_live_table: dict[str, BrokerLiveInfo] = {}
        self._filter_server_table: dict[str, list[str]] = {}

    # ---- registration -------------------------------------------------------------------

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        topic_configs: Mapping[str, BrokerTopicConfig] | None,
        data_version: DataVersion | Mapping[str, int] | None,
        now_ms: int,
        channel_id: int | None = None,
        *,
        filter_server_list: Sequence[str] | None = None,
        heartbeat_timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        zone_name: str | None = None,
    ) -> RegisterResult:
        """Records a broker's registration (REGISTER_BROKER), as `registerBroker` does.

        Queue data comes only from the master (id 0), or, for brokers that send
        `enableActingMaster`, from the smallest-id slave with its write permission wiped. A
        topic's queue data is (re)written on a first registration, on a changed data version,
        or when the topic table lacks this broker for it (after a delete_topic).

        Args:
            cluster: `clusterName`.
            broker_addr: `brokerAddr`, the address clients use.
            broker_name: `brokerName`, the group name shared by master and slaves.
            broker_id: `brokerId`: 0 for the master, > 0 for slaves.
            ha_server_addr: `haServerAddr`, handed to this group's slaves.
            topic_configs: The broker's `topicConfigTable`; None when the body was empty.
            data_version: The version of that table (a `DataVersion` or its JSON object).
            now_ms: The current time; liveness counts from it.
            channel_id: The connection the registration came on, for `on_channel_closed`.
            filter_server_list: None leaves filter servers alone; empty removes them.
            heartbeat_timeout_ms: The broker's `heartbeatTimeoutMillis`, if it sent one.
            enable_acting_master: The header of that name; None means an old broker.
            zone_name: The `__ZONE_NAME` ext field.

        Returns:
            The master's addresses for a slave, or `accepted=False` when a newer registration
            (higher `stateVersion`) already holds this broker id under another address, or
            `accepted=False` with `slot_holder_addr` when a live broker at another address
            holds it (see `_live_slot_holder`).
        """
        version = _as_data_version(data_version)
        holder = self._live_slot_holder(broker_name, broker_id, broker_addr, version, now_ms)
        if holder is not None:
            return RegisterResult(accepted=False, slot_holder_addr=holder)
        self._cluster_addr_table.setdefault(cluster, set()).add(broker_name)
        broker_data = self._broker_addr_table.get(broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(cluster, broker_name)
            self._broker_addr_table[broker_name] = broker_data
        broker_data.enable_acting_master = bool(enable_acting_master)
        broker_data.zone_name = zone_name
        addrs = broker_data.broker_addrs

        # A slave switched to master in place: the same address must not stay under its old id.
        for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
            del addrs[other_id]

        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            old_live = self._broker_live_table.get(old_addr)
            if old_live is not None and old_live.data_version.state_version > version.state_version:
                self._maybe_drop_live(broker_addr)
                return RegisterResult(accepted=False)

        addrs[broker_id] = broker_addr
        register_first = register_first or old_addr is None
        if old_addr is not None and old_addr != broker_addr:
            # RocketMQ keeps the replaced address's liveness until it expires; an address no
            # group lists has nothing left to keep alive.
            self._maybe_drop_live(old_addr)

        is_master = broker_id == MASTER_ID
        is_prime_slave = (
            enable_acting_master is not None and not is_master and broker_id == min(addrs)
        )
        if topic_configs is not None and (is_master or is_prime_slave):
            self._take_topics(
                broker_name, broker_addr, topic_configs, version, register_first, is_prime_slave
            )

        self._broker_live_table[broker_addr] = BrokerLiveInfo(
            cluster=cluster,
            last_update_ms=now_ms,
            data_version=version,
            ha_server_addr=ha_server_addr,
            channel_id=channel_id,
            heartbeat_timeout_ms=heartbeat_timeout_ms,
        )
        if filter_server_list is not None:
            if filter_server_list:
                self._filter_server_table[broker_addr] = list(filter_server_list)
            else:
                self._filter_server_table.pop(broker_addr, None)

        if not is_master:
            master_addr = addrs.get(MASTER_ID)
            master_live = self._broker_live_table.get(master_addr) if master_addr else None
            if master_live is not None:
                return RegisterResult(master_live.ha_server_addr, master_addr)
        return RegisterResult()

    def _live_slot_holder(
        self,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        version: DataVersion,
        now_ms: int,
    ) -> str | None:
        """The other, still live address holding (broker_name, broker_id), if any.

        RocketMQ lets the newcomer replace it, so a copied or typo'd `brokerName` silently
        takes over a running broker's routes. Here the holder keeps its slot until it expires
        (the scan's rule) or its connection closes; a different `stateVersion` (controller
        mode) keeps RocketMQ's rule.
        """
        broker_data = self._broker_addr_table.get(broker_name)
        holder = broker_data.broker_addrs.get(broker_id) if broker_data else None
        if holder is None or holder == broker_addr:
            return None
        live = self._broker_live_table.get(holder)
        if live is None or version.state_version != live.data_version.state_version:
            return None  # a controller's newer epoch moves it; an older one is ignored below
        if live.last_update_ms + (live.heartbeat_timeout_ms or self._broker_expiry_ms) < now_ms:
            return None
        return holder

    def _take_topics(
        self,
        broker_name: str,
        broker_addr: str,
        topic_configs: Mapping[str, BrokerTopicConfig],
        version: DataVersion,
        register_first: bool,
        is_prime_slave: bool,
    ) -> None:
        if self._delete_topic_with_registration:
            for topic in list(self._topic_queue_table):
                if topic not in topic_configs:
                    self._remove_queue_data(topic, broker_name)
        version_changed = self.is_broker_data_changed(broker_addr, version)
        for name, config in topic_configs.items():
            known = self._topic_queue_table.get(name, {})
            if not (register_first or version_changed or broker_name not in known):
                continue
            perm = config.perm & ~PERM_WRITE if is_prime_slave else config.perm
            queue_data = QueueData(
                broker_name,
                config.read_queue_nums,
                config.write_queue_nums,
                perm,
                config.topic_sys_flag,
            )
            self._topic_queue_table.setdefault(name, {})[broker_name] = queue_data

    def register_topic(self, topic: str, queue_datas: Sequence[QueueData]) -> bool:
        """Adds a route for a topic nobody registered yet (REGISTER_TOPIC_IN_NAMESRV).

        Returns:
            False (and changes nothing) when the topic exists, `queue_datas` is empty, or it
            names a broker this table does not know.
        """
        if not queue_datas or topic in self._topic_queue_table:
            return False
        if any(q.broker_name not in self._broker_addr_table for q in queue_datas):
            return False
        self._topic_queue_table[topic] = {q.broker_name: replace(q) for q in queue_datas}
        return True

    def unregister_broker(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> None:
        """Forgets one broker address (UNREGISTER_BROKER), as develop's `unRegisterBroker`.

        The address is removed under whatever id it holds (develop matches by address, so
        `broker_id` only mirrors the request header), and from every cluster that lists the
        group once the group's last address goes (so `cluster` does too). When the last address
        goes, the group's topics go with it; when only the master goes, the topics stay for the
        slaves to serve reads, and lose write permission if the group runs with acting masters.

        Args:
            cluster: `clusterName` of the request.
            broker_addr: The address to forget.
            broker_name: The group it belongs to.
            broker_id: `brokerId` of the request.
        """
        broker_data = self._broker_addr_table.get(broker_name)
        if broker_data is not None:
            for found_id in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                del broker_data.broker_addrs[found_id]
        self._maybe_drop_live(broker_addr)
        if broker_data is None or self._forget_empty_broker(broker_data):
            return
        if broker_data.enable_acting_master and MASTER_ID not in broker_data.broker_addrs:
            for queue_datas in self._topic_queue_table.values():
                queue_data = queue_datas.get(broker_name)
                if queue_data is not None:
                    queue_data.perm &= ~PERM_WRITE

    def _forget_empty_broker(self, broker_data: BrokerData) -> bool:
        """Removes a broker group without addresses and its topics; True if it did.

        Every cluster that lists the name forgets it (RocketMQ looks only at the cluster in the
        request, which leaves a stale name behind when a group changed clusters).
        """
        if broker_data.broker_addrs:
            return False
        name = broker_data.broker_name
        del self._broker_addr_table[name]
        for cluster, names in list(self._cluster_addr_table.items()):
            names.discard(name)
            if not names:
                del self._cluster_addr_table[cluster]
        for topic in list(self._topic_queue_table):
            self._remove_queue_data(topic, name)
        return True

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        queue_datas = self._topic_queue_table.get(topic)
        if queue_datas is None:
            return
        queue_datas.pop(broker_name, None)
        if not queue_datas:
            del self._topic_queue_table[topic]

    def _drop_live(self, broker_addr: str) -> None:
        self._broker_live_table.pop(broker_addr, None)
        self._filter_server_table.pop(broker_addr, None)

    def _maybe_drop_live(self, broker_addr: str) -> None:
        # An address still listed by another group stays live, so that it can still expire;
        # RocketMQ drops it anyway and the other group's entry then never goes away.
        if not self._is_referenced(broker_addr):
            self._drop_live(broker_addr)

    def _is_referenced(self, broker_addr: str) -> bool:
        return any(
            broker_addr in data.broker_addrs.values() for data in self._broker_addr_table.values()
        )

    # ---- liveness -----------------------------------------------------------------------

    def scan_not_active(
        self, now_ms: int, expiry_ms: int = BROKER_CHANNEL_EXPIRED_TIME_MS
    ) -> list[str]:
        """Drops brokers silent for longer than their timeout, with their routes.

        A broker is dead when `last_update_ms + timeout < now_ms`, the timeout being its own
        `heartbeat_timeout_ms` or else `expiry_ms` (`scanNotActiveBroker`).

        Returns:
            The removed addresses, in live-table order; the server closes their connections.
        """
        dead = [
            addr
            for addr, live in self._broker_live_table.items()
            if live.last_update_ms + (live.heartbeat_timeout_ms or expiry_ms) < now_ms
        ]
        for addr in dead:
            self._remove_address(addr)
        return dead

    def on_channel_closed(self, channel_id: int) -> list[str]:
        """Drops at once every broker that registered over a closed connection.

        Returns:
            The removed addresses (usually one; none when no broker used that connection).
        """
        gone = [a for a, live in self._broker_live_table.items() if live.channel_id == channel_id]
        for addr in gone:
            self._remove_address(addr)
        return gone

    def _remove_address(self, broker_addr: str) -> None:
        # RocketMQ searches only groups of the live entry's cluster and stops at the first hit;
        # every group that lists the address is searched here, so no address outlives its
        # liveness.
        cluster = self._broker_live_table[broker_addr].cluster
        for broker_data in list(self._broker_addr_table.values()):
            ids = [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]
            if ids:
                self.unregister_broker(cluster, broker_addr, broker_data.broker_name, ids[0])
        self._drop_live(broker_addr)

    def is_broker_data_changed(
        self, broker_addr: str, data_version: DataVersion | Mapping[str, int] | None
    ) -> bool:
        """True unless the address is live with an equal data version.

        RocketMQ's `isBrokerTopicConfigChanged`; also the `changed` flag of QUERY_DATA_VERSION.
        """
        live = self._broker_live_table.get(broker_addr)
        return live is None or live.data_version != _as_data_version(data_version)

    def update_data_version(
        self, broker_addr: str, data_version: DataVersion | Mapping[str, int] | None, now_ms: int
    ) -> bool:
        """Answers QUERY_DATA_VERSION (322): has the broker's topic table changed?

        Refreshes the broker's liveness either way (develop does; 4.x only when unchanged).
        The stored version is left alone: only a registration, which carries the topics,
        moves it, so a changed broker keeps answering True until it registers.

        Returns:
            The `changed` flag; `data_version(broker_addr)` gives the body to send back.
        """
        changed = self.is_broker_data_changed(broker_addr, data_version)
        self.refresh_broker(broker_addr, now_ms)
        return changed

    def refresh_broker(self, broker_addr: str, now_ms: int) -> bool:
        """Counts a BROKER_HEARTBEAT (904) as a sign of life.

        Returns:
            False when the address is not registered (nothing is created for it).
        """
        live = self._broker_live_table.get(broker_addr)
        if live is None:
            return False
        live.last_update_ms = now_ms
        return True

    def data_version(self, broker_addr: str) -> DataVersion | None:
        """The data version the broker last registered with, or None if it is not live."""
        live = self._broker_live_table.get(broker_addr)
        return None if live is None else live.data_version

    def live_brokers(self) -> dict[str, BrokerLiveInfo]:
        """A copy of the live table, by broker address."""
        return {addr: replace(live) for addr, live in self._broker_live_table.items()}

    # ---- queries ------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        """The route of a topic (`pickupTopicRouteData`), or None when no broker serves it.

        Lists are sorted by broker name so equal tables give equal bytes.
        """
        queue_datas = self._topic_queue_table.get(topic)
        if not queue_datas:
            return None
        route = TopicRouteData()
        for broker_name in sorted(queue_datas):
            route.queue_datas.append(replace(queue_datas[broker_name]))
            broker_data = self._broker_addr_table.get(broker_name)
            if broker_data is None:
                continue
            route.broker_datas.append(broker_data.copy())
            for addr in broker_data.broker_addrs.values():
                servers = self._filter_server_table.get(addr)
                if servers is not None:
                    route.filter_server_table[addr] = list(servers)
        return route if route.broker_datas else None

    def queue_datas(self, topic: str) -> dict[str, QueueData]:
        """A copy of one topic's queue data by broker name (empty when unknown)."""
        return {n: replace(q) for n, q in self._topic_queue_table.get(topic, {}).items()}

    def cluster_info(self) -> ClusterInfo:
        """A copy of the broker and cluster tables (GET_BROKER_CLUSTER_INFO)."""
        return ClusterInfo(
            broker_addr_table={n: d.copy() for n, d in self._broker_addr_table.items()},
            cluster_addr_table={c: set(n) for c, n in self._cluster_addr_table.items()},
        )

    def broker_member_group(self, broker_name: str) -> dict[int, str]:
        """The addresses of one broker group by id (GET_BROKER_MEMBER_GROUP)."""
        broker_data = self._broker_addr_table.get(broker_name)
        return {} if broker_data is None else dict(broker_data.broker_addrs)

    def all_topics(self) -> TopicList:
        """Every topic with a route (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), sorted."""
        return TopicList(sorted(self._topic_queue_table))

    def topics_by_cluster(self, cluster: str) -> TopicList:
        """Topics served by at least one broker group of a cluster (GET_TOPICS_BY_CLUSTER)."""
        names = self._cluster_addr_table.get(cluster, set())
        return TopicList(
            sorted(t for t, queues in self._topic_queue_table.items() if names & queues.keys())
        )

    def system_topics(self) -> TopicList:
        """Cluster and broker names, which are topics too (GET_SYSTEM_TOPIC_LIST_FROM_NS).

        `broker_addr` is one broker address, where the caller can ask for the rest.
        """
        topics: set[str] = set()
        for cluster, names in self._cluster_addr_table.items():
            topics.add(cluster)
            topics.update(names)
        broker_addr = None
        for broker_data in self._broker_addr_table.values():
            if broker_data.broker_addrs:
                broker_addr = broker_data.broker_addrs[min(broker_data.broker_addrs)]
                break
        return TopicList(sorted(topics), broker_addr)

    def unit_topics(self, *, unit: bool | None, unit_sub: bool | None) -> TopicList:
        """Topics by TopicSysFlag bits, for GET_UNIT_TOPIC_LIST (311) and its two siblings.

        Args:
            unit: Require FLAG_UNIT set (True) or clear (False); None ignores it.
            unit_sub: The same for FLAG_UNIT_SUB.
        """
        topics = []
        for topic, queues in self._topic_queue_table.items():
            flag = next(iter(queues.values())).topic_sys_flag
            if unit is not None and bool(flag & _FLAG_UNIT) != unit:
                continue
            if unit_sub is not None and bool(flag & _FLAG_UNIT_SUB) != unit_sub:
                continue
            topics.append(topic)
        return TopicList(sorted(topics))

    # ---- admin --------------------------------------------------------------------------

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forgets a topic's routes (DELETE_TOPIC_IN_NAMESRV), in one cluster or everywhere.

        A master that still has the topic puts it back on its next registration.

        Returns:
            True when something was removed.
        """
        queue_datas = self._topic_queue_table.get(topic)
        if queue_datas is None:
            return False
        if cluster is None:
            del self._topic_queue_table[topic]
            return True
        names = self._cluster_addr_table.get(cluster, set())
        removed = [n for n in names if n in queue_datas]
        for name in removed:
            self._remove_queue_data(topic, name)
        return bool(removed)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clears PERM_WRITE on every topic of a broker group (WIPE_WRITE_PERM_OF_BROKER).

        Returns:
            How many topics that group serves (`wipeTopicCount`).
        """
        return self._set_perm(broker_name, wipe=True)

    def add_write_perm(self, broker_name: str) -> int:
        """Sets every topic of a broker group to read-write (ADD_WRITE_PERM_OF_BROKER).

        Returns:
            How many topics that group serves (`addTopicCount`).
        """
        return self._set_perm(broker_name, wipe=False)

    def _set_perm(self, broker_name: str, *, wipe: bool) -> int:
        count = 0
        for queue_datas in self._topic_queue_table.values():
            queue_data = queue_datas.get(broker_name)
            if queue_data is None:
                continue
            if wipe:
                queue_data.perm &= ~PERM_WRITE
            else:
                queue_data.perm = PERM_READ | PERM_WRITE
            count += 1
        return count


_FLAG_UNIT: Final = 0x1
_FLAG_UNIT_SUB: Final = 0x2


def _as_data_version(value: DataVersion | Mapping[str, int] | None) -> DataVersion:
    if value is None:
        return DataVersion()
    if isinstance(value, DataVersion):
        return value
    return DataVersion.from_json(value)
