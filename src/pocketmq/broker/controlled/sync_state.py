"""The master's SyncStateSet in controller mode: which replicas hold everything it
acknowledged, hence which may be elected after it (RocketMQ's `AutoSwitchHAService`).

The write rule: with `allAckInSyncStateSet`, a put is acknowledged once every member holds it;
otherwise once `inSyncReplicas` copies do (members only; with `enableAutoInSyncReplicas`, no
more than the set has, and never fewer than `minInSyncReplicas`). A set smaller than
`minInSyncReplicas`, or a master whose controller lease ran out, acknowledges nothing.

The set changes only through the controller, fenced by both epochs. Growing is safe at once: a
slave that holds everything acknowledged so far counts for acknowledgements from the moment
the master asks to add it (the pending set is the union). Shrinking waits for the controller:
until it agrees, the slave still counts, and puts wait for it.

Under steady load a slave rarely holds exactly everything acknowledged: one within
`haSemiSyncGapBytes` of it is held for (SEMI_SYNC, `pocketmq.common.ha_qos`): it counts for
acknowledgements at once, so the acknowledged end stops outrunning it, and once it reaches the
end it had to reach it joins. With QoS AVAILABILITY the master gives up holding after
`haSemiSyncHoldMs`; with NO_LOSS it holds on, never shrinks the set under two, and
acknowledges nothing that a second broker does not hold.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.broker.ha.master import SlaveConnection
from pocketmq.common.ha_qos import HaState, Qos
from pocketmq.store.config import MessageStoreConfig

log = logging.getLogger(__name__)


class SyncStateSet:
    """The master's view of its set, and the `WriteRule` it implies."""

    def __init__(
        self,
        self_id: int,
        members: set[int],
        epoch: int,
        config: MessageStoreConfig,
        *,
        fenced: Callable[[], str | None],
        now_ms: Callable[[], int],
    ) -> None:
        self.self_id = self_id
        self.members = set(members) | {self_id}
        self.epoch = epoch
        self.pending: set[int] | None = None
        """A change asked of the controller and not yet answered."""
        self._config = config
        self._fenced = fenced
        self._now_ms = now_ms
        self.acknowledged = 0
        """The end of the highest put acknowledged so far."""
        self.wanted: Callable[[], None] = lambda: None
        """Called when the set should change (the replica asks the controller)."""
        self.qos = Qos.AVAILABILITY
        """The group's level, as the controller last said."""
        self.holding: int | None = None
        """A slave held for (SEMI_SYNC): it counts, and joins once it reaches `hold_target`."""
        self.hold_target = 0
        self.hold_since_ms = 0
        self.state = HaState.SINGLE_MASTER
        self.transitions: list[tuple[int, HaState]] = []
        """(time, state) of every change, for status and tests."""

    # -- the write rule ------------------------------------------------------------------------
    def counted(self) -> set[int]:
        """Whose copies count: the set, a pending change's union with it, a slave held for."""
        counted = self.members | (self.pending or set())
        if self.holding is not None:
            counted = counted | {self.holding}
        return counted

    def needed(self) -> int:
        config = self._config
        if config.enable_auto_in_sync_replicas:
            # RocketMQ's `calcNeedAckNums`: no more than the set has, never under the minimum.
            members = len(self.members)
            return max(config.min_in_sync_replicas, min(config.in_sync_replicas, members))
        return config.in_sync_replicas

    def refusal(self) -> str | None:
        fenced = self._fenced()
        if fenced is not None:
            return fenced
        size = len(self.counted())
        if self.qos is Qos.NO_LOSS and size < 2:
            return (
                "QoS NO_LOSS: no second broker is in sync to hold this put; it is not "
                "acknowledged until a slave is back"
            )
        if size < self._config.min_in_sync_replicas:
            return (
                f"in-sync replicas not enough: {size} in the SyncStateSet "
                f"{sorted(self.counted())}, minInSyncReplicas={self._config.min_in_sync_replicas}"
            )
        return None

    def acked_through(self, connections: set[SlaveConnection], head: int) -> int:
        acks = {c.broker_id: c.ack_offset for c in connections if c.broker_id is not None}
        others = self.counted() - {self.self_id}
        if self._config.all_ack_in_sync_state_set:
            through = min((acks.get(i, -1) for i in others), default=head)
        else:
            copies = self.needed() - 1
            if copies <= 0:
                through = head
            else:
                held = sorted((acks.get(i, -1) for i in others), reverse=True)
                through = held[copies - 1] if len(held) >= copies else -1
        if through > self.acknowledged:
            self.acknowledged = min(through, head)
        return through

    # -- growing and shrinking -----------------------------------------------------------------
    def reported(self, connection: SlaveConnection) -> None:
        """A slave that holds everything acknowledged so far joins at once (pending); one
        nearly there is held for (SEMI_SYNC) and joins once it got there."""
        broker_id = connection.broker_id
        if broker_id is None:
            return
        ack = connection.ack_offset
        if broker_id == self.holding:
            if ack >= self.hold_target:
                self.holding = None
                self._join(broker_id, ack, "closed the gap")
            return
        if broker_id in self.counted():
            return
        if ack >= self.acknowledged and connection.caught_up_ms:
            self._join(broker_id, ack, "caught up")
        elif self.holding is None and 0 <= self.acknowledged - ack <= self._config.ha_semi_sync_gap:
            self.holding = broker_id
            self.hold_target = self.acknowledged
            self.hold_since_ms = self._now_ms()
            log.info("semi-sync: holding puts for slave %d, %d bytes behind the acknowledged end "
                     "%d", broker_id, self.acknowledged - ack, self.acknowledged)  # fmt: skip
        self.observe(slaves_connected=True)

    def _join(self, broker_id: int, ack: int, how: str) -> None:
        # Not `counted()`: a slave still held for has not closed its gap, and must not be
        # proposed (an elected member lacking acknowledged puts would lose them).
        self.pending = self.members | (self.pending or set()) | {broker_id}
        log.info("slave %d %s (offset %d); asking to add it to the SyncStateSet %s",
                 broker_id, how, ack, sorted(self.members))  # fmt: skip
        self.wanted()

    def give_up_holding(self) -> bool:
        """AVAILABILITY: stops holding puts for a slave that did not close its gap within
        `haSemiSyncHoldMs` (it may try again later). True when it stopped."""
        if self.holding is None or self.qos is Qos.NO_LOSS:
            return False
        if self._now_ms() - self.hold_since_ms <= self._config.ha_semi_sync_hold_ms:
            return False
        log.info("semi-sync: slave %d did not close its gap within %d ms; puts no longer wait "
                 "for it", self.holding, self._config.ha_semi_sync_hold_ms)  # fmt: skip
        self.holding = None
        return True

    def observe(self, *, slaves_connected: bool) -> HaState:
        """The state now, logged and recorded when it changed."""
        if len(self.members) > 1:
            state = HaState.SYNC
        elif self.pending is not None or self.holding is not None:
            state = HaState.SEMI_SYNC
        elif slaves_connected:
            state = HaState.ASYNC
        else:
            state = HaState.SINGLE_MASTER
        if state is not self.state:
            log.info("replication %s -> %s (QoS %s, SyncStateSet %s)", self.state.value,
                     state.value, self.qos.value, sorted(self.members))  # fmt: skip
            self.state = state
            self.transitions.append((self._now_ms(), state))
        return state

    def shrink_candidates(self, connections: set[SlaveConnection]) -> set[int]:
        """Members (other than the master) gone or behind for `haMaxTimeSlaveNotCatchup`."""
        now = self._now_ms()
        limit = self._config.ha_max_time_slave_not_catchup_ms
        by_id = {c.broker_id: c for c in connections if c.broker_id is not None}
        lagging = set()
        for member in self.members - {self.self_id}:
            connection = by_id.get(member)
            if connection is None or now - max(connection.caught_up_ms,
                                               connection.connected_ms) > limit:  # fmt: skip
                lagging.add(member)
        return lagging

    def proposal(self, connections: set[SlaveConnection], grace_over: bool) -> set[int] | None:
        """The set to ask the controller for, or None when it should stay."""
        if self.pending is not None and self.pending != self.members:
            return self.pending
        if not grace_over:
            return None
        lagging = self.shrink_candidates(connections)
        if not lagging:
            return None
        if self.qos is Qos.NO_LOSS and len(self.members - lagging) < 2:
            # Keep the best of the lagging members: puts wait for it rather than stand on one
            # broker's copy.
            return None
        return self.members - lagging

    def accepted(self, members: set[int], epoch: int) -> None:
        """The controller's answer (or a newer set it announced)."""
        if epoch < self.epoch:
            return
        if members != self.members:
            log.info(
                "SyncStateSet %s -> %s (epoch %d)", sorted(self.members), sorted(members), epoch
            )
        self.members = set(members) | {self.self_id}
        self.epoch = epoch
        self.pending = None
        if self.holding in self.members:
            self.holding = None

    def rejected(self) -> None:
        self.pending = None
