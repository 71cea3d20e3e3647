"""The master's SyncStateSet and the write rule it implies (RocketMQ's `AutoSwitchHAService`
and `CommitLog.calcNeedAckNums`): which acknowledgements a put waits for, when puts are
refused, and how the set grows and shrinks.
"""

from __future__ import annotations

from typing import Any

from pocketmq.broker.controlled.sync_state import SyncStateSet
from pocketmq.broker.ha.master import SlaveConnection
from pocketmq.common.ha_qos import Qos
from pocketmq.store.config import MessageStoreConfig

MASTER = 1
LIMIT_MS = 15_000


class FakeNow:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Fence:
    """The controller lease as the replica sees it: why puts are fenced, or None."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def __call__(self) -> str | None:
        return self.reason


def config(**settings: Any) -> MessageStoreConfig:
    return MessageStoreConfig(ha_max_time_slave_not_catchup_ms=LIMIT_MS, **settings)


def rule(
    members: set[int], store: MessageStoreConfig | None = None, *, epoch: int = 1
) -> tuple[SyncStateSet, FakeNow, Fence]:
    now, fence = FakeNow(), Fence()
    sync = SyncStateSet(MASTER, members, epoch, store or config(), fenced=fence, now_ms=now)
    return sync, now, fence


def slave(
    broker_id: int, ack: int, *, caught_up_ms: int = 0, connected_ms: int = 0
) -> SlaveConnection:
    # Built outside an event loop: Python >= 3.10 binds an asyncio.Event to a loop only on use.
    return SlaveConnection(
        address=f"127.0.0.1:{30910 + broker_id}", connected_ms=connected_ms, ack_offset=ack,
        broker_id=broker_id, caught_up_ms=caught_up_ms,
    )  # fmt: skip


# -- the write rule ----------------------------------------------------------------------------
def test_all_ack_waits_for_the_slowest_member() -> None:
    sync, _, _ = rule({1, 2, 3}, config(all_ack_in_sync_state_set=True))
    connections = {slave(2, 500), slave(3, 300), slave(4, 900)}  # 4 is no member
    assert sync.acked_through(connections, head=600) == 300
    assert sync.acknowledged == 300


def test_all_ack_with_a_member_not_connected_acknowledges_nothing() -> None:
    sync, _, _ = rule({1, 2, 3}, config(all_ack_in_sync_state_set=True))
    assert sync.acked_through({slave(2, 500)}, head=600) == -1
    assert sync.acknowledged == 0


def test_all_ack_with_only_the_master_acknowledges_its_head() -> None:
    sync, _, _ = rule(set(), config(all_ack_in_sync_state_set=True))
    assert sync.members == {MASTER}
    assert sync.acked_through({slave(2, 100)}, head=600) == 600
    assert sync.acknowledged == 600


def test_in_sync_replicas_counts_the_master_as_one_copy() -> None:
    sync, _, _ = rule({1, 2, 3}, config(in_sync_replicas=2))
    assert sync.needed() == 2
    assert sync.acked_through({slave(2, 500), slave(3, 300)}, head=600) == 500
    sync3, _, _ = rule({1, 2, 3}, config(in_sync_replicas=3))
    assert sync3.acked_through({slave(2, 500), slave(3, 300)}, head=600) == 300
    assert sync3.acked_through({slave(2, 500)}, head=600) == -1


def test_in_sync_replicas_counts_members_only() -> None:
    sync, _, _ = rule({1, 2}, config(in_sync_replicas=2))
    assert sync.acked_through({slave(2, 100), slave(3, 900)}, head=900) == 100


def test_one_in_sync_replica_is_the_master_alone() -> None:
    sync, _, _ = rule({1, 2}, config(in_sync_replicas=1))
    assert sync.acked_through(set(), head=700) == 700


def test_acknowledged_never_moves_back_nor_past_the_head() -> None:
    sync, _, _ = rule({1, 2}, config(all_ack_in_sync_state_set=True))
    sync.acked_through({slave(2, 500)}, head=600)
    sync.acked_through({slave(2, 200)}, head=600)
    assert sync.acknowledged == 500
    sync.acked_through({slave(2, 900)}, head=600)
    assert sync.acknowledged == 600


def test_auto_in_sync_replicas_needs_no_more_than_the_set_has() -> None:
    sync, _, _ = rule({1, 2}, config(in_sync_replicas=3, enable_auto_in_sync_replicas=True))
    assert sync.needed() == 2
    assert sync.acked_through({slave(2, 400)}, head=600) == 400
    fixed, _, _ = rule({1, 2}, config(in_sync_replicas=3))
    assert fixed.needed() == 3
    assert fixed.acked_through({slave(2, 400)}, head=600) == -1


def test_auto_in_sync_replicas_needs_no_fewer_than_min_in_sync_replicas() -> None:
    store = config(in_sync_replicas=3, min_in_sync_replicas=2, enable_auto_in_sync_replicas=True)
    sync, _, _ = rule(set(), store)
    assert sync.needed() == 2


def test_auto_in_sync_replicas_below_min_in_sync_replicas_still_needs_the_minimum() -> None:
    """RocketMQ's `calcNeedAckNums`: max(min(inSyncReplicas, in sync), minInSyncReplicas)."""
    store = config(in_sync_replicas=1, min_in_sync_replicas=2, enable_auto_in_sync_replicas=True)
    sync, _, _ = rule({1, 2}, store)
    assert sync.needed() == 2
    assert sync.acked_through({slave(2, 400)}, head=600) == 400


