"""The NameServer route table: registration, routes, liveness, deletion, KV config.

Behaviour follows apache/rocketmq `RouteInfoManager` (develop) unless a test says otherwise.
"""

from __future__ import annotations

import json

import pytest

from pocketmq.common.data_version import DataVersion
from pocketmq.common.route import BrokerData, BrokerTopicConfig, QueueData
from pocketmq.namesrv.kv_config import KvConfig
from pocketmq.namesrv.route_table import NAMESPACE_ORDER_TOPIC_CONFIG, RegisterResult, RouteTable

NOW = 1_700_000_000_000
CLUSTER = "DefaultCluster"
A_MASTER = "10.0.0.1:10911"
A_SLAVE = "10.0.0.2:10911"
B_MASTER = "10.0.0.3:10911"


def topics(*names: str, queues: int = 4, perm: int = 6) -> dict[str, BrokerTopicConfig]:
    return {name: BrokerTopicConfig(name, queues, queues, perm) for name in names}


def register(
    table: RouteTable,
    addr: str,
    name: str,
    broker_id: int,
    topic_configs: dict[str, BrokerTopicConfig] | None = None,
    *,
    counter: int = 1,
    now_ms: int = NOW,
    channel_id: int | None = None,
    cluster: str = CLUSTER,
    **kwargs: object,
) -> RegisterResult:
    return table.register_broker(
        cluster,
        addr,
        name,
        broker_id,
        addr.replace("10911", "10912"),
        topic_configs if topic_configs is not None else {},
        DataVersion(counter=counter, timestamp=NOW),
        now_ms,
        channel_id,
        **kwargs,  # type: ignore[arg-type]
    )


def two_groups() -> RouteTable:
    """broker-a (master + slave) serves TopicA and TopicB; broker-b (master) serves TopicB."""
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("TopicA", "TopicB"), channel_id=1)
    register(table, A_SLAVE, "broker-a", 1, topics("TopicA", "TopicB"), channel_id=2)
    register(table, B_MASTER, "broker-b", 0, topics("TopicB", queues=8), channel_id=3)
    return table


def test_two_brokers_two_topics_route_to_the_groups_that_serve_them() -> None:
    table = two_groups()

    route_a = table.route("TopicA")
    assert route_a is not None
    assert route_a.queue_datas == [QueueData("broker-a", 4, 4, 6, 0)]
    assert route_a.broker_datas == [BrokerData(CLUSTER, "broker-a", {0: A_MASTER, 1: A_SLAVE})]

    route_b = table.route("TopicB")
    assert route_b is not None
    assert [q.broker_name for q in route_b.queue_datas] == ["broker-a", "broker-b"]
    assert route_b.queue_datas[1] == QueueData("broker-b", 8, 8, 6, 0)
    assert [b.broker_addrs for b in route_b.broker_datas] == [
        {0: A_MASTER, 1: A_SLAVE},
        {0: B_MASTER},
    ]
    assert route_b.filter_server_table == {}
    assert table.route("NoSuchTopic") is None


def test_slave_learns_its_master_addresses_on_registration() -> None:
    table = RouteTable()
    assert register(table, A_SLAVE, "broker-a", 1) == RegisterResult()  # no master yet
    assert register(table, A_MASTER, "broker-a", 0) == RegisterResult()  # masters get nothing
    assert register(table, A_SLAVE, "broker-a", 1) == RegisterResult(
        ha_server_addr="10.0.0.1:10912", master_addr=A_MASTER
    )
    assert table.broker_member_group("broker-a") == {0: A_MASTER, 1: A_SLAVE}


def test_only_the_masters_topic_configs_count() -> None:
    table = RouteTable()
    register(table, A_SLAVE, "broker-a", 1, topics("SlaveOnly"))
    assert table.route("SlaveOnly") is None
    assert table.all_topics().topic_list == []
    register(table, A_MASTER, "broker-a", 0, topics("MasterTopic"))
    assert table.all_topics().topic_list == ["MasterTopic"]


def test_queue_data_changes_only_with_a_new_data_version() -> None:
    """RouteInfoManager.registerBroker: first registration or changed DataVersion."""
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("TopicA", queues=4), counter=1)
    register(table, A_MASTER, "broker-a", 0, topics("TopicA", queues=8), counter=1)
    assert table.queue_datas("TopicA")["broker-a"].write_queue_nums == 4
    register(table, A_MASTER, "broker-a", 0, topics("TopicA", queues=8), counter=2)
    assert table.queue_datas("TopicA")["broker-a"].write_queue_nums == 8


