"""The leader's decisions over the replicated tables: codes, remarks and answers as RocketMQ's
`ReplicasInfoManager` gives them, and events that change nothing once their epoch has passed.

Each test drives a decision the way the service does: decide, apply its events, then build the
answer from the tables the events produced.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from pocketmq.common.codes import ResponseCode
from pocketmq.controller.decisions import (
    Decision,
    alter_sync_state_set,
    apply_broker_id,
    clean_broker_data,
    elect_master,
    next_broker_id,
    register_broker,
)
from pocketmq.controller.heartbeats import LiveBroker, LiveBrokers
from pocketmq.controller.replicas import (
    BrokerGroup,
    ControllerStateMachine,
    ReplicasInfo,
    encode_events,
)
from pocketmq.remoting.transport import Channel

CLUSTER = "DefaultCluster"
GROUP = "broker-a"
TIMEOUT_MS = 10_000
REJECTING = "Rejecting alter syncStateSet request because"


class FakeNow:
    """The controller's clock, moved by hand."""

    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def address(broker_id: int) -> str:
    return f"127.0.0.1:{30910 + broker_id}"


def run(replicas: ReplicasInfo, decision: Decision) -> tuple[dict[str, str], bytes]:
    """What the service does once the decision is replicated: apply, then answer."""
    for event in decision.events:
        replicas.apply(event)
    return decision.answer() if decision.answer is not None else ({}, b"")


def body(raw: bytes) -> Any:
    return json.loads(raw)


class Cluster:
    """One broker group on a controller: its tables and what its heartbeats say."""

    def __init__(self, ids: tuple[int, ...] = (1, 2, 3)) -> None:
        self.now = FakeNow()
        self.live = LiveBrokers(self.now)
        self.replicas = ReplicasInfo()
        for broker_id in ids:
            decision = apply_broker_id(
                self.replicas, CLUSTER, GROUP, broker_id, f"{address(broker_id)};1700000000000"
            )
            assert decision.code == ResponseCode.SUCCESS
            run(self.replicas, decision)

    @property
    def group(self) -> BrokerGroup:
        return self.replicas.groups[GROUP]

    def beat(
        self, broker_id: int, *, epoch: int = 0, max_offset: int = 0, priority: int = 0
    ) -> LiveBroker:
        broker = LiveBroker(
            CLUSTER, GROUP, broker_id, address(broker_id), last_ms=self.now.ms,
            timeout_ms=TIMEOUT_MS, epoch=epoch, max_offset=max_offset, priority=priority,
        )  # fmt: skip
        self.live.heartbeat(broker)
        return broker

    def elect(
        self,
        *,
        requester: int | None = None,
        designated: int | None = None,
        unclean: bool = False,
    ) -> Decision:
        return elect_master(
            self.replicas, GROUP, self.live.get, unclean=unclean, designated=designated,
            requester=requester,
        )  # fmt: skip

    def alter(
        self, new_set: set[int], *, master: int = 1, master_epoch: int = 1, set_epoch: int = 1
    ) -> Decision:
        return alter_sync_state_set(
            self.replicas, GROUP, master, master_epoch, new_set, set_epoch, self.live.alive
        )

    def with_master(self, master: int = 1) -> Cluster:
        """The group after its first election: `master` leads epoch 1 with the set {master}."""
        decision = self.elect(requester=master)
        assert decision.code == ResponseCode.SUCCESS
        run(self.replicas, decision)
        return self


# -- broker ids --------------------------------------------------------------------------------
def test_an_unknown_group_hands_out_id_one_then_the_next_free_id() -> None:
    replicas = ReplicasInfo()
    fields, raw = run(replicas, next_broker_id(replicas, CLUSTER, GROUP))
    assert fields == {"clusterName": CLUSTER, "brokerName": GROUP, "nextBrokerId": "1"}
    assert raw == b""
    cluster = Cluster(ids=(1, 2))
    fields, _ = run(cluster.replicas, next_broker_id(cluster.replicas, CLUSTER, GROUP))
    assert fields["nextBrokerId"] == "3"