def test_a_set_smaller_than_min_in_sync_replicas_refuses_puts() -> None:
    sync, _, _ = rule({1}, config(min_in_sync_replicas=2))
    assert sync.refusal() == (
        "in-sync replicas not enough: 1 in the SyncStateSet [1], minInSyncReplicas=2"
    )
    big_enough, _, _ = rule({1, 2}, config(min_in_sync_replicas=2))
    assert big_enough.refusal() is None


def test_a_fenced_master_refuses_puts_whatever_its_set() -> None:
    sync, _, fence = rule({1, 2, 3})
    assert sync.refusal() is None
    fence.reason = "the controller lease ran out"
    assert sync.refusal() == "the controller lease ran out"


# -- growing -----------------------------------------------------------------------------------
def test_a_caught_up_slave_counts_at_once_while_the_controller_is_asked() -> None:
    sync, now, _ = rule({1}, config(all_ack_in_sync_state_set=True, min_in_sync_replicas=2))
    asked: list[set[int] | None] = []
    sync.wanted = lambda: asked.append(sync.pending)
    assert sync.refusal() is not None
    sync.acked_through(set(), head=400)  # the master alone acknowledged up to 400
    sync.reported(slave(2, 400, caught_up_ms=now.ms))
    assert sync.pending == {1, 2}
    assert sync.counted() == {1, 2}
    assert sync.members == {1}
    assert asked == [{1, 2}]
    assert sync.refusal() is None
    # Puts wait for it from now on.
    assert sync.acked_through({slave(2, 450)}, head=500) == 450
    assert sync.proposal({slave(2, 450)}, grace_over=False) == {1, 2}


def test_a_slave_behind_what_was_acknowledged_does_not_join() -> None:
    sync, now, _ = rule({1}, config(all_ack_in_sync_state_set=True, ha_semi_sync_gap=0))
    sync.acked_through(set(), head=400)
    sync.reported(slave(2, 399, caught_up_ms=now.ms))
    sync.reported(SlaveConnection(address="127.0.0.1:30999", connected_ms=0, ack_offset=500))
    assert sync.pending is None
    assert sync.counted() == {1}
    # At the acknowledged end but never caught up with the head: held for, not joined yet.
    sync.reported(slave(3, 400, caught_up_ms=0))
    assert sync.pending is None
    assert sync.holding == 3
    # Within a larger gap, the one a byte behind would be held for instead (one at a time).
    sync.holding = None
    sync._config.ha_semi_sync_gap = 10
    sync.reported(slave(2, 399, caught_up_ms=now.ms))
    assert sync.pending is None
    assert sync.holding == 2


def test_a_member_reporting_again_asks_nothing() -> None:
    sync, now, _ = rule({1, 2})
    asked: list[int] = []
    sync.wanted = lambda: asked.append(1)
    sync.reported(slave(2, 0, caught_up_ms=now.ms))
    assert (sync.pending, asked) == (None, [])


# -- shrinking ---------------------------------------------------------------------------------
def test_shrink_candidates_are_members_gone_or_behind_too_long() -> None:
    sync, now, _ = rule({1, 2, 3, 4, 5})
    connections = {
        slave(2, 0, caught_up_ms=now.ms - LIMIT_MS),  # at the limit: stays
        slave(3, 0, caught_up_ms=now.ms - LIMIT_MS - 1),
        slave(4, 0, caught_up_ms=0, connected_ms=now.ms - 10),  # just connected: grace
        slave(6, 0, caught_up_ms=0),  # no member
    }
    assert sync.shrink_candidates(connections) == {3, 5}
    assert sync.proposal(connections, grace_over=False) is None
    assert sync.proposal(connections, grace_over=True) == {1, 2, 4}
    now.ms += LIMIT_MS + 11
    assert sync.shrink_candidates(connections) == {2, 3, 4, 5}


def test_a_master_alone_has_nothing_to_shrink() -> None:
    sync, _, _ = rule(set())
    assert sync.shrink_candidates(set()) == set()
    assert sync.proposal(set(), grace_over=True) is None


