"""A DLedger group in the seeded Raft simulation: the same faults as `harness.py`, but each node
applies its log to a real `CommitLogStateMachine` over a real `MessageStore` in its own
directory, and a real `ReplicatedMetadata` over real tables (topics, consumer offsets,
subscription groups, and a `DelayDelivery` over the store for the delay offsets).

A crash closes the node's store without the clean-stop steps (its files and the `abort` marker
stay, as after SIGKILL: the page cache survives, a power loss is not modelled); a restart builds
new objects on the same directory, loads the store, restores the node's snapshot and applies the
committed entries after it, as `RaftNode` does. Snapshots follow `RaftNode._maybe_snapshot` with
`compact_behind_followers` (a leader keeps every entry a follower still lacks); followers do not
compact here, where `RaftNode`'s do: a follower that compacted and then leads can reach a replica
lacking what its image covers, which stops it (a test shows it with `followers_compact`). The
metadata tables start empty at each restart (their files are not modelled).

Clients talk to a leader once it applied an entry of its own term (DLedger's barrier): PUTs of
known bodies to a few queues, and consumer offset commits taken into the leader's table first and
then proposed as META commands naming their origin, as the broker does. What is checked, beyond
the Raft properties of `checker.py`:

- replicas that applied an index hold byte-identical CommitLogs there (a digest of every written
  byte, compared after every applied entry, every restart and every snapshot installed);
- a snapshot image records the CommitLog end every replica had at its index;
- an acknowledged PUT (its entry applied on the proposing leader in the proposal's term, PUT_OK
  at queue offset q) is found at (topic, queue, q) with its body on every replica that applied
  its index;
- an acknowledged offset commit is never seen to go back on a replica that applied its index.

Replay a seed: python -m tests.simulation.dledger_sim --seed N --nodes 3 --steps 1500
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.dledger.commands import decode_put, encode_meta, encode_put
from pocketmq.broker.dledger.state_machine import CommitLogStateMachine
from pocketmq.broker.groups import SubscriptionGroupTable
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.replicated_metadata import MetadataTables, ReplicatedMetadata
from pocketmq.broker.schedule import DelayLevels
from pocketmq.broker.topics import TopicTable
from pocketmq.common.stored_message import decode_record
from pocketmq.raft.core import Raft, Role
from pocketmq.raft.messages import Ready, Snapshot
from pocketmq.store.api import MessageToStore, PutResult, PutStatus
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore
from tests.simulation.checker import SafetyChecker, SafetyViolation
from tests.simulation.harness import Outcome, SimNode, Simulation

NOW_MS = 1_700_000_000_000
COMMIT_LOG_FILE_BYTES = 64 * 1024
"""Small files: a run of a few hundred messages rolls over several, truncation crosses them."""
QUEUES = (("Orders", 0), ("Orders", 1), ("Payments", 0), ("Audit", 2))
GROUPS = ("billing", "shipping")
MARKER = ("converged", "marker", 0)
"""(group, topic, queue id) of the offset `converge` commits once faults healed."""

MachineClass = Callable[..., CommitLogStateMachine]


class SimClock:
    """Simulated wall time on one node: the run's milliseconds plus the node's own skew."""

    def __init__(self, sim: Simulation, skew_ms: int) -> None:
        self._sim = sim
        self._skew_ms = skew_ms

    def now_ms(self) -> int:
        return NOW_MS + self._sim.now + self._skew_ms

    def monotonic(self) -> float:
        return self._sim.now / 1000


def commit_log_digest(store: MessageStore) -> int:
    """Every byte written to the CommitLog's files (fillers included), with its bounds."""
    sha = hashlib.sha256(f"{store.min_phy_offset}:{store.max_phy_offset}".encode())
    for mapped in store.commit_log.files:
        sha.update(mapped.read(0, mapped.wrote_position))
    return int.from_bytes(sha.digest()[:8], "big")


EMPTY_DIGEST = int.from_bytes(hashlib.sha256(b"0:0").digest()[:8], "big")


