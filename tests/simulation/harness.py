"""A seeded Raft cluster on a fake network and a fake clock.

One seed decides everything: the fault profile (loss, duplication, delay and so reordering),
when partitions (symmetric or one-way) come and go, which nodes crash (losing all but their
disk) and restart, where a crash falls against the persistence boundary (before a `Ready` is
persisted, after it is persisted but before anything is sent, right after a vote went out),
when several election timers run out at once, each node's clock drift, and the client load:
writes, many read-index reads and leadership transfers. One step is one millisecond of
simulated time. Safety is checked after every delivered message and every `Ready`; the client
history is checked for linearizability at the end.

Replay a seed: python -m tests.simulation.harness --seed N --nodes 3 --steps 2000
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pocketmq.raft.core import Raft, RaftConfig, Role
from pocketmq.raft.messages import Message, MessageType, Ready
from pocketmq.raft.storage import MemoryStorage
from pocketmq.raftkv.store import KeyValueStore, put_command
from tests.simulation.checker import SafetyChecker, SafetyViolation, state_digest
from tests.simulation.linearizability import History, Operation

TICK_MS = 10
ELECTION_BOUND = 50
"""After every fault heals, one leader is known to every node within this many ticks (five
election timeouts)."""
CATCH_UP_BOUND = 500
"""...and every node has applied what it commits next within this many more (the backlog
left by the faults may be long on the slowest networks the seeds pick)."""


class ReplicatedState(Protocol):
    """What the simulation needs of a node's state machine (`KeyValueStore` by default)."""

    applied: int

    def apply(self, index: int, command: bytes) -> object: ...

    def snapshot(self) -> bytes: ...

    def restore(self, image: bytes) -> None: ...

    def get(self, key: str) -> str | None: ...


@dataclass
class SimNode:
    id: int
    storage: MemoryStorage = field(default_factory=MemoryStorage)
    raft: Raft | None = None
    kv: ReplicatedState = field(default_factory=KeyValueStore)
    tick_ms: int = TICK_MS
    phase: int = 0
    writes: dict[int, tuple[Operation, bytes]] = field(default_factory=dict)
    """Log index -> a client write this node took, answered once it applies that index."""
    reads: list[tuple[int, bytes]] = field(default_factory=list)
    """Confirmed read points (index, context) waiting for the state machine to apply them."""