# -- the controller's answers ------------------------------------------------------------------
def test_an_accepted_set_replaces_the_members_and_ends_the_pending_change() -> None:
    sync, now, _ = rule({1}, epoch=3)
    sync.reported(slave(2, 0, caught_up_ms=now.ms))
    sync.accepted({1, 2}, 4)
    assert (sync.members, sync.epoch, sync.pending) == ({1, 2}, 4, None)
    sync.accepted({2}, 5)  # a set announced without the master still counts it
    assert sync.members == {1, 2}


def test_an_older_set_is_ignored() -> None:
    sync, _, _ = rule({1, 2}, epoch=4)
    sync.accepted({1, 3}, 3)
    assert (sync.members, sync.epoch) == ({1, 2}, 4)


def test_a_rejected_change_stops_counting_the_slave() -> None:
    sync, now, _ = rule({1})
    sync.reported(slave(2, 0, caught_up_ms=now.ms))
    sync.rejected()
    assert sync.pending is None
    assert sync.counted() == {1}
    assert sync.proposal(set(), grace_over=True) is None


# -- QoS and the replication states --------------------------------------------------------------
def test_a_slave_nearly_caught_up_is_held_for_and_joins_once_it_closes_the_gap() -> None:
    """SEMI_SYNC: under load the acknowledged end runs ahead of a slave that keeps up; held
    for, it counts at once (puts wait for it), and joins when it reached the end it had to."""
    sync, now, _ = rule({MASTER}, config(all_ack_in_sync_state_set=True, ha_semi_sync_gap=1000))
    wanted: list[bool] = []
    sync.wanted = lambda: wanted.append(True)
    sync.acked_through(set(), 5_000)  # the master alone acknowledged up to 5,000
    behind = slave(2, 4_500, caught_up_ms=now.ms)
    sync.reported(behind)
    assert sync.holding == 2
    assert sync.counted() == {MASTER, 2}
    assert sync.state.value == "SEMI_SYNC"
    assert sync.acked_through({behind}, 6_000) == 4_500  # puts now wait for it
    assert not wanted
    behind.ack_offset = 5_000
    sync.reported(behind)
    assert sync.holding is None
    assert sync.pending == {MASTER, 2}
    assert wanted == [True]
    sync.accepted({MASTER, 2}, 2)
    assert sync.observe(slaves_connected=True).value == "SYNC"
    assert [state.value for _, state in sync.transitions] == ["SEMI_SYNC", "SYNC"]


def test_a_slave_further_behind_than_the_gap_is_not_held_for() -> None:
    sync, now, _ = rule({MASTER}, config(ha_semi_sync_gap=1000))
    sync.acked_through(set(), 5_000)
    sync.reported(slave(2, 3_000, caught_up_ms=now.ms))
    assert sync.holding is None
    assert sync.counted() == {MASTER}
    assert sync.state.value == "ASYNC"


def test_availability_gives_up_holding_after_the_hold_time_no_loss_does_not() -> None:
    for qos, gives_up in (("AVAILABILITY", True), ("NO_LOSS", False)):
        sync, now, _ = rule({MASTER}, config(ha_semi_sync_gap=1000, ha_semi_sync_hold_ms=500))
        sync.qos = Qos(qos)
        sync.acked_through(set(), 5_000)
        sync.reported(slave(2, 4_900, caught_up_ms=now.ms))
        assert sync.holding == 2
        now.ms += 400
        assert not sync.give_up_holding()
        now.ms += 200
        assert sync.give_up_holding() is gives_up
        assert (sync.holding is None) is gives_up


def test_no_loss_acknowledges_nothing_on_one_copy_and_never_shrinks_below_two() -> None:
    sync, now, _ = rule({MASTER}, config(all_ack_in_sync_state_set=True))
    sync.qos = Qos.NO_LOSS
    assert sync.refusal() is not None
    assert "NO_LOSS" in (sync.refusal() or "")
    sync.accepted({MASTER, 2, 3}, 2)
    assert sync.refusal() is None
    now.ms += 2 * LIMIT_MS
    lagging = {slave(2, 0, connected_ms=0), slave(3, 0, connected_ms=0)}
    assert sync.shrink_candidates(lagging) == {2, 3}
    assert sync.proposal(lagging, grace_over=True) is None
    sync.qos = Qos.AVAILABILITY
    assert sync.proposal(lagging, grace_over=True) == {MASTER}


def test_the_states_follow_the_slaves() -> None:
    sync, _, _ = rule({MASTER})
    assert sync.observe(slaves_connected=False).value == "SINGLE_MASTER"
    assert sync.observe(slaves_connected=True).value == "ASYNC"
    sync.accepted({MASTER, 2}, 2)
    assert sync.observe(slaves_connected=True).value == "SYNC"
    sync.accepted({MASTER}, 3)
    assert sync.observe(slaves_connected=False).value == "SINGLE_MASTER"
    assert [s.value for _, s in sync.transitions] == ["ASYNC", "SYNC", "SINGLE_MASTER"]