def test_topics_dropped_by_a_broker_stay_unless_configured_otherwise() -> None:
    keeping = RouteTable()
    register(keeping, A_MASTER, "broker-a", 0, topics("Old", "Kept"), counter=1)
    register(keeping, A_MASTER, "broker-a", 0, topics("Kept"), counter=2)
    assert keeping.all_topics().topic_list == ["Kept", "Old"]

    deleting = RouteTable(delete_topic_with_broker_registration=True)
    register(deleting, A_MASTER, "broker-a", 0, topics("Old", "Kept"), counter=1)
    register(deleting, B_MASTER, "broker-b", 0, topics("Old"), counter=1)
    register(deleting, A_MASTER, "broker-a", 0, topics("Kept"), counter=2)
    assert deleting.all_topics().topic_list == ["Kept", "Old"]
    assert list(deleting.queue_datas("Old")) == ["broker-b"]


def test_unregistering_the_master_keeps_topics_for_the_slave() -> None:
    table = two_groups()
    table.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    route = table.route("TopicA")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {1: A_SLAVE}
    assert route.queue_datas[0].perm == 6  # no acting master: permissions untouched
    assert A_MASTER not in table.live_brokers()


def test_unregistering_the_last_address_removes_group_topics_and_cluster() -> None:
    table = two_groups()
    table.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    table.unregister_broker(CLUSTER, A_SLAVE, "broker-a", 1)
    assert table.route("TopicA") is None
    route_b = table.route("TopicB")
    assert route_b is not None
    assert [q.broker_name for q in route_b.queue_datas] == ["broker-b"]
    assert table.cluster_info().cluster_addr_table == {CLUSTER: {"broker-b"}}

    table.unregister_broker(CLUSTER, B_MASTER, "broker-b", 0)
    info = table.cluster_info()
    assert (info.broker_addr_table, info.cluster_addr_table) == ({}, {})
    assert table.all_topics().topic_list == []
    assert table.live_brokers() == {}


def test_unregistering_an_unknown_broker_changes_nothing() -> None:
    table = two_groups()
    table.unregister_broker(CLUSTER, "10.9.9.9:1", "broker-z", 0)
    table.unregister_broker(CLUSTER, "10.9.9.9:1", "broker-a", 0)
    assert table.broker_member_group("broker-a") == {0: A_MASTER, 1: A_SLAVE}


def test_scan_drops_a_broker_silent_for_more_than_120_seconds() -> None:
    """NameServer expiry (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, strictly older than 120 s)."""
    table = two_groups()
    register(table, B_MASTER, "broker-b", 0, topics("TopicB", queues=8), now_ms=NOW + 60_000)

    assert table.scan_not_active(NOW + 120_000) == []
    assert table.scan_not_active(NOW + 120_001) == [A_MASTER, A_SLAVE]
    assert table.route("TopicA") is None
    assert list(table.live_brokers()) == [B_MASTER]
    assert table.scan_not_active(NOW + 180_001) == [B_MASTER]
    assert table.all_topics().topic_list == []
    assert table.cluster_info().broker_addr_table == {}


def test_scan_honours_a_brokers_own_heartbeat_timeout() -> None:
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("T"), heartbeat_timeout_ms=10_000)
    register(table, B_MASTER, "broker-b", 0, topics("T"))
    assert table.scan_not_active(NOW + 10_001) == [A_MASTER]
    assert table.scan_not_active(NOW + 10_001, expiry_ms=5_000) == [B_MASTER]


def test_heartbeat_and_data_version_queries_keep_a_broker_alive() -> None:
    table = two_groups()
    assert table.refresh_broker(A_MASTER, NOW + 100_000)
    assert not table.update_data_version(A_SLAVE, DataVersion(1, 0, NOW), NOW + 100_000)
    assert not table.refresh_broker("10.9.9.9:1", NOW)
    assert table.scan_not_active(NOW + 120_001) == [B_MASTER]
    assert set(table.live_brokers()) == {A_MASTER, A_SLAVE}


