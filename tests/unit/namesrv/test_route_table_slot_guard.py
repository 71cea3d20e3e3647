"""A live broker keeps its (brokerName, brokerId) slot against a registration from elsewhere.

Apache RocketMQ's `RouteInfoManager` puts the newcomer's address over the holder's, so a copied
or mistyped `brokerName` takes a running broker's routes; pocketmq refuses it while the holder
is live (same `stateVersion`), and hands the slot over once the holder expired or went away.
"""

from __future__ import annotations

from pocketmq.common.data_version import DataVersion
from pocketmq.common.route import BrokerTopicConfig
from pocketmq.namesrv.route_table import RegisterResult, RouteTable

NOW = 1_700_000_000_000
EXPIRY_MS = 30_000
HOLDER = "10.0.0.1:10911"
NEWCOMER = "10.0.0.9:10911"


def register(
    table: RouteTable, addr: str, *, now_ms: int = NOW, state_version: int = 0, topic: str = "T"
) -> RegisterResult:
    return table.register_broker(
        "DefaultCluster",
        addr,
        "broker-a",
        0,
        addr.replace("10911", "10912"),
        {topic: BrokerTopicConfig(topic, 4, 4)},
        DataVersion(counter=1, state_version=state_version, timestamp=NOW),
        now_ms,
        channel_id=hash(addr),
    )


def held_table() -> RouteTable:
    table = RouteTable(broker_expiry_ms=EXPIRY_MS)
    assert register(table, HOLDER).accepted
    return table


def test_a_registration_from_another_address_is_refused_while_the_holder_is_live() -> None:
    table = held_table()
    result = register(table, NEWCOMER, now_ms=NOW + EXPIRY_MS, topic="Stolen")
    assert result == RegisterResult(accepted=False, slot_holder_addr=HOLDER)
    assert table.broker_member_group("broker-a") == {0: HOLDER}
    assert list(table.live_brokers()) == [HOLDER]
    assert table.route("Stolen") is None


def test_the_holder_itself_re_registers_as_usual() -> None:
    table = held_table()
    assert register(table, HOLDER, now_ms=NOW + 10_000) == RegisterResult()
    assert table.live_brokers()[HOLDER].last_update_ms == NOW + 10_000


def test_the_slot_moves_once_the_holder_has_expired() -> None:
    table = held_table()
    assert register(table, NEWCOMER, now_ms=NOW + EXPIRY_MS + 1) == RegisterResult()
    assert table.broker_member_group("broker-a") == {0: NEWCOMER}
    assert list(table.live_brokers()) == [NEWCOMER]


def test_a_re_registration_of_the_holder_keeps_it_live_against_the_newcomer() -> None:
    table = held_table()
    register(table, HOLDER, now_ms=NOW + EXPIRY_MS)
    result = register(table, NEWCOMER, now_ms=NOW + EXPIRY_MS + 1)
    assert result.slot_holder_addr == HOLDER


def test_the_slot_moves_once_the_holder_unregistered_or_its_connection_closed() -> None:
    table = held_table()
    table.unregister_broker("DefaultCluster", HOLDER, "broker-a", 0)
    assert register(table, NEWCOMER).accepted
    assert table.on_channel_closed(hash(NEWCOMER)) == [NEWCOMER]
    assert register(table, HOLDER).accepted
    assert table.broker_member_group("broker-a") == {0: HOLDER}


def test_a_refused_newcomer_unregistering_leaves_the_holder_alone() -> None:
    table = held_table()
    register(table, NEWCOMER)
    table.unregister_broker("DefaultCluster", NEWCOMER, "broker-a", 0)
    assert table.broker_member_group("broker-a") == {0: HOLDER}
    assert list(table.live_brokers()) == [HOLDER]


def test_a_newer_state_version_still_takes_the_slot_as_a_controller_failover_does() -> None:
    table = held_table()
    assert register(table, NEWCOMER, state_version=1) == RegisterResult()
    assert table.broker_member_group("broker-a") == {0: NEWCOMER}


def test_the_holders_own_heartbeat_timeout_decides_its_liveness() -> None:
    table = RouteTable(broker_expiry_ms=EXPIRY_MS)
    table.register_broker(
        "DefaultCluster",
        HOLDER,
        "broker-a",
        0,
        "ha",
        {},
        DataVersion(counter=1),
        NOW,
        heartbeat_timeout_ms=5_000,
    )
    assert register(table, NEWCOMER, now_ms=NOW + 5_001).accepted
