"""A seeded Raft cluster on a fake network and a fake clock.

One seed decides everything: the fault profile (loss, duplication, delay and so reordering),
when partitions (symmetric or one-way) come and go, which nodes crash (losing all but their
disk) and restart, each node's clock drift, client proposals, read-index reads and leadership
transfers. One step is one millisecond of simulated time.

Replay a seed: python -m tests.simulation.harness --seed N --nodes 3 --steps 2000
"""

from __future__ import annotations

import argparse
import heapq
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.raft.core import Raft, RaftConfig, Role
from pocketmq.raft.kv import KeyValueStore, put_command
from pocketmq.raft.messages import Message
from pocketmq.raft.storage import MemoryStorage
from tests.simulation.checker import SafetyChecker, SafetyViolation

TICK_MS = 10
ELECTION_BOUND = 50
"""After every fault heals, one leader is known to every node within this many ticks (five
election timeouts)."""
CATCH_UP_BOUND = 500
"""...and every node has applied what it commits next within this many more (the backlog
left by the faults may be long on the slowest networks the seeds pick)."""


@dataclass
class SimNode:
    id: int
    storage: MemoryStorage = field(default_factory=MemoryStorage)
    raft: Raft | None = None
    kv: KeyValueStore = field(default_factory=KeyValueStore)
    tick_ms: int = TICK_MS
    phase: int = 0


class Simulation:
    def __init__(self, seed: int, nodes: int, raft_class: type[Raft] = Raft) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        rng = self.rng
        self.raft_class = raft_class
        self.ids = list(range(1, nodes + 1))
        self.checker = SafetyChecker()
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
        self.compact_every = rng.choice([20, 60, 200])
        self.client_rate = 0.03
        """Chance per step of a client proposal burst, read or leadership transfer."""
        self.proposals = 0
        self._reads: dict[bytes, int] = {}
        self.reads_served = 0
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
        sim.max_delay = 1
        sim.compact_every = 1 << 30
        sim.frozen = set(sim.ids)
        sim.config = RaftConfig(max_entries_per_append=1)
        for node_id in sim.ids:
            sim.crash(node_id)
            sim.start(node_id)
        return sim

    # -- the loop ----------------------------------------------------------------------------
    def run(self, steps: int) -> None:
        for _ in range(steps):
            self.step(faults=True)

    def step(self, *, faults: bool) -> None:
        self.now += 1
        rng = self.rng
        if faults and rng.random() < self.fault_rate:
            self._fault()
        for node in self.nodes.values():
            ticks = node.raft and node.id not in self.frozen
            if ticks and (self.now + node.phase) % node.tick_ms == 0:
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
        self.loss = self.duplication = self.crash_in_ready = 0.0
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
        proposed: list[int] = []

        def applied_everywhere() -> bool:
            leader = self.agreed_leader()
            if not proposed and leader is not None:  # refused while a transfer is under way
                proposed.extend(filter(None, [leader.propose(put_command("converged", marker))]))
            return all(n.kv.get("converged") == marker for n in self.nodes.values())

        caught_up = self.run_until(
            applied_everywhere,
            CATCH_UP_BOUND,
            "the marker applied on every node once faults healed",
        )
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
        node.kv = KeyValueStore()
        node.kv.restore(restored.snapshot.data)
        node.tick_ms = TICK_MS + self.rng.choice([-2, -1, 0, 0, 1, 2])  # clock drift
        node.phase = self.rng.randrange(node.tick_ms)
        self.checker.on_restart(node.id, restored.snapshot.index)

    def crash(self, node_id: int) -> None:
        """Stops a node at once: what it had not persisted is gone."""
        self.nodes[node_id].raft = None

    def _process(self, node: SimNode) -> None:
        raft = node.raft
        assert raft is not None
        for _ in range(8):
            if not raft.has_ready():
                return
            ready = raft.ready()
            if ready.snapshot:
                node.storage.apply_snapshot(ready.snapshot)
                node.kv.restore(ready.snapshot.data)
                self.checker.on_snapshot_installed(node.id, ready.snapshot)
            node.storage.append(ready.entries)
            self.checker.on_stored(raft, ready.entries)
            if ready.hard_state:
                node.storage.set_hard_state(ready.hard_state)
            node.storage.sync()
            if self.rng.random() < self.crash_in_ready:
                self.crash(node.id)  # persisted, nothing sent yet
                return
            for message in ready.messages:
                self._send(message)
            for entry in ready.committed:
                node.kv.apply(entry.index, entry.data)
            self.checker.on_applied(node.id, ready.committed)
            for read in ready.read_states:
                required = self._reads.pop(read.context, None)
                if required is not None and read.index < required:
                    raise SafetyViolation(
                        f"read index {read.index} on node {node.id} misses writes committed "
                        f"up to {required} before the read began"
                    )
                self.reads_served += 1
            raft.advance(ready)
            self.checker.on_step(raft)  # before compaction hides what was just committed
            if node.kv.applied - raft.log.snapshot.index >= self.compact_every:
                snapshot = raft.compact(node.kv.applied, node.kv.snapshot())
                node.storage.apply_snapshot(snapshot)

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

    # -- what happens to the cluster -----------------------------------------------------------
    def _fault(self) -> None:
        rng = self.rng
        kind = rng.choice(["partition", "one-way", "heal", "crash", "restart", "restart"])
        if kind == "partition":
            side = set(rng.sample(self.ids, rng.randint(1, len(self.ids) // 2)))
            self.blocked = {
                (a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)
            }
        elif kind == "one-way":
            a, b = rng.sample(self.ids, 2)
            self.blocked.add((a, b))
        elif kind == "heal":
            self.blocked.clear()
        elif kind == "crash":
            alive = [n for n in self.nodes.values() if n.raft]
            if alive:
                self.crash(rng.choice(alive).id)
        else:
            down = [n for n in self.nodes.values() if n.raft is None]
            if down:
                self.start(rng.choice(down).id)

    def _client(self) -> None:
        rng = self.rng
        leaders = [n.raft for n in self.nodes.values() if n.raft and n.raft.role is Role.LEADER]
        if not leaders:
            return
        leader = rng.choice(leaders)
        roll = rng.random()
        if roll < 0.85:
            for _ in range(rng.choice([1, 1, 1, 5, 20])):
                self.proposals += 1
                leader.propose(put_command(f"k{self.proposals % 17}", f"v{self.proposals}"))
        elif roll < 0.97:
            context = f"read-{self.now}".encode()
            if leader.read_index(context):
                self._reads[context] = self.checker.commit_index
        else:
            leader.transfer_leadership(rng.choice(self.ids))


def simulate(seed: int, nodes: int, steps: int, raft_class: type[Raft] = Raft) -> Simulation:
    """Runs `steps` steps of faults, heals everything and waits for convergence."""
    sim = Simulation(seed, nodes, raft_class)
    sim.run(steps)
    sim.heal()
    sim.converge()
    return sim


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
        f"committed, {sim.reads_served} reads served; every check passed"
    )


if __name__ == "__main__":
    main()
