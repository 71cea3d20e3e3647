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
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.broker.ha.master import SlaveConnection
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

    # -- the write rule ------------------------------------------------------------------------
    def counted(self) -> set[int]:
        """Whose copies count: the set, and while a change is pending, its union with it."""
        return self.members | (self.pending or set())

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
        """A slave that holds everything acknowledged so far joins at once (pending)."""
        broker_id = connection.broker_id
        if broker_id is None or broker_id in self.counted():
            return
        if connection.ack_offset >= self.acknowledged and connection.caught_up_ms:
            self.pending = self.counted() | {broker_id}
            log.info("slave %d caught up (offset %d); asking to add it to the SyncStateSet %s",
                     broker_id, connection.ack_offset, sorted(self.members))  # fmt: skip
            self.wanted()

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
        if lagging:
            return self.members - lagging
        return None

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

    def rejected(self) -> None:
        self.pending = None