def test_data_version_change_detection() -> None:
    table = RouteTable()
    version = DataVersion(counter=3, state_version=0, timestamp=NOW)
    assert table.is_broker_data_changed(A_MASTER, version)  # unknown broker
    table.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "ha", {}, version, NOW)
    assert not table.is_broker_data_changed(A_MASTER, version)
    assert not table.is_broker_data_changed(
        A_MASTER, {"counter": 3, "stateVersion": 0, "timestamp": NOW}
    )
    assert table.is_broker_data_changed(A_MASTER, DataVersion(4, 0, NOW))
    assert table.is_broker_data_changed(A_MASTER, DataVersion(3, 1, NOW))
    assert table.is_broker_data_changed(A_MASTER, DataVersion(3, 0, NOW + 1))

    # A query refreshes liveness but does not store the version: only registering does.
    assert table.update_data_version(A_MASTER, DataVersion(4, 0, NOW), NOW + 5)
    assert table.data_version(A_MASTER) == version
    assert table.live_brokers()[A_MASTER].last_update_ms == NOW + 5
    assert table.data_version("10.9.9.9:1") is None


def test_absent_body_registers_with_the_zero_version() -> None:
    table = RouteTable()
    table.register_broker(CLUSTER, A_MASTER, "broker-a", 0, "ha", None, None, NOW)
    assert table.data_version(A_MASTER) == DataVersion()
    assert table.all_topics().topic_list == []


def test_closing_a_channel_removes_that_brokers_routes_at_once() -> None:
    table = two_groups()
    assert table.on_channel_closed(3) == [B_MASTER]
    route = table.route("TopicB")
    assert route is not None
    assert [b.broker_name for b in route.broker_datas] == ["broker-a"]
    assert table.on_channel_closed(99) == []
    assert table.on_channel_closed(3) == []


def test_deleting_a_topic_everywhere_or_in_one_cluster() -> None:
    table = two_groups()
    register(table, "10.0.0.9:10911", "broker-x", 0, topics("TopicB"), cluster="OtherCluster")

    assert table.delete_topic("TopicB", "OtherCluster")
    assert list(table.queue_datas("TopicB")) == ["broker-a", "broker-b"]
    assert not table.delete_topic("TopicB", "NoSuchCluster")
    assert table.delete_topic("TopicA")
    assert table.route("TopicA") is None
    assert not table.delete_topic("TopicA")
    assert table.delete_topic("TopicB", CLUSTER)
    assert table.all_topics().topic_list == []


def test_a_deleted_topic_comes_back_when_its_master_registers_again() -> None:
    """develop `isTopicConfigChanged`: a topic missing from the table counts as changed."""
    table = two_groups()
    table.delete_topic("TopicA")
    register(table, A_MASTER, "broker-a", 0, topics("TopicA", "TopicB"))  # same version
    assert table.route("TopicA") is not None


def test_cluster_info_and_topic_lists() -> None:
    table = two_groups()
    register(table, "10.0.0.9:10911", "broker-x", 0, topics("TopicX"), cluster="OtherCluster")

    info = table.cluster_info()
    assert info.cluster_addr_table == {
        CLUSTER: {"broker-a", "broker-b"},
        "OtherCluster": {"broker-x"},
    }
    assert info.broker_addr_table["broker-a"] == BrokerData(
        CLUSTER, "broker-a", {0: A_MASTER, 1: A_SLAVE}
    )
    assert table.all_topics().topic_list == ["TopicA", "TopicB", "TopicX"]
    assert table.all_topics().broker_addr is None
    assert table.topics_by_cluster(CLUSTER).topic_list == ["TopicA", "TopicB"]
    assert table.topics_by_cluster("OtherCluster").topic_list == ["TopicX"]
    assert table.topics_by_cluster("NoSuchCluster").topic_list == []

    system = table.system_topics()
    assert system.topic_list == sorted(
        [CLUSTER, "OtherCluster", "broker-a", "broker-b", "broker-x"]
    )
    assert system.broker_addr == A_MASTER


def test_answers_are_copies() -> None:
    table = two_groups()
    route = table.route("TopicA")
    assert route is not None
    route.broker_datas[0].broker_addrs.clear()
    route.queue_datas[0].perm = 0
    table.cluster_info().cluster_addr_table[CLUSTER].clear()
    table.live_brokers()[A_MASTER].last_update_ms = 0
    assert table.route("TopicA") == two_groups().route("TopicA")
    assert table.cluster_info().cluster_addr_table[CLUSTER] == {"broker-a", "broker-b"}
    assert table.live_brokers()[A_MASTER].last_update_ms == NOW