class DLedgerState:
    """One replica's state machine and what it stands on, built as a restart builds it."""

    def __init__(
        self,
        directory: Path,
        clock: SimClock,
        origin: Callable[[], tuple[int, int]],
        machine_class: MachineClass,
    ) -> None:
        config = MessageStoreConfig(
            store_path_root_dir=str(directory),
            mapped_file_size_commit_log=COMMIT_LOG_FILE_BYTES,
            mapped_file_size_consume_queue=20 * 1024,
            max_hash_slot_num=64,
            max_index_num=512,
        )
        self.store = store = MessageStore(config, clock=clock)
        store.load()
        store.accepts_puts = False  # as a DLedger replica: only committed entries write it
        topics = TopicTable(cluster_name="sim", broker_name="group")
        topics.load(None, clock.now_ms())
        delay = DelayDelivery(
            store, PutPath(store, clock, PutSettings()), DelayLevels((1000,)), clock
        )
        delay.load(None)
        self.tables = MetadataTables(
            topics,
            ConsumerOffsetTable(),
            SubscriptionGroupTable(),
            delay,
            clock,
            lambda: None,
            lambda: None,
        )
        self.metadata = ReplicatedMetadata(self.tables, _never_proposes)
        self.machine = machine_class(store, self.metadata, origin)
        self.applied = 0
        self.results: dict[int, PutResult | None] = {}
        """Index -> what applying it returned, for the acknowledgements of this batch."""

    def apply(self, index: int, command: bytes) -> PutResult | None:
        result = self.machine.apply(index, command)
        self.applied = index
        self.results[index] = result
        return result

    def snapshot(self) -> bytes:
        return self.machine.snapshot()

    def restore(self, image: bytes) -> None:
        self.machine.restore(image)

    def get(self, key: str) -> str | None:
        return None  # no key-value reads: the converge read sees the empty key

    def digest(self) -> int:
        return commit_log_digest(self.store)

    def offset(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.tables.offsets.query(group, topic, queue_id)

    def message_body(self, topic: str, queue_id: int, queue_offset: int) -> bytes | None:
        found = self.store.get_message(topic, queue_id, queue_offset, 1)
        if not found.buffers:
            return None
        return decode_record(found.buffers[0]).body

    def close(self) -> None:
        self.store.close()


async def _never_proposes(document: dict[str, Any]) -> None:
    raise AssertionError("the simulation proposes META commands itself")


class DLedgerChecker(SafetyChecker):
    """Compares CommitLog digests instead of key-value states, and snapshot images by the
    CommitLog end they record."""

    def __init__(self) -> None:
        super().__init__()
        self.digests = {0: EMPTY_DIGEST}
        self.ends: dict[int, int] = {0: 0}
        """index -> CommitLog end once that index is applied (on any node)."""

    def on_end(self, node_id: int, index: int, end: int) -> None:
        first = self.ends.setdefault(index, end)
        if first != end:
            raise SafetyViolation(
                f"CommitLogs differ: node {node_id} ends at {end} after index {index}, a "
                f"replica ended at {first} there"
            )

    def on_state_restored(self, node_id: int, index: int, digest: int, what: str) -> None:
        """After a restore: the CommitLog must be the one replicas had at the image's index."""
        self._check_digest(node_id, index, digest, what)

    def _check_image(self, node_id: int, snapshot: Snapshot, what: str) -> None:
        if not snapshot.data:
            if snapshot.index:
                raise SafetyViolation(f"node {node_id} {what} an empty image at {snapshot.index}")
            return
        end = int(json.loads(snapshot.data)["commitLogEnd"])
        expected = self.ends.get(snapshot.index)
        if expected is not None and expected != end:
            raise SafetyViolation(
                f"node {node_id} {what} a snapshot at index {snapshot.index} recording the "
                f"CommitLog end {end}; replicas ended at {expected} there"
            )


@dataclass(frozen=True)
class Proposal:
    term: int
    data: bytes
    offset: tuple[str, str, int, int] | None = None
    """(group, topic, queue id, offset) of an offset commit; None for a PUT."""


@dataclass(frozen=True)
class AckedPut:
    index: int
    topic: str
    queue_id: int
    queue_offset: int
    bodies: tuple[bytes, ...]


class DLedgerSimulation(Simulation):
    def __init__(
        self,
        seed: int,
        nodes: int,
        root: Path,
        machine_class: MachineClass = CommitLogStateMachine,
        *,
        origin_while_leading: bool = True,
        followers_compact: bool = False,
    ) -> None:
        self.root = root
        self.followers_compact = followers_compact
        """True: followers compact freely, as `RaftNode` does; one that then leads sends a
        snapshot to a replica whose CommitLog ends before the image's end, which then appends
        at the wrong offsets. False: only a leader compacts, behind every follower."""
        self.machine_class = machine_class
        self.origin_while_leading = origin_while_leading
        """False: the origin `DLedgerReplica._origin` gives, (node, current term) whatever the
        role, under which a leader restarted in its term skips its own replayed META entries
        and loses those offsets. True: the origin only while leading, the fix proposed."""
        self.pending: dict[int, dict[int, Proposal]] = {}
        """Node -> log index -> what a client proposed there, answered once it applies."""
        self.acked_puts: list[AckedPut] = []
        self.acked_offsets: dict[tuple[str, str, int], list[tuple[int, int]]] = {}
        """(group, topic, queue id) -> (index, offset) of acknowledged commits, in log order."""
        self.next_offset = 0
        self.messages = 0
        super().__init__(seed, nodes)

    @property
    def dledger_checker(self) -> DLedgerChecker:
        assert isinstance(self.checker, DLedgerChecker)
        return self.checker

    # -- harness hooks -------------------------------------------------------------------------
    def new_checker(self) -> SafetyChecker:
        return DLedgerChecker()

    def new_state(self, node_id: int) -> DLedgerState:
        def origin() -> tuple[int, int]:
            raft = self.nodes[node_id].raft
            assert raft is not None
            if self.origin_while_leading and raft.role is not Role.LEADER:
                return (node_id, -1)
            return (node_id, raft.term)

        skew_ms = self.rng.randint(-50, 50) * node_id  # wall clocks drift apart
        directory = self.root / f"node-{node_id}"
        return DLedgerState(directory, SimClock(self, skew_ms), origin, self.machine_class)

    def digest(self, node: SimNode) -> int:
        state = self.state(node)
        self.dledger_checker.on_end(node.id, state.applied, state.store.max_phy_offset)
        return state.digest()

    def may_compact(self, raft: Raft) -> bool:
        # RaftNode's compact_behind_followers, as DLedgerSettings sets it: the image leaves the
        # CommitLog out, so a leader keeps what a follower still lacks.
        if raft.role is not Role.LEADER:
            return self.followers_compact
        return min(p.match for p in raft.progress.values()) >= raft.log.applied

    def marker_command(self, marker: str) -> bytes:
        return encode_meta({"offsets": [[*MARKER, int(marker)]]})

    def holds_marker(self, node: SimNode, marker: str) -> bool:
        return self.state(node).offset(*MARKER) == int(marker)

    @staticmethod
    def state(node: SimNode) -> DLedgerState:
        assert isinstance(node.kv, DLedgerState)
        return node.kv

    # -- nodes ---------------------------------------------------------------------------------
    def start(self, node_id: int) -> None:
        super().start(node_id)
        node = self.nodes[node_id]
        assert node.raft is not None
        state = self.state(node)
        state.applied = node.raft.log.snapshot.index
        self.dledger_checker.on_state_restored(
            node_id, state.applied, state.digest(), "restarted from"
        )
        self.pending[node_id] = {}

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if isinstance(node.kv, DLedgerState):
            node.kv.close()  # no clean stop: the abort marker stays
        super().crash(node_id)
        self.pending[node_id] = {}

    def close(self) -> None:
        for node in self.nodes.values():
            if isinstance(node.kv, DLedgerState):
                node.kv.close()

    def _persist(self, node: SimNode, raft: Raft, ready: Ready) -> None:
        super()._persist(node, raft, ready)
        if ready.snapshot:
            state = self.state(node)
            state.applied = ready.snapshot.index
            self.dledger_checker.on_state_restored(
                node.id, state.applied, state.digest(), "installed"
            )
            pending = self.pending[node.id]
            for index in [i for i in pending if i <= ready.snapshot.index]:
                del pending[index]  # its outcome is unknown to this node's client
            self._check_acknowledged(node)

    def _apply(self, node: SimNode, raft: Raft, ready: Ready) -> None:
        super()._apply(node, raft, ready)
        state = self.state(node)
        pending = self.pending[node.id]
        acked = False
        for entry in ready.committed:
            proposal = pending.pop(entry.index, None)
            result = state.results.pop(entry.index, None)
            if proposal is None or proposal.term != entry.term or proposal.data != entry.data:
                continue  # not this node's, or overwritten by another leader's: not acknowledged
            acked = True
            if proposal.offset is not None:
                group, topic, queue_id, offset = proposal.offset
                key = (group, topic, queue_id)
                self.acked_offsets.setdefault(key, []).append((entry.index, offset))
                continue
            if result is None or result.status is not PutStatus.PUT_OK:
                raise SafetyViolation(
                    f"node {node.id} applied its own PUT at index {entry.index} to {result}"
                )
            put = decode_put(entry.data)
            first = put.messages[0]
            self.acked_puts.append(
                AckedPut(
                    entry.index,
                    first.topic,
                    first.queue_id,
                    result.queue_offset,
                    tuple(m.body for m in put.messages),
                )
            )
        state.results.clear()
        if acked:
            for other in self.nodes.values():
                if other.raft is not None:
                    self._check_acknowledged(other)
        elif ready.committed:
            self._check_acknowledged(node, puts=False)

    # -- checks --------------------------------------------------------------------------------
    def _check_acknowledged(self, node: SimNode, *, puts: bool = True) -> None:
        state = self.state(node)
        applied = state.applied
        for key, commits in self.acked_offsets.items():
            done = [offset for index, offset in commits if index <= applied]
            if not done:
                continue
            held = state.offset(*key)
            if held is None or held < max(done):
                raise SafetyViolation(
                    f"node {node.id} applied up to {applied} and holds offset {held} for "
                    f"{key}, below the acknowledged commit {max(done)}"
                )
        if not puts:
            return
        for put in self.acked_puts:
            if put.index > applied:
                continue
            for position, body in enumerate(put.bodies):
                found = state.message_body(put.topic, put.queue_id, put.queue_offset + position)
                if found != body:
                    raise SafetyViolation(
                        f"node {node.id} applied up to {applied} but holds {found!r} at "
                        f"{put.topic}/{put.queue_id}@{put.queue_offset + position}, where the "
                        f"acknowledged PUT of index {put.index} stored {body!r}"
                    )

    def check_everywhere(self) -> None:
        for node in self.nodes.values():
            if node.raft is not None:
                self._check_acknowledged(node)

    # -- clients -------------------------------------------------------------------------------
    def _client(self) -> None:
        rng = self.rng
        serving = [
            n
            for n in self.nodes.values()
            if n.raft is not None
            and n.raft.role is Role.LEADER
            and n.raft.log.term(self.state(n).applied) == n.raft.term
        ]
        if not serving:
            return
        node = rng.choice(serving)
        leader = node.raft
        assert leader is not None
        roll = rng.random()
        if roll < 0.55:
            for _ in range(rng.choice([1, 1, 2, 4])):
                self._put(node, leader)
        elif roll < 0.97:
            for _ in range(rng.choice([1, 2])):
                self._commit_offset(node, leader)
        else:
            leader.transfer_leadership(rng.choice(self.ids))

    def _put(self, node: SimNode, leader: Raft) -> None:
        rng = self.rng
        topic, queue_id = rng.choice(QUEUES)
        messages = []
        for _ in range(rng.choice([1, 1, 3])):
            self.messages += 1
            body = f"{topic}-{queue_id}-body-{self.messages}".encode() * rng.randint(1, 8)
            messages.append(MessageToStore(topic=topic, body=body, queue_id=queue_id))
        store_host = (f"10.0.0.{node.id}", 10911)
        data = encode_put(messages, self.state(node).tables.clock.now_ms(), store_host)
        index = leader.propose(data)
        if index is not None:
            self.pending[node.id][index] = Proposal(leader.term, data)

    def _commit_offset(self, node: SimNode, leader: Raft) -> None:
        rng = self.rng
        group = rng.choice(GROUPS)
        topic, queue_id = rng.choice(QUEUES)
        self.next_offset += 1
        offset = self.next_offset  # rising: a later commit of a key never lowers it
        # As the broker does: the leader's table takes the commit, then it is replicated with
        # its origin, which the leader skips when the entry applies.
        self.state(node).tables.offsets.commit(group, topic, queue_id, offset)
        document = {"offsets": [[group, topic, queue_id, offset]], "origin": [node.id, leader.term]}
        data = encode_meta(document)
        index = leader.propose(data)
        if index is not None:
            self.pending[node.id][index] = Proposal(
                leader.term, data, (group, topic, queue_id, offset)
            )


# -- mutants ---------------------------------------------------------------------------------
class StoresWithOwnClock(CommitLogStateMachine):
    """Stores a PUT with this replica's own clock instead of the leader's store time."""

    def _apply_put(self, index: int, command: bytes) -> PutResult:
        put = decode_put(command)
        return self.store.append_replicated(
            put.messages, store_timestamp=self.store.clock.now_ms(), store_host=put.store_host
        )


class RestoresWithoutTruncating(CommitLogStateMachine):
    """Restores the tables of an image but keeps the CommitLog beyond the image's end."""

    def restore(self, image: bytes) -> None:
        if image:
            self.metadata.restore(json.loads(image)["metadata"])


@dataclass(frozen=True)
class Mutant:
    name: str
    machine_class: MachineClass
    seeds: int
    """The CI budget: caught within this many seeds on 3 nodes."""


MUTANTS = (
    Mutant("stores with its own clock", StoresWithOwnClock, 5),
    Mutant("restores without truncating", RestoresWithoutTruncating, 10),
)


def run_dledger_seed(
    seed: int,
    nodes: int,
    steps: int,
    machine_class: MachineClass = CommitLogStateMachine,
    root: Path | None = None,
    *,
    origin_while_leading: bool = True,
    followers_compact: bool = False,
) -> Outcome:
    """Runs one seed in a fresh directory (under `root` if given); a failed check is returned
    with the step that detected it."""
    with tempfile.TemporaryDirectory(dir=root, prefix=f"dledger-sim-{seed}-") as directory:
        sim = DLedgerSimulation(
            seed,
            nodes,
            Path(directory),
            machine_class,
            origin_while_leading=origin_while_leading,
            followers_compact=followers_compact,
        )
        try:
            sim.run(steps)
            sim.heal()
            sim.converge()
            sim.check_everywhere()
            sim.check_history()
        except (AssertionError, RuntimeError) as failure:  # a check, or DivergenceError
            return Outcome(seed, nodes, f"{type(failure).__name__}: {failure}", sim.now)
        finally:
            sim.close()
        commits = sum(len(c) for c in sim.acked_offsets.values())
        return Outcome(seed, nodes, "", sim.now, len(sim.acked_puts), commits)


def replay_command(seed: int, nodes: int, steps: int) -> str:
    return f"python -m tests.simulation.dledger_sim --seed {seed} --nodes {nodes} --steps {steps}"


def main() -> None:
    parser = argparse.ArgumentParser(description="Replays one seed of the DLedger simulation.")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1500)
    args = parser.parse_args()
    outcome = run_dledger_seed(args.seed, args.nodes, args.steps)
    print(outcome)  # noqa: T201


if __name__ == "__main__":
    main()