class Simulation:
    def __init__(self, seed: int, nodes: int, raft_class: type[Raft] = Raft) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        rng = self.rng
        self.raft_class = raft_class
        self.ids = list(range(1, nodes + 1))
        self.checker = self.new_checker()
        self.now = 0
        self._network: list[tuple[int, int, Message]] = []
        self._sequence = 0
        self.blocked: set[tuple[int, int]] = set()
        self.loss = rng.choice([0.0, 0.01, 0.05, 0.15])
        self.duplication = rng.choice([0.0, 0.01, 0.05])
        self.max_delay = rng.choice([1, 3, 10, 30])
        self.fault_rate = rng.choice([0.003, 0.01, 0.02])
        per_append, inflight = rng.choice([(1, 16), (4, 4), (64, 1), (64, 64)])
        self.config = RaftConfig(
            election_ticks=10,
            heartbeat_ticks=rng.choice([1, 2, 3]),
            max_entries_per_append=per_append,
            max_inflight=inflight,
        )
        self.crash_in_ready = rng.choice([0.0, 0.001, 0.005])
        """Chance per `Ready` of a crash before or after persisting it (nothing sent yet)."""
        self.crash_after_vote = rng.choice([0.1, 0.3, 0.6])
        """Chance that a node granting a vote crashes around persisting it (before, between
        persisting and sending, or right after sending) and restarts a few steps later."""
        self.compact_every = rng.choice([10, 30, 100])
        self.client_rate = rng.choice([0.05, 0.1])
        """Chance per step of a client burst of writes or reads, or a leadership transfer."""
        self.keys = rng.choice([2, 3, 5])
        self.proposals = 0
        self.history = History()
        self._reads: dict[bytes, int] = {}
        """Read context -> the commit index any node knew when the read began."""
        self._read_ops: dict[bytes, Operation] = {}
        self._read_count = 0
        self.reads_served = 0
        self._restarts: list[tuple[int, int]] = []
        """(step, node) of nodes that come back on their own after a crash around a vote."""
        self.frozen: set[int] = set()
        """Nodes whose clocks stand still (scripted scenarios decide who campaigns)."""
        self.alter: Callable[[Message], Message | None] = lambda message: message
        """What the network does to a message on delivery (None: drops it); for scripts."""
        self.nodes = {i: SimNode(i) for i in self.ids}
        for node in self.nodes.values():
            self.start(node.id)

    @classmethod
    def scripted(cls, nodes: int, raft_class: type[Raft] = Raft) -> Simulation:
        """A cluster with no random faults and no clocks: the script decides what happens."""
        sim = cls(0, nodes, raft_class)
        sim.loss = sim.duplication = sim.crash_in_ready = sim.fault_rate = sim.client_rate = 0.0
        sim.crash_after_vote = 0.0
        sim.max_delay = 1
        sim.compact_every = 1 << 30
        sim.frozen = set(sim.ids)
        sim.config = RaftConfig(max_entries_per_append=1)
        for node_id in sim.ids:
            sim.crash(node_id)
            sim.start(node_id)
        return sim

    # -- what a subclass replaces to run another state machine ------------------------------
    def new_checker(self) -> SafetyChecker:
        return SafetyChecker()

    def new_state(self, node_id: int) -> ReplicatedState:
        """A node's state machine as its disk holds it before the snapshot is restored."""
        return KeyValueStore()

    def digest(self, node: SimNode) -> int:
        """The node's state as a value equal replicas share (see `SafetyChecker.on_applied`)."""
        assert isinstance(node.kv, KeyValueStore)
        return state_digest(node.kv)

    def may_compact(self, raft: Raft) -> bool:
        return True

    def marker_command(self, marker: str) -> bytes:
        """The command `converge` commits once faults healed."""
        return put_command("converged", marker)

    def holds_marker(self, node: SimNode, marker: str) -> bool:
        return node.kv.get("converged") == marker

    # -- the loop ----------------------------------------------------------------------------
    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step(faults=True)

    def step(self, *, faults: bool) -> None:
        self.now += 1
        rng = self.rng
        if faults and rng.random() < self.fault_rate:
            self._fault()
        while self._restarts and self._restarts[0][0] <= self.now:
            _, node_id = heapq.heappop(self._restarts)
            if self.nodes[node_id].raft is None:
                self.start(node_id)
        for node in self.nodes.values():
            ticks = node.raft is not None and node.id not in self.frozen
            if node.raft is not None and ticks and (self.now + node.phase) % node.tick_ms == 0:
                node.raft.tick()
        self._deliver()
        if faults and rng.random() < self.client_rate:
            self._client()
        for node in self.nodes.values():
            if node.raft:
                self._process(node)
        for node in self.nodes.values():
            if node.raft:
                self.checker.on_step(node.raft)

    def heal(self) -> None:
        self.blocked.clear()
        self.loss = self.duplication = self.crash_in_ready = self.crash_after_vote = 0.0
        for node in self.nodes.values():
            if node.raft is None:
                self.start(node.id)

    def converge(self) -> tuple[int, int]:
        """Runs without faults or new client load until one leader is known to every node (at
        most ELECTION_BOUND ticks), then until a marker it commits is applied everywhere (at
        most CATCH_UP_BOUND ticks more); returns the ticks each took."""
        elected = self.run_until(
            self.agreed_leader, ELECTION_BOUND, "one leader known to all nodes once faults healed"
        )
        marker = str(self.seed)
        proposed_in: set[int] = set()

        def applied_everywhere() -> bool:
            leader = self.agreed_leader()
            # Proposed again in each new term: an earlier leader may have lost it (a transfer
            # still in flight when the faults healed can change the leader once more); refused
            # while a transfer is under way.
            fresh = leader is not None and leader.term not in proposed_in
            if fresh and leader and leader.propose(self.marker_command(marker)) is not None:
                proposed_in.add(leader.term)
            return all(self.holds_marker(n, marker) for n in self.nodes.values())

        caught_up = self.run_until(
            applied_everywhere,
            CATCH_UP_BOUND,
            "the marker applied on every node once faults healed",
        )
        served = self.reads_served
        asked: list[bool] = []

        def read_served() -> bool:
            leader = self.agreed_leader()
            if not asked and leader is not None:
                asked.append(self._read(leader, "k0"))
            return self.reads_served > served

        self.run_until(read_served, ELECTION_BOUND, "a read served once faults healed")
        return elected, caught_up

    def agreed_leader(self) -> Raft | None:
        """The leader every running node follows, if there is one."""
        leaders = {(n.raft.leader, n.raft.term) for n in self.nodes.values() if n.raft}
        if len(leaders) != 1:
            return None
        leader = self.nodes[next(iter(leaders))[0]].raft if next(iter(leaders))[0] else None
        return leader if leader is not None and leader.role is Role.LEADER else None

    def run_until(self, done: Callable[[], object], ticks: int, what: str) -> int:
        for spent in range(ticks * TICK_MS):
            if done():
                return spent // TICK_MS
            self.step(faults=False)
        raise SafetyViolation(f"liveness: not {what} within {ticks} ticks")

    # -- nodes ---------------------------------------------------------------------------------
    def start(self, node_id: int) -> None:
        """Starts a node from what its disk holds."""
        node = self.nodes[node_id]
        restored = node.storage.load()
        node.raft = self.raft_class(
            node.id,
            self.ids,
            self.config,
            random.Random(self.rng.random()),
            hard_state=restored.hard_state,
            snapshot=restored.snapshot,
            entries=restored.entries,
        )
        node.kv = self.new_state(node.id)
        node.kv.restore(restored.snapshot.data)
        node.tick_ms = TICK_MS + self.rng.choice([-2, -1, 0, 0, 1, 2])  # clock drift
        node.phase = self.rng.randrange(node.tick_ms)
        self.checker.on_restart(node.id, restored.snapshot)

    def crash(self, node_id: int) -> None:
        """Stops a node at once: what it had not persisted is gone, and so are its clients'
        pending requests (a write's outcome stays unknown)."""
        node = self.nodes[node_id]
        node.raft = None
        node.writes.clear()
        node.reads.clear()

    def _process(self, node: SimNode) -> None:
        raft = node.raft
        assert raft is not None
        rng = self.rng
        for _ in range(8):
            if not raft.has_ready():
                return
            ready = raft.ready()
            crash_at = ""
            if self.crash_after_vote and any(
                m.type is MessageType.VOTE_RESPONSE and not m.reject for m in ready.messages
            ):
                if rng.random() < self.crash_after_vote:
                    crash_at = rng.choice(
                        ["before persisting", "before sending", *["after sending"] * 3]
                    )
                    heapq.heappush(self._restarts, (self.now + rng.randint(0, 2), node.id))
            elif rng.random() < self.crash_in_ready:
                crash_at = rng.choice(["before persisting", "before sending"])
            if crash_at == "before persisting":
                self.crash(node.id)  # the vote, entries and commit index never reached the disk
                return
            self._persist(node, raft, ready)
            if crash_at == "before sending":
                self.crash(node.id)  # persisted, nothing sent yet
                return
            self._check_durable(node, raft, ready.messages)
            for message in ready.messages:
                self.checker.on_sent(message)
                self._send(message)
            if crash_at == "after sending":
                self.crash(node.id)
                return
            self._apply(node, raft, ready)
            raft.advance(ready)
            self.checker.on_step(raft)  # before compaction hides what was just committed
            behind = node.kv.applied - raft.log.snapshot.index
            if behind >= self.compact_every and self.may_compact(raft):
                snapshot = raft.compact(node.kv.applied, node.kv.snapshot())
                self.checker.on_compacted(node.id, snapshot)
                node.storage.apply_snapshot(snapshot)

    def _persist(self, node: SimNode, raft: Raft, ready: Ready) -> None:
        if ready.snapshot:
            node.storage.apply_snapshot(ready.snapshot)
            node.kv.restore(ready.snapshot.data)
            self.checker.on_snapshot_installed(node.id, ready.snapshot)
            for index in [i for i in node.writes if i <= ready.snapshot.index]:
                del node.writes[index]  # applied or not, this node cannot tell its client
        node.storage.append(ready.entries)
        self.checker.on_stored(raft, ready.entries)
        if ready.hard_state:
            node.storage.set_hard_state(ready.hard_state)
        node.storage.sync()

    def _check_durable(self, node: SimNode, raft: Raft, messages: list[Message]) -> None:
        """What a message promises must be on disk before it leaves: a granted vote, and the
        entries an append's acknowledgement says the node holds (Raft paper §5.1, Figure 2)."""
        promises = [
            m
            for m in messages
            if not m.reject
            and (
                m.type is MessageType.VOTE_RESPONSE
                or (m.type is MessageType.APPEND_RESPONSE and m.index)
            )
        ]
        if not promises:
            return
        disk = node.storage.load()
        first = disk.snapshot.index + 1
        last = first - 1 + len(disk.entries)
        for m in promises:
            if m.term < disk.hard_state.term:
                continue  # the node moved on to a later term within this Ready: superseded
            if m.type is MessageType.VOTE_RESPONSE:
                held = (disk.hard_state.term, disk.hard_state.vote)
                if held != (m.term, m.dst):
                    raise SafetyViolation(
                        f"durability: node {node.id} granted its vote in term {m.term} to node "
                        f"{m.dst} with (term, vote) {held} on disk"
                    )
                continue
            if m.index > last or (
                m.index >= first and disk.entries[m.index - first].term != raft.log.term(m.index)
            ):
                raise SafetyViolation(
                    f"durability: node {node.id} acknowledged index {m.index} (term "
                    f"{raft.log.term(m.index)}) with its disk holding up to {last}"
                )

    def _apply(self, node: SimNode, raft: Raft, ready: Ready) -> None:
        for entry in ready.committed:
            node.kv.apply(entry.index, entry.data)
            self.checker.on_applied(raft, entry, self.digest(node))
            write = node.writes.pop(entry.index, None)
            if write is not None and write[1] == entry.data:
                self.history.complete(write[0], self.now)
        for read in ready.read_states:
            required = self._reads.pop(read.context, None)
            if required is not None and read.index < required:
                raise SafetyViolation(
                    f"read index {read.index} on node {node.id} misses writes committed "
                    f"up to {required} before the read began"
                )
            node.reads.append((read.index, read.context))
        self._serve_reads(node)

    def _serve_reads(self, node: SimNode) -> None:
        waiting = []
        for index, context in node.reads:
            if index > node.kv.applied:
                waiting.append((index, context))
                continue
            self.reads_served += 1
            op = self._read_ops.pop(context, None)
            if op is not None:
                self.history.complete(op, self.now, node.kv.get(op.key))
        node.reads = waiting

    # -- network -------------------------------------------------------------------------------
    def _send(self, message: Message) -> None:
        rng = self.rng
        if rng.random() < self.loss:
            return
        copies = 2 if rng.random() < self.duplication else 1
        for _ in range(copies):
            self._sequence += 1
            due = self.now + rng.randint(1, self.max_delay)
            heapq.heappush(self._network, (due, self._sequence, message))

    def _deliver(self) -> None:
        network = self._network
        while network and network[0][0] <= self.now:
            _, _, message = heapq.heappop(network)
            target = self.nodes[message.dst].raft
            if target is None or (message.src, message.dst) in self.blocked:
                continue
            delivered = self.alter(message)
            if delivered is not None:
                target.step(delivered)
                self.checker.on_step(target)

    # -- what happens to the cluster -----------------------------------------------------------
    def _fault(self) -> None:
        rng = self.rng
        kinds = ["partition", "partition", "one-way", "heal", "crash", "restart", "restart"]
        kind = rng.choice([*kinds, "elections", "elections"])
        if kind == "partition":
            side = set(rng.sample(self.ids, rng.randint(1, len(self.ids) // 2)))
            leaders = [n.id for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
            if leaders and rng.random() < 0.5:  # cut the leader off (Jepsen's partition-leader)
                side = {rng.choice(leaders), *rng.sample(self.ids, len(side) - 1)}
            self.blocked = {
                (a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)
            }
            if rng.random() < 0.5:  # a timer on the majority side runs out at once: a leader
                # on the minority side keeps leading until its check-quorum round notices
                self._elections([rng.choice([i for i in self.ids if i not in side])])
        elif kind == "one-way":
            a, b = rng.sample(self.ids, 2)
            self.blocked.add((a, b))
        elif kind == "heal":
            self.blocked.clear()
        elif kind == "crash":
            alive = [n for n in self.nodes.values() if n.raft]
            if alive:
                self.crash(rng.choice(alive).id)
        elif kind == "restart":
            down = [n for n in self.nodes.values() if n.raft is None]
            if down:
                self.start(rng.choice(down).id)
        else:  # several election timers run out at once: rival candidates in one term
            followers = [
                n.id for n in self.nodes.values() if n.raft and n.raft.role is Role.FOLLOWER
            ]
            rivals = rng.randint(2, len(self.ids) - 1)  # leaving someone to vote
            self._elections(rng.sample(followers, min(rivals, len(followers))))

    def _elections(self, ids: list[int]) -> None:
        """Makes the followers among `ids` campaign now, as when their timers expire together
        (TIMEOUT_NOW: the campaign skips pre-vote and voters' leases)."""
        for node_id in ids:
            raft = self.nodes[node_id].raft
            if raft is not None and raft.role is Role.FOLLOWER:
                raft.step(Message(MessageType.TIMEOUT_NOW, 0, node_id, raft.term))
                self.checker.on_step(raft)

    def _client(self) -> None:
        rng = self.rng
        leaders = [n.raft for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
        if not leaders:
            return
        leader = rng.choice(leaders)
        roll = rng.random()
        if roll < 0.5:
            for _ in range(rng.choice([1, 1, 2, 5, 10])):
                self._write(leader, f"k{rng.randrange(self.keys)}")
        elif roll < 0.96:
            for _ in range(rng.choice([1, 2, 4])):
                self._read(leader, f"k{rng.randrange(self.keys)}")
        else:
            leader.transfer_leadership(rng.choice(self.ids))

    def _write(self, leader: Raft, key: str) -> None:
        self.proposals += 1
        value = f"v{self.proposals}"
        data = put_command(key, value)
        index = leader.propose(data)
        if index is not None:
            op = self.history.invoke_write(key, value, self.now)
            self.nodes[leader.id].writes[index] = (op, data)

    def _read(self, leader: Raft, key: str) -> bool:
        self._read_count += 1
        context = f"read-{self._read_count}".encode()
        op = self.history.invoke_read(key, self.now)
        if not leader.read_index(context):
            return False
        self._reads[context] = self.checker.commit_index
        self._read_ops[context] = op
        return True

    def check_history(self) -> None:
        verdict = self.history.check()
        if verdict:
            raise SafetyViolation(verdict)


def simulate(seed: int, nodes: int, steps: int, raft_class: type[Raft] = Raft) -> Simulation:
    """Runs `steps` steps of faults, heals everything and waits for convergence."""
    sim = Simulation(seed, nodes, raft_class)
    sim.run(steps)
    sim.heal()
    sim.converge()
    sim.check_history()
    return sim


@dataclass(frozen=True)
class Outcome:
    seed: int
    nodes: int
    failure: str
    """Empty when every check passed."""
    step: int
    """The simulated millisecond the run ended at (where a failure was detected)."""
    reads: int = 0
    operations: int = 0
    """Client operations in the history checked for linearizability."""


def run_seed(seed: int, nodes: int, steps: int, raft_class: type[Raft] = Raft) -> Outcome:
    """Like `simulate`, but a failed check is returned with the step that detected it."""
    sim = Simulation(seed, nodes, raft_class)
    try:
        sim.run(steps)
        sim.heal()
        sim.converge()
        sim.check_history()
    except AssertionError as failure:  # a checker's violation, or an assertion of the core
        return Outcome(seed, nodes, str(failure) or type(failure).__name__, sim.now)
    return Outcome(seed, nodes, "", sim.now, sim.reads_served, len(sim.history.operations))


def replay_command(seed: int, nodes: int, steps: int) -> str:
    return f"python -m tests.simulation.harness --seed {seed} --nodes {nodes} --steps {steps}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Replays one seed of the Raft simulation.")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    sim = simulate(args.seed, args.nodes, args.steps)
    leaders = len(sim.checker.leaders)
    print(  # noqa: T201
        f"seed {args.seed}: {leaders} terms with a leader, {sim.checker.commit_index} entries "
        f"committed, {sim.reads_served} reads served, "
        f"{len(sim.history.operations)} operations linearizable; every check passed"
    )


if __name__ == "__main__":
    main()