def test_a_slave_switched_to_master_in_place_moves_to_id_zero() -> None:
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("TopicA"))
    register(table, A_SLAVE, "broker-a", 1, topics("TopicA"))
    table.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    register(table, A_SLAVE, "broker-a", 0, topics("TopicA", "NewTopic"), counter=2)
    assert table.broker_member_group("broker-a") == {0: A_SLAVE}
    assert table.route("NewTopic") is not None


def test_a_new_address_under_the_same_id_replaces_the_old_one_once_it_expired() -> None:
    """RocketMQ replaces a live holder too; pocketmq refuses that (see
    test_route_table_slot_guard.py), so the old holder here has gone silent first."""
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("TopicA"), channel_id=1)
    later = NOW + 120_001
    register(table, "10.0.0.7:10911", "broker-a", 0, topics("TopicA"), channel_id=7, now_ms=later)
    assert table.broker_member_group("broker-a") == {0: "10.0.0.7:10911"}
    # pocketmq also forgets the old address's liveness, which RocketMQ keeps until expiry.
    assert list(table.live_brokers()) == ["10.0.0.7:10911"]
    assert table.on_channel_closed(1) == []


def test_a_registration_older_than_the_current_holder_is_ignored() -> None:
    """develop: a lower stateVersion under an occupied broker id changes nothing."""
    table = RouteTable()
    table.register_broker(
        CLUSTER, A_MASTER, "broker-a", 0, "ha", topics("T"), DataVersion(1, 5, NOW), NOW
    )
    result = table.register_broker(
        CLUSTER, A_SLAVE, "broker-a", 0, "ha2", topics("U"), DataVersion(9, 3, NOW), NOW
    )
    assert result == RegisterResult(accepted=False)
    assert table.broker_member_group("broker-a") == {0: A_MASTER}
    assert list(table.live_brokers()) == [A_MASTER]
    assert table.route("U") is None


def test_acting_master_slave_registers_topics_read_only_and_wipes_write_when_master_goes() -> None:
    table = RouteTable()
    register(table, A_SLAVE, "broker-a", 1, topics("TopicA"), enable_acting_master=True)
    assert table.queue_datas("TopicA")["broker-a"].perm == 4  # prime slave: write wiped
    assert table.route("TopicA") is not None

    register(table, A_MASTER, "broker-a", 0, topics("TopicA"), enable_acting_master=True)
    assert table.queue_datas("TopicA")["broker-a"].perm == 6
    table.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    assert table.queue_datas("TopicA")["broker-a"].perm == 4


def test_old_brokers_slaves_never_register_topics() -> None:
    table = RouteTable()
    register(table, A_SLAVE, "broker-a", 1, topics("TopicA"))  # no enableActingMaster header
    assert table.route("TopicA") is None


def test_wipe_and_add_write_permission() -> None:
    table = two_groups()
    assert table.wipe_write_perm("broker-a") == 2
    assert table.queue_datas("TopicA")["broker-a"].perm == 4
    assert table.queue_datas("TopicB")["broker-b"].perm == 6
    assert table.add_write_perm("broker-a") == 2
    assert table.queue_datas("TopicB")["broker-a"].perm == 6
    assert table.wipe_write_perm("broker-z") == 0


def test_filter_servers_appear_in_the_route_until_cleared() -> None:
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("T"), filter_server_list=["10.0.0.5:3000"])
    route = table.route("T")
    assert route is not None
    assert route.filter_server_table == {A_MASTER: ["10.0.0.5:3000"]}
    register(table, A_MASTER, "broker-a", 0, topics("T"), filter_server_list=None)
    route = table.route("T")
    assert route is not None
    assert route.filter_server_table == {A_MASTER: ["10.0.0.5:3000"]}
    register(table, A_MASTER, "broker-a", 0, topics("T"), filter_server_list=[])
    route = table.route("T")
    assert route is not None
    assert route.filter_server_table == {}


