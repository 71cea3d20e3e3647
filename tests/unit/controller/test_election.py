"""Who becomes master (RocketMQ's `DefaultElectPolicy`): the old master while it is alive and in
the set, else the alive member with the highest epoch, then the longest CommitLog, then the best
priority; outside the set only with `enableElectUncleanMaster`.
"""

from __future__ import annotations

from pocketmq.controller.election import elect
from pocketmq.controller.heartbeats import LiveBroker
from pocketmq.controller.replicas import BrokerGroup, Replica

GROUP = "broker-a"


def group(
    ids: tuple[int, ...] = (1, 2, 3, 4),
    *,
    master: int | None = 1,
    in_set: set[int] | None = None,
    master_epoch: int = 3,
) -> BrokerGroup:
    return BrokerGroup(
        "DefaultCluster",
        GROUP,
        replicas={i: Replica(f"127.0.0.1:{30910 + i}") for i in ids},
        master_id=master,
        master_epoch=master_epoch,
        sync_state_set={1, 2, 3} if in_set is None else in_set,
        sync_state_set_epoch=5,
    )


class Heartbeats:
    """The alive brokers of the group and what their last heartbeats said."""

    def __init__(self, *brokers: LiveBroker) -> None:
        self.brokers = {b.broker_id: b for b in brokers}

    def __call__(self, broker_id: int) -> LiveBroker | None:
        return self.brokers.get(broker_id)


def alive(broker_id: int, *, epoch: int = 3, max_offset: int = 0, priority: int = 0) -> LiveBroker:
    return LiveBroker(
        "DefaultCluster", GROUP, broker_id, f"127.0.0.1:{30910 + broker_id}", last_ms=0,
        timeout_ms=10_000, epoch=epoch, max_offset=max_offset, priority=priority,
    )  # fmt: skip


def test_the_old_master_stays_while_it_is_alive_and_in_the_set() -> None:
    live = Heartbeats(alive(1, max_offset=10), alive(2, epoch=4, max_offset=99))
    election = elect(group(), live, unclean=False)
    assert (election.master, election.why) == (1, "the old master is alive")


def test_without_keep_old_the_old_master_competes_like_the_others() -> None:
    live = Heartbeats(alive(1, max_offset=10), alive(2, max_offset=99))
    assert elect(group(), live, unclean=False, keep_old=False).master == 2


def test_an_old_master_outside_the_set_is_not_kept() -> None:
    live = Heartbeats(alive(1, max_offset=99), alive(2, max_offset=10))
    assert elect(group(in_set={2, 3}), live, unclean=False).master == 2


def test_the_highest_epoch_wins_over_a_longer_commit_log() -> None:
    live = Heartbeats(alive(2, epoch=3, max_offset=1 << 40), alive(3, epoch=4, max_offset=1))
    election = elect(group(), live, unclean=False)
    assert (election.master, election.why) == (3, "from the SyncStateSet")


def test_in_the_same_epoch_the_longest_commit_log_wins_over_priority() -> None:
    live = Heartbeats(alive(2, max_offset=100, priority=9), alive(3, max_offset=200, priority=9))
    assert elect(group(), live, unclean=False).master == 3
    live = Heartbeats(alive(2, max_offset=100, priority=0), alive(3, max_offset=200, priority=9))
    assert elect(group(), live, unclean=False).master == 3


def test_at_equal_offsets_the_smaller_priority_wins_then_the_smaller_id() -> None:
    live = Heartbeats(alive(2, max_offset=100, priority=5), alive(3, max_offset=100, priority=1))
    assert elect(group(), live, unclean=False).master == 3
    live = Heartbeats(alive(3, max_offset=100), alive(2, max_offset=100))
    assert elect(group(), live, unclean=False).master == 2


def test_dead_members_are_not_candidates() -> None:
    live = Heartbeats(alive(3, max_offset=1))
    assert elect(group(), live, unclean=False).master == 3


def test_outside_the_set_only_when_unclean_and_no_member_is_alive() -> None:
    live = Heartbeats(alive(4, epoch=9, max_offset=1 << 40))
    clean = elect(group(), live, unclean=False)
    assert clean.master is None
    assert clean.why == (
        "no alive replica of broker-a may become master (SyncStateSet [1, 2, 3], "
        "enableElectUncleanMaster=false)"
    )
    unclean = elect(group(), live, unclean=True)
    assert (unclean.master, unclean.why) == (4, "unclean, outside the SyncStateSet")
    # An alive member is always preferred, however far behind it is.
    live = Heartbeats(alive(2, epoch=1), alive(4, epoch=9, max_offset=1 << 40))
    assert elect(group(), live, unclean=True).master == 2


def test_a_new_group_with_an_empty_set_picks_among_its_alive_replicas() -> None:
    fresh = group(master=None, in_set=set(), master_epoch=0)
    live = Heartbeats(alive(2, max_offset=5), alive(4, max_offset=50))
    election = elect(fresh, live, unclean=False)
    assert (election.master, election.why) == (4, "from a new group")
    assert elect(fresh, Heartbeats(), unclean=False).master is None


def test_a_group_whose_set_was_cleaned_elects_nobody_without_unclean_election() -> None:
    """An emptied set after masters existed is not a new group: whoever is alive may lack
    acknowledged messages."""
    cleaned = group(master=None, in_set=set())
    live = Heartbeats(alive(2), alive(4))
    assert elect(cleaned, live, unclean=False).master is None
    assert elect(cleaned, live, unclean=True).master in (2, 4)


def test_a_designated_broker_must_be_an_alive_replica() -> None:
    live = Heartbeats(alive(1), alive(2))
    unknown = elect(group(), live, unclean=True, designated=7)
    assert (unknown.master, unknown.why) == (None, "broker 7 is not a replica of broker-a")
    dead = elect(group(), live, unclean=True, designated=3)
    assert (dead.master, dead.why) == (None, "broker 3 of broker-a is not alive")


def test_a_designated_member_wins_even_when_worse_placed() -> None:
    live = Heartbeats(alive(1, max_offset=99), alive(2, epoch=1, max_offset=0))
    election = elect(group(), live, unclean=False, designated=2)
    assert (election.master, election.why) == (2, "designated")


def test_a_designated_broker_outside_the_set_needs_unclean() -> None:
    live = Heartbeats(alive(1), alive(4))
    refused = elect(group(), live, unclean=False, designated=4)
    assert refused.master is None
    assert refused.why == (
        "broker 4 is not in the SyncStateSet [1, 2, 3] of broker-a (enableElectUncleanMaster=false)"
    )
    assert elect(group(), live, unclean=True, designated=4).master == 4
