"""The route table against a simple model, through random register/unregister/expire runs.

Invariant (RocketMQ's routing contract): every topic in the topic table routes only to live
brokers that the broker table lists, and `route(topic)` is None when no broker serves it.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pocketmq.common.data_version import DataVersion
from pocketmq.common.route import BrokerTopicConfig
from pocketmq.namesrv.route_table import BROKER_CHANNEL_EXPIRED_TIME_MS, RouteTable

CLUSTER_OF = {"broker-a": "c1", "broker-b": "c1", "broker-c": "c2"}
TOPICS = ["T0", "T1", "T2", "T3"]
ADDRS_PER_GROUP = 3
# Each group draws from its own addresses; the channel id of an address never changes.
ADDRESSES = {
    name: [f"10.0.{g}.{i}:10911" for i in range(ADDRS_PER_GROUP)]
    for g, name in enumerate(CLUSTER_OF)
}
CHANNEL_OF = {
    addr: channel for channel, addr in enumerate(a for addrs in ADDRESSES.values() for a in addrs)
}

group_names = st.sampled_from(sorted(CLUSTER_OF))
addr_indexes = st.integers(0, ADDRS_PER_GROUP - 1)


class RouteTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.table = RouteTable()
        self.now_ms = 1_700_000_000_000
        # The model: group -> {broker id: addr}, group -> topics, addr -> last update.
        self.groups: dict[str, dict[int, str]] = {}
        self.topics: dict[str, set[str]] = {}
        self.live: dict[str, int] = {}

    def _forget(self, addr: str) -> None:
        self.live.pop(addr, None)
        for name, addrs in list(self.groups.items()):
            for broker_id in [i for i, a in addrs.items() if a == addr]:
                del addrs[broker_id]
            if not addrs:
                del self.groups[name]
                del self.topics[name]

    @rule(
        name=group_names,
        broker_id=st.integers(0, 2),
        addr_index=addr_indexes,
        topic_set=st.sets(st.sampled_from(TOPICS)),
        counter=st.integers(0, 2),
        queues=st.integers(1, 8),
        elapsed_ms=st.integers(0, 60_000),
    )
    def register(
        self,
        name: str,
        broker_id: int,
        addr_index: int,
        topic_set: set[str],
        counter: int,
        queues: int,
        elapsed_ms: int,
    ) -> None:
        self.now_ms += elapsed_ms
        addr = ADDRESSES[name][addr_index]
        configs = {t: BrokerTopicConfig(t, queues, queues) for t in sorted(topic_set)}
        result = self.table.register_broker(
            CLUSTER_OF[name],
            addr,
            name,
            broker_id,
            "ha:" + addr,
            configs,
            DataVersion(counter=counter),
            self.now_ms,
            CHANNEL_OF[addr],
        )
        holder = self.groups.get(name, {}).get(broker_id)
        if (
            holder not in (None, addr)
            and holder in self.live
            and self.live[holder] + BROKER_CHANNEL_EXPIRED_TIME_MS >= self.now_ms
        ):
            # A live holder keeps its slot against another address; nothing changes.
            assert (result.accepted, result.slot_holder_addr) == (False, holder)
            return
        assert result.accepted

        addrs = self.groups.setdefault(name, {})
        self.topics.setdefault(name, set())
        for other_id in [i for i, a in addrs.items() if a == addr and i != broker_id]:
            del addrs[other_id]
        old_addr = addrs.get(broker_id)
        addrs[broker_id] = addr
        if old_addr is not None and old_addr != addr and old_addr not in addrs.values():
            del self.live[old_addr]
        if broker_id == 0:
            self.topics[name] |= topic_set
        self.live[addr] = self.now_ms

        master = addrs.get(0)
        if broker_id != 0 and master is not None:
            assert (result.master_addr, result.ha_server_addr) == (master, "ha:" + master)
        else:
            assert (result.master_addr, result.ha_server_addr) == (None, None)

    @rule(name=group_names, addr_index=addr_indexes, broker_id=st.integers(0, 2))
    def unregister(self, name: str, addr_index: int, broker_id: int) -> None:
        addr = ADDRESSES[name][addr_index]
        self.table.unregister_broker(CLUSTER_OF[name], addr, name, broker_id)
        self._forget(addr)

    @rule(elapsed_ms=st.integers(0, 2 * BROKER_CHANNEL_EXPIRED_TIME_MS))
    def expire(self, elapsed_ms: int) -> None:
        self.now_ms += elapsed_ms
        dead = self.table.scan_not_active(self.now_ms)
        expected = {
            a
            for a, last in self.live.items()
            if last + BROKER_CHANNEL_EXPIRED_TIME_MS < self.now_ms
        }
        assert set(dead) == expected
        assert len(dead) == len(expected)
        for addr in expected:
            self._forget(addr)

    @rule(name=group_names, addr_index=addr_indexes)
    def close_channel(self, name: str, addr_index: int) -> None:
        addr = ADDRESSES[name][addr_index]
        gone = self.table.on_channel_closed(CHANNEL_OF[addr])
        assert gone == ([addr] if addr in self.live else [])
        self._forget(addr)

    @rule(name=group_names, addr_index=addr_indexes, elapsed_ms=st.integers(0, 60_000))
    def heartbeat(self, name: str, addr_index: int, elapsed_ms: int) -> None:
        self.now_ms += elapsed_ms
        addr = ADDRESSES[name][addr_index]
        assert self.table.refresh_broker(addr, self.now_ms) == (addr in self.live)
        if addr in self.live:
            self.live[addr] = self.now_ms

    @rule(topic=st.sampled_from(TOPICS), cluster=st.none() | st.sampled_from(["c1", "c2"]))
    def delete_topic(self, topic: str, cluster: str | None) -> None:
        serving = [
            n
            for n, topics in self.topics.items()
            if topic in topics and cluster in (None, CLUSTER_OF[n])
        ]
        assert self.table.delete_topic(topic, cluster) == bool(serving)
        for name in serving:
            self.topics[name].discard(topic)

    @invariant()
    def tables_match_the_model(self) -> None:
        live = self.table.live_brokers()
        assert {a: info.last_update_ms for a, info in live.items()} == self.live
        info = self.table.cluster_info()
        assert {n: d.broker_addrs for n, d in info.broker_addr_table.items()} == self.groups
        clusters: dict[str, set[str]] = {}
        for name in self.groups:
            clusters.setdefault(CLUSTER_OF[name], set()).add(name)
        assert info.cluster_addr_table == clusters
        served = set().union(*self.topics.values())
        assert self.table.all_topics().topic_list == sorted(served)

    @invariant()
    def topics_route_only_to_live_listed_brokers(self) -> None:
        live = self.table.live_brokers()
        listed = self.table.cluster_info().broker_addr_table
        for topic in TOPICS:
            route = self.table.route(topic)
            serving = sorted(n for n, topics in self.topics.items() if topic in topics)
            if not serving:
                assert route is None
                continue
            assert route is not None
            assert [q.broker_name for q in route.queue_datas] == serving
            assert [b.broker_name for b in route.broker_datas] == serving
            for broker_data in route.broker_datas:
                assert broker_data.broker_addrs == listed[broker_data.broker_name].broker_addrs
                assert set(broker_data.broker_addrs.values()) <= live.keys()


RouteTableMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None
)
test_route_table_against_model = RouteTableMachine.TestCase