def test_applying_id_one_creates_the_group_without_a_master() -> None:
    replicas = ReplicasInfo()
    decision = apply_broker_id(replicas, CLUSTER, GROUP, 1, "127.0.0.1:30911;1700000000000")
    assert decision.code == ResponseCode.SUCCESS
    assert len(decision.events) == 1
    fields, raw = run(replicas, decision)
    assert fields == {"clusterName": CLUSTER, "brokerName": GROUP}
    assert raw == b""
    group = replicas.groups[GROUP]
    assert group.cluster == CLUSTER
    # The check code is `address;time`: the address is known before the broker registers.
    assert group.replicas[1].address == "127.0.0.1:30911"
    assert (group.master_id, group.master_epoch, group.sync_state_set_epoch) == (None, 0, 0)
    assert group.sync_state_set == set()


def test_an_unknown_group_refuses_an_id_other_than_one() -> None:
    replicas = ReplicasInfo()
    decision = apply_broker_id(replicas, CLUSTER, GROUP, 2, "127.0.0.1:30912;1")
    assert decision.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert decision.remark == (
        "Broker-set: broker-a hasn't been registered in controller, but broker try to apply "
        "brokerId: 2"
    )
    assert decision.events == []
    assert replicas.groups == {}


def test_an_id_held_under_another_check_code_is_refused() -> None:
    cluster = Cluster(ids=(1,))
    decision = apply_broker_id(cluster.replicas, CLUSTER, GROUP, 1, "127.0.0.1:40000;2")
    assert decision.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID
    assert decision.remark == "Fail to apply brokerId: 1 in broker-set: broker-a"
    assert cluster.group.replicas[1].address == address(1)


def test_applying_the_same_id_with_the_same_check_code_again_succeeds_without_an_event() -> None:
    cluster = Cluster(ids=(1,))
    decision = apply_broker_id(cluster.replicas, CLUSTER, GROUP, 1, f"{address(1)};1700000000000")
    assert decision.code == ResponseCode.SUCCESS
    assert decision.events == []
    assert run(cluster.replicas, decision) == ({"clusterName": CLUSTER, "brokerName": GROUP}, b"")


def test_an_id_decided_twice_before_either_applied_goes_to_the_first() -> None:
    cluster = Cluster(ids=(1,))
    first = apply_broker_id(cluster.replicas, CLUSTER, GROUP, 2, "127.0.0.1:30912;1")
    second = apply_broker_id(cluster.replicas, CLUSTER, GROUP, 2, "127.0.0.1:40000;2")
    run(cluster.replicas, first)
    run(cluster.replicas, second)
    assert cluster.group.replicas[2].address == "127.0.0.1:30912"
    assert cluster.group.replicas[2].check_code == "127.0.0.1:30912;1"


# -- registering -------------------------------------------------------------------------------
def test_registering_in_an_unknown_group_asks_to_apply_for_an_id_first() -> None:
    replicas = ReplicasInfo()
    decision = register_broker(replicas, GROUP, 1, address(1), lambda _: True)
    assert decision.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert decision.remark == "Broker-set: broker-a hasn't been registered in controller"


def test_registering_an_unknown_id_asks_to_apply_for_it_first() -> None:
    cluster = Cluster(ids=(1,))
    decision = register_broker(cluster.replicas, GROUP, 5, address(5), lambda _: True)
    assert decision.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert decision.remark == "BrokerId: 5 hasn't been registered in broker-set: broker-a"
    assert decision.events == []


