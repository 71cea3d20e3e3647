"""Scripted Raft scenarios on the simulated network: each drives the cluster into a known
corner and checks what the paper says must happen there."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pocketmq.raft.core import Raft, Role
from pocketmq.raft.messages import Message, MessageType
from pocketmq.raftkv.store import put_command
from tests.simulation.checker import SafetyViolation
from tests.simulation.harness import Simulation
from tests.simulation.mutants import CommitsByCount


def node(sim: Simulation, node_id: int) -> Raft:
    raft = sim.nodes[node_id].raft
    assert raft is not None, f"node {node_id} is down"
    return raft


def force_campaign(sim: Simulation, node_id: int) -> None:
    """Makes a node campaign now, as a leader handing over would (TIMEOUT_NOW)."""
    raft = node(sim, node_id)
    if raft.role is Role.CANDIDATE:  # a stalled campaign: only a follower takes TIMEOUT_NOW
        raft.become_follower(raft.term, 0)
    raft.step(Message(MessageType.TIMEOUT_NOW, 0, node_id, raft.term))


def elect(sim: Simulation, node_id: int) -> None:
    for _ in range(3):  # a campaign may lose to votes already given in its term: try the next
        force_campaign(sim, node_id)
        sim.run(5 * 10)
        if node(sim, node_id).role is Role.LEADER:
            return
    raise AssertionError(f"node {node_id} was not elected")


def isolate(sim: Simulation, node_id: int, *, from_nodes: list[int]) -> None:
    for other in from_nodes:
        sim.blocked |= {(node_id, other), (other, node_id)}


def figure_8(raft_class: type[Raft]) -> tuple[Simulation, int]:
    """Raft paper §5.4.2, Figure 8, on five nodes; returns the cluster and the contested index."""
    sim = Simulation.scripted(5, raft_class)
    elect(sim, 1)
    # (a) node 1 replicates an entry of its term to node 2 only, and crashes.
    isolate(sim, 1, from_nodes=[3, 4, 5])
    contested = node(sim, 1).propose(put_command("x", "from node 1"))
    assert contested is not None
    sim.run_until(lambda: node(sim, 2).log.last_index >= contested, 5, "node 2 has it")
    sim.crash(1)
    sim.blocked.clear()
    # (b) node 5 is elected by 3 and 4, appends an entry at that index that reaches no one,
    # and crashes.
    sim.alter = lambda m: None if m.src == 5 and m.type is MessageType.APPEND else m
    elect(sim, 5)
    assert node(sim, 5).log.last_index == contested
    sim.crash(5)
    # (c) node 1 returns, is elected, and brings the contested entry to a majority (1, 2, 3, 4)
    # while the entries of its new term reach no one.
    sim.start(1)
    old_term = node(sim, 1).log.term(contested)

    def without_new_term(m: Message) -> Message | None:
        if m.type is not MessageType.APPEND:
            return m
        if m.src == 5:
            return None  # still in flight from (b)
        return replace(m, entries=tuple(e for e in m.entries if e.term == old_term))

    sim.alter = without_new_term
    elect(sim, 1)
    sim.run_until(
        lambda: all(node(sim, i).log.term(contested) == old_term for i in (3, 4)),
        10,
        "the contested entry on nodes 3 and 4",
    )
    sim.crash(1)
    # (d) node 5 returns; its last entry's term is the highest, so it wins and overwrites.
    sim.start(5)
    sim.alter = lambda m: m
    elect(sim, 5)
    sim.frozen.clear()  # heartbeats carry the commit index to the followers
    sim.run_until(
        lambda: all(node(sim, i).log.committed > contested for i in (2, 3, 4, 5)), 20, "commit"
    )
    return sim, contested


def test_figure_8_an_old_term_entry_on_a_majority_is_not_committed() -> None:
    sim, contested = figure_8(Raft)
    term, data = sim.checker.committed[contested]
    assert term == node(sim, 5).log.term(contested)
    assert b"from node 1" not in data


def test_checker_catches_committing_an_old_term_by_count() -> None:
    with pytest.raises(SafetyViolation, match="leader completeness"):
        figure_8(CommitsByCount)


def test_a_node_back_from_a_partition_does_not_depose_a_healthy_leader() -> None:
    """Pre-vote and check-quorum (Ongaro's thesis §9.6)."""
    sim = Simulation.scripted(3)
    sim.frozen.clear()
    sim.run_until(lambda: sim.agreed_leader() is not None, 50, "a leader")
    leader = sim.agreed_leader()
    assert leader is not None
    term = leader.term
    cut = next(i for i in sim.ids if i != leader.id)
    isolate(sim, cut, from_nodes=[i for i in sim.ids if i != cut])
    sim.run(30 * 10)  # 30 ticks: three election timeouts alone
    assert node(sim, cut).term == term, "pre-vote: a lone node does not raise its term"
    sim.blocked.clear()
    sim.run(30 * 10)
    assert leader.role is Role.LEADER
    assert leader.term == term


def test_a_leader_cut_off_from_the_majority_steps_down() -> None:
    sim = Simulation.scripted(3)
    sim.frozen.clear()
    sim.run_until(lambda: sim.agreed_leader() is not None, 50, "a leader")
    leader = sim.agreed_leader()
    assert leader is not None
    isolate(sim, leader.id, from_nodes=[i for i in sim.ids if i != leader.id])
    sim.run_until(lambda: leader.role is not Role.LEADER, 25, "check-quorum")
    sim.run_until(
        lambda: any(node(sim, i).role is Role.LEADER for i in sim.ids if i != leader.id),
        50,
        "a new leader on the majority side",
    )


def test_leadership_transfer_hands_over_to_a_caught_up_node() -> None:
    sim = Simulation.scripted(3)
    elect(sim, 1)
    for n in range(20):
        node(sim, 1).propose(put_command(f"k{n}", "v"))
    assert node(sim, 1).transfer_leadership(3)
    assert node(sim, 1).propose(b"refused") is None, "no proposals while handing over"
    sim.run_until(lambda: node(sim, 3).role is Role.LEADER, 10, "node 3 leading")
    assert node(sim, 1).role is Role.FOLLOWER
    sim.frozen.clear()
    sim.run_until(lambda: sim.nodes[1].kv.get("k19") == "v", 20, "every write applied")


def test_read_index_is_served_only_once_a_quorum_confirms_the_leader() -> None:
    """Ongaro's thesis §6.4: the leader checks it still leads before answering a read."""
    sim = Simulation.scripted(3)
    elect(sim, 2)
    leader = node(sim, 2)
    index = leader.propose(put_command("k", "v1"))
    assert index is not None
    sim.run_until(lambda: leader.log.committed >= index, 5, "commit")
    isolate(sim, 2, from_nodes=[1, 3])
    assert leader.read_index(b"read-1")
    sim._reads[b"read-1"] = index  # the harness checks the read point covers this write
    sim.run(30)
    assert sim.reads_served == 0, "served without confirming leadership"
    sim.blocked.clear()
    sim.frozen.clear()  # the next heartbeat carries the pending read
    sim.run_until(lambda: sim.reads_served == 1, 5, "the read")


def test_a_follower_far_behind_catches_up_from_a_snapshot() -> None:
    sim = Simulation.scripted(3)
    sim.compact_every = 10
    elect(sim, 1)
    sim.crash(3)
    for n in range(60):
        node(sim, 1).propose(put_command(f"k{n}", str(n)))
    sim.run_until(lambda: node(sim, 1).log.snapshot.index >= 50, 20, "compaction on the leader")
    sim.start(3)
    sim.frozen.clear()
    sim.run_until(lambda: sim.nodes[3].kv.get("k59") == "59", 50, "node 3 restored")
    assert node(sim, 3).log.snapshot.index > 0
