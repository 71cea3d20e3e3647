"""A seeded simulation of controller mode's write rule and replication states: the real
`SyncStateSet` of a master, the real controller decisions over `ReplicasInfo`, and two slaves
whose progress the schedule drives (slow phases, pauses long enough to be judged dead, returns).

Time runs in steps of 10 ms. Each step the master may store a put; a put is acknowledged when
the rule's acknowledged end reaches it while nothing refuses it, and fails at its deadline. A
running slave takes a few KiB per step and reports; the master's check loop asks the
controller to grow or shrink the set, and the answer comes back a few steps later.

Checked every step:
- safety: every acknowledged put is held by every member of the controller's SyncStateSet
  (any of them may be elected next, so none may lack one);
- NO_LOSS: every acknowledged put was held by a second broker when it was acknowledged;
- at the end, with the slaves running and no load, the group is SYNC with all three in the set.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.broker.controlled.sync_state import SyncStateSet
from pocketmq.broker.ha.master import SlaveConnection
from pocketmq.common.codes import ResponseCode
from pocketmq.common.ha_qos import HaState, Qos
from pocketmq.controller.decisions import alter_sync_state_set
from pocketmq.controller.replicas import BrokerGroup, Replica, ReplicasInfo
from pocketmq.store.config import MessageStoreConfig

STEP_MS = 10
MASTER = 1
SLAVES = (2, 3)
GROUP = "broker-a"
PUT_BYTES = 1024
SYNC_TIMEOUT_STEPS = 100
CHECK_EVERY = 20
CONTROLLER_DELAY = 3
DEAD_AFTER_STEPS = 150
SETTLE_STEPS = 3_000


@dataclass
class Slave:
    broker_id: int
    held: int = 0
    speed: int = 8 * PUT_BYTES
    paused_until: int = -1
    connection: SlaveConnection | None = None
    last_report_step: int = 0


@dataclass
class Outcome:
    failure: str = ""
    step: int = 0
    acked: int = 0
    states: set[HaState] = field(default_factory=set)


def run_qos_seed(seed: int, steps: int, rule_class: type[SyncStateSet] = SyncStateSet) -> Outcome:
    rng = random.Random(seed)
    qos = Qos.NO_LOSS if seed % 3 == 2 else Qos.AVAILABILITY
    config = MessageStoreConfig(
        all_ack_in_sync_state_set=True,
        ha_max_time_slave_not_catchup_ms=600,
        ha_semi_sync_gap=64 * PUT_BYTES,
        ha_semi_sync_hold_ms=400,
    )
    now = [0]
    replicas = ReplicasInfo()
    replicas.groups[GROUP] = BrokerGroup(
        "DefaultCluster", GROUP, {i: Replica(f"b{i}") for i in (MASTER, *SLAVES)}, MASTER,
        master_epoch=1, sync_state_set={MASTER}, sync_state_set_epoch=1,
    )  # fmt: skip
    rule = rule_class(MASTER, {MASTER}, 1, config, fenced=lambda: None, now_ms=lambda: now[0])
    rule.qos = qos
    wanted = [False]
    rule.wanted = lambda: wanted.__setitem__(0, True)
    # The slaves join late: the group starts on the master alone.
    slaves = {i: Slave(i, paused_until=rng.randint(20, 300)) for i in SLAVES}
    head = 0
    waiting: list[tuple[int, int, int]] = []  # (end, deadline step, copies at ack time)
    acked_end = 0
    in_flight: list[tuple[int, Callable[[], None]]] = []
    outcome = Outcome()

    def connections() -> set[SlaveConnection]:
        return {s.connection for s in slaves.values() if s.connection is not None}

    def alive(_group: str, broker_id: int) -> bool:
        if broker_id == MASTER:
            return True
        return slaves[broker_id].paused_until < step - DEAD_AFTER_STEPS or (
            slaves[broker_id].paused_until < step
        )

    def ask_controller(wanted_set: set[int]) -> None:
        group = replicas.groups[GROUP]
        decision = alter_sync_state_set(
            replicas, GROUP, MASTER, group.master_epoch, wanted_set, rule.epoch, alive, qos=qos
        )
        for event in decision.events:
            replicas.apply(event)
        members = set(group.sync_state_set)
        epoch = group.sync_state_set_epoch

        def answer() -> None:
            if decision.code == ResponseCode.SUCCESS:
                rule.accepted(members, epoch)
            elif rule.pending is not None and wanted_set >= rule.members:
                rule.rejected()

        in_flight.append((step + CONTROLLER_DELAY, answer))

    total = steps + SETTLE_STEPS
    for step in range(total):
        now[0] = step * STEP_MS
        settling = step >= steps
        # -- the schedule
        if not settling:
            for slave in slaves.values():
                if slave.paused_until < step and rng.random() < 0.004:
                    slave.paused_until = step + rng.randint(20, 400)
                if rng.random() < 0.01:
                    slave.speed = rng.choice((PUT_BYTES // 2, 2 * PUT_BYTES, 8 * PUT_BYTES))
        else:
            for slave in slaves.values():
                slave.paused_until = min(slave.paused_until, step - 1)
                slave.speed = 8 * PUT_BYTES
        # -- the master stores a put
        if not settling and rng.random() < 0.6:
            head += PUT_BYTES
            if rule.refusal() is None:
                waiting.append((head, step + SYNC_TIMEOUT_STEPS, 0))
        # -- slaves take bytes and report
        for slave in slaves.values():
            if slave.paused_until >= step:
                if (
                    slave.connection is not None
                    and step - slave.last_report_step > 2 * DEAD_AFTER_STEPS
                ):
                    slave.connection = None  # the master's housekeeping drops a silent slave
                continue
            if slave.connection is None:
                slave.connection = SlaveConnection(
                    f"b{slave.broker_id}", now[0], broker_id=slave.broker_id
                )
            slave.held = min(head, slave.held + slave.speed)
            connection = slave.connection
            connection.ack_offset = slave.held
            if slave.held >= connection.head_at_last_report:
                connection.caught_up_ms = now[0]
            connection.head_at_last_report = head
            slave.last_report_step = step
            rule.reported(connection)
        # -- acknowledgements
        through = rule.acked_through(connections(), head)
        still = []
        for end, deadline, _ in waiting:
            if through >= end and rule.refusal() is None:
                copies = 1 + sum(1 for s in slaves.values() if s.held >= end)
                if qos is Qos.NO_LOSS and copies < 2:
                    return _fail(outcome, step, f"put ending {end} acknowledged on one copy")
                acked_end = max(acked_end, end)
                outcome.acked += 1
            elif step < deadline:
                still.append((end, deadline, 0))
        waiting = still
        # -- the controller's answers and the check loop
        for _due, answer in [item for item in in_flight if item[0] <= step]:
            answer()
        in_flight = [item for item in in_flight if item[0] > step]
        if wanted[0] or step % CHECK_EVERY == 0:
            wanted[0] = False
            rule.give_up_holding()
            rule.observe(slaves_connected=bool(connections()))
            proposal = rule.proposal(connections(), grace_over=step * STEP_MS > 600)
            if proposal is not None:
                ask_controller(proposal)
        outcome.states.add(rule.state)
        # -- safety
        for member in replicas.groups[GROUP].sync_state_set - {MASTER}:
            if slaves[member].held < acked_end:
                return _fail(
                    outcome, step,
                    f"slave {member} is in the SyncStateSet holding {slaves[member].held}, "
                    f"short of the acknowledged end {acked_end}",
                )  # fmt: skip
    group = replicas.groups[GROUP]
    if group.sync_state_set != {MASTER, *SLAVES} or rule.state is not HaState.SYNC:
        return _fail(
            outcome, total,
            f"not back in SYNC after settling: set {sorted(group.sync_state_set)}, state "
            f"{rule.state.value}",
        )  # fmt: skip
    return outcome


def _fail(outcome: Outcome, step: int, why: str) -> Outcome:
    outcome.failure = why
    outcome.step = step * STEP_MS
    return outcome


# -- mutants: each breaks one thing the rule must do; the simulation must catch it
class JoinsUnchecked(SyncStateSet):
    """Lets a slave join the set without holding everything acknowledged."""

    def reported(self, connection: SlaveConnection) -> None:
        if connection.broker_id is not None and connection.broker_id not in self.counted():
            self._join(connection.broker_id, connection.ack_offset, "reported")


class HoldsWithoutCounting(SyncStateSet):
    """Holds for a slave (SEMI_SYNC) without counting it: the acknowledged end runs ahead of
    it, and it joins lacking what was acknowledged meanwhile."""

    def counted(self) -> set[int]:
        return self.members | (self.pending or set())


class ShrinksBeforeTheController(SyncStateSet):
    """Stops waiting for the slaves it asks to remove before the controller agreed."""

    def proposal(self, connections: set[SlaveConnection], grace_over: bool) -> set[int] | None:
        wanted = super().proposal(connections, grace_over)
        if wanted is not None and wanted < self.members:
            self.members = set(wanted)
        return wanted


class ProposesTheHeldSlave(SyncStateSet):
    """Proposes, with another slave that joins, the one still held for (SEMI_SYNC) before it
    closed its gap: the first bug this simulation found."""

    def _join(self, broker_id: int, ack: int, how: str) -> None:
        self.pending = self.counted() | {broker_id}
        self.wanted()


class IgnoresNoLoss(SyncStateSet):
    """Acknowledges on one copy even with QoS NO_LOSS."""

    def refusal(self) -> str | None:
        qos, self.qos = self.qos, Qos.AVAILABILITY
        try:
            return super().refusal()
        finally:
            self.qos = qos


MUTANTS: tuple[type[SyncStateSet], ...] = (
    JoinsUnchecked,
    HoldsWithoutCounting,
    ShrinksBeforeTheController,
    ProposesTheHeldSlave,
    IgnoresNoLoss,
)