def test_registering_from_a_new_address_records_it() -> None:
    cluster = Cluster(ids=(1,))
    decision = register_broker(cluster.replicas, GROUP, 1, "10.0.0.9:30911", lambda _: False)
    assert [e["type"] for e in decision.events] == ["updateAddress"]
    fields, raw = run(cluster.replicas, decision)
    assert cluster.group.replicas[1].address == "10.0.0.9:30911"
    # No master yet: only the names, and the (empty) set as the body.
    assert fields == {"clusterName": CLUSTER, "brokerName": GROUP}
    assert body(raw) == {"syncStateSet": [], "syncStateSetEpoch": 0}
    again = register_broker(cluster.replicas, GROUP, 1, "10.0.0.9:30911", lambda _: False)
    assert again.events == []


def test_registering_names_the_master_only_while_it_is_alive() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(1)

    def alive(broker_id: int) -> bool:
        return cluster.live.alive(GROUP, broker_id)

    fields, raw = run(cluster.replicas, register_broker(cluster.replicas, GROUP, 2, "a:2", alive))
    assert fields == {
        "clusterName": CLUSTER,
        "brokerName": GROUP,
        "masterAddress": address(1),
        "masterBrokerId": "1",
        "masterEpoch": "1",
        "syncStateSetEpoch": "1",
    }
    assert body(raw) == {"syncStateSet": [1], "syncStateSetEpoch": 1}
    cluster.now.ms += TIMEOUT_MS + 1
    fields, _ = run(cluster.replicas, register_broker(cluster.replicas, GROUP, 2, "a:2", alive))
    assert fields == {"clusterName": CLUSTER, "brokerName": GROUP}


# -- electing ----------------------------------------------------------------------------------
def test_electing_in_an_unknown_group_is_refused() -> None:
    decision = elect_master(ReplicasInfo(), GROUP, lambda _g, _i: None, unclean=False, requester=1)
    assert decision.code == ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    assert decision.remark == "Broker hasn't been registered"


def test_the_first_election_picks_the_requester_without_asking_who_is_alive() -> None:
    cluster = Cluster()
    decision = cluster.elect(requester=2)
    assert decision.code == ResponseCode.SUCCESS
    fields, raw = run(cluster.replicas, decision)
    assert fields == {
        "masterAddress": address(2),
        "masterBrokerId": "2",
        "masterEpoch": "1",
        "syncStateSetEpoch": "1",
    }
    assert body(raw) == {
        "brokerMemberGroup": {
            "brokerAddrs": {"1": address(1), "2": address(2), "3": address(3)},
            "brokerName": GROUP,
            "cluster": CLUSTER,
        },
        "syncStateSet": [2],
    }
    assert cluster.group.sync_state_set == {2}


def test_electing_while_the_master_is_alive_answers_master_still_exist() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(1)
    cluster.beat(2, epoch=5, max_offset=10_000)
    decision = cluster.elect(requester=2)
    assert decision.code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST
    assert decision.remark == (
        "The old master 1 is still alive, not need to elect new master for broker broker-a"
    )
    assert decision.events == []
    fields, raw = run(cluster.replicas, decision)
    assert fields == {
        "masterAddress": address(1),
        "masterBrokerId": "1",
        "masterEpoch": "1",
        "syncStateSetEpoch": "1",
    }
    assert body(raw) == {"syncStateSet": [1]}


def test_the_scan_elects_an_alive_member_of_the_set_when_the_master_is_gone() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(1)
    cluster.beat(2)
    run(cluster.replicas, cluster.alter({1, 2}))
    cluster.now.ms += TIMEOUT_MS + 1
    cluster.beat(2)
    cluster.beat(3, epoch=9, max_offset=1 << 40)  # better placed, but not in the set
    decision = cluster.elect()
    assert decision.code == ResponseCode.SUCCESS
    fields, raw = run(cluster.replicas, decision)
    assert fields["masterBrokerId"] == "2"
    assert (fields["masterEpoch"], fields["syncStateSetEpoch"]) == ("2", "3")
    assert body(raw)["syncStateSet"] == [2]