def test_register_topic_only_for_known_brokers_and_new_topics() -> None:
    table = two_groups()
    assert table.register_topic("Fresh", [QueueData("broker-b", 2, 2, 6)])
    assert table.queue_datas("Fresh") == {"broker-b": QueueData("broker-b", 2, 2, 6)}
    assert not table.register_topic("Fresh", [QueueData("broker-a", 2, 2, 6)])
    assert not table.register_topic("Other", [QueueData("broker-z", 2, 2, 6)])
    assert not table.register_topic("Other", [])
    assert table.route("Other") is None


def test_unit_topic_lists_follow_topic_sys_flag() -> None:
    table = RouteTable()
    configs = {
        "Plain": BrokerTopicConfig("Plain", topic_sys_flag=0),
        "Unit": BrokerTopicConfig("Unit", topic_sys_flag=1),
        "UnitSub": BrokerTopicConfig("UnitSub", topic_sys_flag=2),
        "Both": BrokerTopicConfig("Both", topic_sys_flag=3),
    }
    register(table, A_MASTER, "broker-a", 0, configs)
    assert table.unit_topics(unit=True, unit_sub=None).topic_list == ["Both", "Unit"]
    assert table.unit_topics(unit=None, unit_sub=True).topic_list == ["Both", "UnitSub"]
    assert table.unit_topics(unit=False, unit_sub=True).topic_list == ["UnitSub"]


def test_kv_config_put_get_delete_and_namespaces() -> None:
    kv = KvConfig()
    kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicA", "broker-a:4")
    kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicB", "broker-a:4;broker-b:4")
    kv.put("other", "k", "v")
    assert kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicA") == "broker-a:4"
    assert kv.get("missing", "k") is None
    assert kv.delete("other", "k")
    assert not kv.delete("other", "k")
    assert not kv.delete("missing", "k")
    assert kv.namespace("other") == {}  # the namespace stays, as in KVConfigManager
    assert kv.namespace("missing") is None
    assert kv.namespaces() == [NAMESPACE_ORDER_TOPIC_CONFIG, "other"]


def test_kv_config_json_is_rocketmqs_kvconfig_json_shape() -> None:
    kv = KvConfig()
    kv.put("ns", "b", "2")
    kv.put("ns", "a", "1")
    text = kv.to_json()
    assert text == '{"configTable":{"ns":{"a":"1","b":"2"}}}'
    assert KvConfig.from_json(text).namespace("ns") == {"a": "1", "b": "2"}
    assert KvConfig.from_json(text.encode()).get("ns", "a") == "1"
    assert KvConfig.from_json("{}").namespaces() == []


@pytest.mark.parametrize(
    "text",
    ["[]", '{"configTable": []}', '{"configTable": {"ns": "x"}}', '{"configTable":{"n":{"k":{}}}}'],
)
def test_kv_config_rejects_other_shapes(text: str) -> None:
    with pytest.raises(ValueError, match=r"kvConfig\.json"):
        KvConfig.from_json(text)


def test_kv_config_reads_numbers_as_text() -> None:
    kv = KvConfig.from_json(json.dumps({"configTable": {"ns": {"k": 5}}}))
    assert kv.get("ns", "k") == "5"


def test_data_version_json_round_trip_and_errors() -> None:
    version = DataVersion(counter=5, state_version=2, timestamp=NOW)
    assert version.to_json() == {"counter": 5, "stateVersion": 2, "timestamp": NOW}
    assert DataVersion.from_json(version.to_json()) == version
    assert DataVersion.from_json({"counter": "7"}) == DataVersion(counter=7)
    with pytest.raises(ValueError, match="counter"):
        DataVersion.from_json({"counter": True})
    with pytest.raises(ValueError, match="timestamp"):
        DataVersion.from_json({"timestamp": "soon"})


def test_an_address_listed_by_two_groups_stays_live_until_both_forget_it() -> None:
    """pocketmq keeps liveness while any group lists the address (RocketMQ drops it early)."""
    table = RouteTable()
    register(table, A_MASTER, "broker-a", 0, topics("T"))
    register(table, A_MASTER, "broker-b", 0, topics("U"))
    table.unregister_broker(CLUSTER, A_MASTER, "broker-a", 0)
    assert list(table.live_brokers()) == [A_MASTER]
    assert table.route("U") is not None
    assert table.scan_not_active(NOW + 120_001) == [A_MASTER]
    assert table.cluster_info().broker_addr_table == {}