def test_the_scan_finding_no_alive_member_leaves_the_group_without_master_in_a_new_epoch() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(3)  # alive, but outside the set {1}
    decision = cluster.elect()
    assert decision.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert decision.remark is not None
    assert decision.remark.startswith("Old master has down and failed to elect a new broker master")
    run(cluster.replicas, decision)
    group = cluster.group
    assert group.master_id is None
    assert group.master_epoch == 2  # fences the old master's writes
    assert group.sync_state_set == {1}  # only a member may lead later
    assert group.sync_state_set_epoch == 1
    again = cluster.elect()
    assert again.code == ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE
    assert again.events == []


def test_a_broker_asking_for_an_election_nobody_can_win_gets_elect_master_failed() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(3)
    decision = cluster.elect(requester=3)
    assert decision.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert decision.remark is not None
    assert decision.remark.startswith("Failed to elect a new master")
    assert decision.events == []
    assert cluster.group.master_epoch == 1


def test_a_designated_broker_outside_the_set_is_refused_unless_unclean() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(3)
    refused = cluster.elect(designated=3)
    assert refused.code == ResponseCode.CONTROLLER_ELECT_MASTER_FAILED
    assert refused.events == []
    allowed = cluster.elect(designated=3, unclean=True)
    assert allowed.code == ResponseCode.SUCCESS
    fields, _ = run(cluster.replicas, allowed)
    assert (fields["masterBrokerId"], fields["masterEpoch"]) == ("3", "2")


def test_designating_the_alive_master_answers_master_still_exist() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(1)
    assert cluster.elect(designated=1).code == ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def test_a_broker_whose_connection_closed_is_dead_at_once() -> None:
    cluster = Cluster().with_master(1)
    channel = cast(Channel, object())
    master = cluster.beat(1)
    master.channel = channel
    cluster.beat(2)
    run(cluster.replicas, cluster.alter({1, 2}))
    dead: list[int] = []
    cluster.live.on_dead.append(lambda broker: dead.append(broker.broker_id))
    cluster.live.channel_closed(channel)
    assert dead == [1]
    decision = cluster.elect()
    assert decision.code == ResponseCode.SUCCESS
    run(cluster.replicas, decision)
    assert cluster.group.master_id == 2


def test_an_election_decided_at_an_old_epoch_and_applied_late_changes_nothing() -> None:
    cluster = altering_group()
    cluster.beat(3)
    run(cluster.replicas, cluster.alter({1, 2, 3}))
    assert cluster.group.sync_state_set == {1, 2, 3}
    # Two leaders in turn decided at master epoch 1, before either decision applied.
    first = cluster.elect(designated=2)
    late = cluster.elect(designated=3)
    run(cluster.replicas, first)
    before = cluster.replicas.to_bytes()
    for event in late.events:
        cluster.replicas.apply(event)
    group = cluster.group
    assert (group.master_id, group.master_epoch, group.sync_state_set) == (2, 2, {2})
    assert group.sync_state_set_epoch == 3
    assert json.loads(cluster.replicas.to_bytes())["groups"] == json.loads(before)["groups"]


# -- altering the SyncStateSet -----------------------------------------------------------------
def altering_group() -> Cluster:
    """Master 1 in epoch 1, set {1} in epoch 1; replicas 1 and 2 alive, 3 dead, 4 unknown."""
    cluster = Cluster().with_master(1)
    cluster.beat(1)
    cluster.beat(2)
    return cluster


ALTER_REFUSALS = [
    # In RocketMQ's order: each case also breaks every check that comes after it.
    pytest.param(
        {1}, 9, 9, 9, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        id="equal-set",
    ),
    pytest.param(
        {1, 4}, 2, 9, 9, ResponseCode.CONTROLLER_INVALID_MASTER,
        f"{REJECTING} the current leader is:{{1}}, not {{2}}", id="invalid-master",
    ),
    pytest.param(
        {4}, 1, 0, 9, ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
        f"{REJECTING} the current master epoch is:{{1}}, not {{0}}", id="fenced-master-epoch",
    ),
    pytest.param(
        {4}, 1, 1, 0, ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
        f"{REJECTING} the current syncStateSet epoch is:{{1}}, not {{0}}", id="fenced-set-epoch",
    ),
    pytest.param(
        {1, 4}, 1, 1, 1, ResponseCode.CONTROLLER_INVALID_REPLICAS,
        f"{REJECTING} the replicas {{4}} don't exist", id="unknown-replica",
    ),
    pytest.param(
        {3}, 1, 1, 1, ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
        f"{REJECTING} the replicas {{3}} don't alive", id="dead-replica",
    ),
    pytest.param(
        {2}, 1, 1, 1, ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
        f"{REJECTING} the newSyncStateSet don't contains origin leader {{1}}",
        id="set-without-master",
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("new_set", "master", "master_epoch", "set_epoch", "code", "remark"), ALTER_REFUSALS
)
def test_alter_sync_state_set_refusals_come_in_rocketmq_order(
    new_set: set[int], master: int, master_epoch: int, set_epoch: int, code: int, remark: str
) -> None:
    cluster = altering_group()
    decision = cluster.alter(new_set, master=master, master_epoch=master_epoch, set_epoch=set_epoch)
    assert (decision.code, decision.remark) == (code, remark)
    assert decision.events == []
    assert decision.answer is None


def test_altering_an_unknown_group_is_refused() -> None:
    decision = alter_sync_state_set(ReplicasInfo(), GROUP, 1, 1, {1, 2}, 1, lambda _g, _i: True)
    assert decision.code == ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    assert decision.remark == "Broker metadata is not existed"


def test_altering_a_group_without_master_names_the_leader_null() -> None:
    cluster = Cluster().with_master(1)
    run(cluster.replicas, cluster.elect())  # nobody alive: the master is gone
    decision = cluster.alter({1, 2}, master_epoch=2)
    assert decision.code == ResponseCode.CONTROLLER_INVALID_MASTER
    assert decision.remark == f"{REJECTING} the current leader is:{{null}}, not {{1}}"


def test_a_successful_alter_increments_the_set_epoch() -> None:
    cluster = altering_group()
    decision = cluster.alter({1, 2})
    assert decision.code == ResponseCode.SUCCESS
    fields, raw = run(cluster.replicas, decision)
    assert fields == {"newSyncStateSetEpoch": "2"}
    assert body(raw) == {"syncStateSet": [1, 2], "syncStateSetEpoch": 2}
    assert cluster.group.master_epoch == 1
    shrink = cluster.alter({1}, set_epoch=2)
    assert shrink.code == ResponseCode.SUCCESS
    fields, raw = run(cluster.replicas, shrink)
    assert body(raw) == {"syncStateSet": [1], "syncStateSetEpoch": 3}


def test_an_alter_decided_at_an_old_set_epoch_and_applied_late_changes_nothing() -> None:
    cluster = altering_group()
    cluster.beat(3)
    first = cluster.alter({1, 2})
    late = cluster.alter({1, 3})
    run(cluster.replicas, first)
    run(cluster.replicas, late)
    assert cluster.group.sync_state_set == {1, 2}
    assert cluster.group.sync_state_set_epoch == 2


def test_an_alter_decided_before_an_election_and_applied_after_it_changes_nothing() -> None:
    cluster = altering_group()
    alter = cluster.alter({1, 2})
    # The master dies; the scan finds nobody, so the set epoch stays and only the master
    # epoch fences the old master's request.
    cluster.now.ms += TIMEOUT_MS + 1
    run(cluster.replicas, cluster.elect())
    assert cluster.group.sync_state_set_epoch == 1
    run(cluster.replicas, alter)
    assert cluster.group.sync_state_set == {1}
    assert cluster.group.sync_state_set_epoch == 1


# -- cleaning ----------------------------------------------------------------------------------
def clean(cluster: Cluster, ids: list[int] | None, *, living: bool = False) -> Decision:
    return clean_broker_data(
        cluster.replicas, GROUP, ids, clean_living=living, alive=cluster.live.alive
    )


def test_cleaning_an_unknown_group_is_refused() -> None:
    nobody = ReplicasInfo()
    decision = clean_broker_data(nobody, GROUP, None, clean_living=True, alive=lambda _g, _i: False)
    assert decision.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert decision.remark == "Broker broker-a is not existed,clean broker data failure."


def test_cleaning_a_whole_group_with_a_master_is_refused_unless_living_ones_may_go() -> None:
    cluster = Cluster().with_master(1)
    refused = clean(cluster, None)
    assert refused.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert refused.remark == "Broker broker-a is still alive, clean up failure"
    allowed = clean(cluster, None, living=True)
    assert allowed.code == ResponseCode.SUCCESS
    assert run(cluster.replicas, allowed) == ({}, b"")
    assert GROUP not in cluster.replicas.groups


def test_cleaning_an_alive_broker_is_refused() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(2)
    decision = clean(cluster, [3, 2])
    assert decision.code == ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    assert decision.remark == "Broker [broker-a,  2] is still alive, clean up failure"


def test_cleaning_dead_brokers_removes_them_from_the_replicas_and_the_set() -> None:
    cluster = Cluster().with_master(1)
    cluster.beat(1)
    cluster.beat(2)
    run(cluster.replicas, cluster.alter({1, 2}))
    cluster.now.ms += TIMEOUT_MS + 1
    decision = clean(cluster, [1, 2])
    assert decision.code == ResponseCode.SUCCESS
    run(cluster.replicas, decision)
    group = cluster.group
    assert set(group.replicas) == {3}
    assert group.sync_state_set == set()
    assert group.master_id is None
    run(cluster.replicas, clean(cluster, [3]))
    assert GROUP not in cluster.replicas.groups  # its last replica went


def test_a_group_without_master_may_be_cleaned_whole() -> None:
    cluster = Cluster()
    decision = clean(cluster, None)
    assert decision.code == ResponseCode.SUCCESS
    run(cluster.replicas, decision)
    assert cluster.replicas.groups == {}


# -- applying and snapshots --------------------------------------------------------------------
def test_an_event_of_unknown_type_changes_nothing() -> None:
    cluster = Cluster()
    before = cluster.replicas.to_bytes()
    cluster.replicas.apply({"type": "renameBroker", "group": GROUP})
    assert cluster.replicas.to_bytes() == before


def test_a_snapshot_loads_into_the_same_tables() -> None:
    cluster = altering_group()
    run(cluster.replicas, cluster.alter({1, 2}))
    run(cluster.replicas, register_broker(cluster.replicas, GROUP, 3, "10.0.0.3:1", lambda _: True))
    image = cluster.replicas.to_bytes()
    restored = ReplicasInfo()
    restored.load(image)
    assert restored.to_bytes() == image
    assert restored.applied_events == cluster.replicas.applied_events
    group = restored.groups[GROUP]
    assert group.replicas[3].address == "10.0.0.3:1"
    assert group.replicas[3].check_code == f"{address(3)};1700000000000"
    assert (group.master_id, group.master_epoch) == (1, 1)
    assert (group.sync_state_set, group.sync_state_set_epoch) == ({1, 2}, 2)
    restored.load(b"")
    assert (restored.groups, restored.applied_events) == ({}, 0)


def test_the_state_machine_applies_a_command_as_its_events_and_skips_junk() -> None:
    direct = altering_group()
    decisions = [direct.alter({1, 2})]
    replayed = ReplicasInfo()
    machine = ControllerStateMachine(replayed)
    machine.restore(Cluster().with_master(1).replicas.to_bytes())
    for decision in decisions:
        run(direct.replicas, decision)
        machine.apply(7, encode_events(decision.events))
    machine.apply(8, b"not json")
    machine.apply(9, b"")
    assert machine.snapshot() == direct.replicas.to_bytes()
