"""A replicated group's metadata as a log of changes: consumer offsets, topics, subscription
groups and delay offsets, so that a new master starts exactly where the group was (RocketMQ
copies them from the master every 10 s, and a switch rewinds them), and how far the master's
timer store has come.

The master collects what changed into one document: each offset commit and removal as it
happened, and the topic, group and delay-offset documents whole when their version moved. It
hands one to `propose` every `interval_s`, or at once for a commit that waits for its answer
(UPDATE_CONSUMER_OFFSET). Every replica applies them in log order; a master skips its own.

Two logs carry them: a DLedger group's Raft log (META commands, `broker/dledger`), and in
controller mode the CommitLog itself, as records of a system topic that the write rule
acknowledges like any message (`broker/controlled/metadata.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.groups import SubscriptionGroupTable
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.raft.node import NotLeaderError, ProposalLostError
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.timer import TimerHandover, TimerMessageStore

log = logging.getLogger(__name__)

COLLECT_INTERVAL_S = 0.05
HELD_ANNOUNCE_INTERVAL_S = 0.5


@dataclass(frozen=True, slots=True)
class MetadataTables:
    topics: TopicTable
    offsets: ConsumerOffsetTable
    groups: SubscriptionGroupTable
    delay_delivery: DelayDelivery
    clock: Clock
    topics_changed: Callable[[], None]
    groups_changed: Callable[[], None]
    timer_store: TimerMessageStore | None = None
    """Its progress (`TimerHandover`) is replicated while it runs on the master."""


class ReplicatedMetadata:
    """Turns the leader's metadata changes into commands and applies commands to the tables."""

    def __init__(
        self,
        tables: MetadataTables,
        propose: Callable[[dict[str, Any]], Awaitable[None]],
        *,
        interval_s: float = COLLECT_INTERVAL_S,
    ) -> None:
        self.tables = tables
        self._propose = propose
        self._interval_s = interval_s
        self._recording = False
        self._offsets: dict[tuple[str, str, int], int] = {}
        self._removed_groups: list[str] = []
        self._removed_topics: list[str] = []
        self._topics_version: dict[str, int] | None = None
        self._groups_version: dict[str, int] | None = None
        self._delay_document: dict[str, Any] | None = None
        self._timer_document: dict[str, int] | None = None
        self.timer_handover: TimerHandover | None = None
        """The last master's timer progress as the log says (the next master resumes there)."""
        self.held_index: Callable[[], int] = lambda: 0
        """On the master: the highest Raft index every replica holds."""
        self.held_by_all = 0
        """That index as the master last announced it: a replica compacts its Raft log only
        up to it, so that whoever leads next never needs to send a snapshot (which carries
        no CommitLog bytes)."""
        self._held_announced_at = -HELD_ANNOUNCE_INTERVAL_S
        self._task: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        tables.offsets.listener = self._on_offset_change

    # -- the leader's side -------------------------------------------------------------------
    def start_recording(self) -> None:
        """This replica now leads: its changes from here on are replicated."""
        self._recording = True
        self._offsets.clear()
        self._removed_groups.clear()
        self._removed_topics.clear()
        # The first command carries every document whole: a topic or group this replica
        # created on its own while it followed (a send it refused, a heartbeat) joins them.
        self._topics_version = None
        self._groups_version = None
        self._delay_document = None
        self._timer_document = None
        self._task = asyncio.get_running_loop().create_task(self._run(), name="replicated-metadata")

    async def stop_recording(self) -> None:
        timer = self._running_timer()
        if timer is not None:
            self.timer_handover = TimerHandover.from_json(timer)
        self._recording = False
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None

    @property
    def topics_changed_since_last_command(self) -> bool:
        return self._recording and (
            self.tables.topics.data_version.to_json() != self._topics_version
        )

    async def flush(self) -> None:
        """Proposes what changed so far and returns once it committed (raises when this
        replica no longer leads: see `RaftNode.propose`)."""
        async with self._flush_lock:
            document = self._collect()
            if document:
                await self._propose(document)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval_s)
            try:
                await self.flush()
            except (NotLeaderError, ProposalLostError, OSError) as exc:
                # The role change stops this loop; a change not replicated now goes with the
                # next image (controller mode) or was never acknowledged to anyone.
                log.debug("metadata not replicated: %s", exc)

    def _on_offset_change(self, change: tuple[Any, ...]) -> None:
        if not self._recording:
            return
        match change:
            case ("commit", group, topic, queue_id, offset):
                self._offsets[(group, topic, queue_id)] = offset
            case ("remove_group", group):
                self._offsets = {k: v for k, v in self._offsets.items() if k[0] != group}
                self._removed_groups.append(group)
            case ("remove_topic", topic):
                self._offsets = {k: v for k, v in self._offsets.items() if k[1] != topic}
                self._removed_topics.append(topic)

    def _collect(self) -> dict[str, Any]:
        tables = self.tables
        document: dict[str, Any] = {}
        if self._removed_groups:
            document["removedGroups"], self._removed_groups = self._removed_groups, []
        if self._removed_topics:
            document["removedTopics"], self._removed_topics = self._removed_topics, []
        if self._offsets:
            document["offsets"] = [[g, t, q, o] for (g, t, q), o in self._offsets.items()]
            self._offsets = {}
        version = tables.topics.data_version.to_json()
        if version != self._topics_version:
            document["topics"] = tables.topics.snapshot()
            self._topics_version = version
        version = tables.groups.data_version.to_json()
        if version != self._groups_version:
            document["groups"] = tables.groups.snapshot()
            self._groups_version = version
        delay = tables.delay_delivery.offsets.snapshot()
        if delay != self._delay_document:
            document["delayOffsets"] = delay
            self._delay_document = delay
        held = self.held_index()
        now = tables.clock.monotonic()
        if held > self.held_by_all and now - self._held_announced_at >= HELD_ANNOUNCE_INTERVAL_S:
            document["held"] = self.held_by_all = held
            self._held_announced_at = now
        timer = self._running_timer()
        if timer is not None and timer != self._timer_document:
            document["timer"] = timer
            self._timer_document = timer
            # Its own commands are not applied here: a master re-elected resumes from this.
            self.timer_handover = TimerHandover.from_json(timer)
        return document

    def _running_timer(self) -> dict[str, int] | None:
        store = self.tables.timer_store
        if store is None or not store.running:
            return None
        return store.handover.to_json()

    # -- every replica -----------------------------------------------------------------------
    def apply(self, document: dict[str, Any]) -> None:
        """Applies a committed META command (a malformed part is skipped and logged)."""
        tables = self.tables
        recording, self._recording = self._recording, False
        try:
            for group in document.get("removedGroups", ()):
                tables.offsets.remove_group(str(group))
            for topic in document.get("removedTopics", ()):
                tables.offsets.remove_topic(str(topic))
            for group, topic, queue_id, offset in document.get("offsets", ()):
                tables.offsets.commit(str(group), str(topic), int(queue_id), int(offset))
            if "topics" in document:
                tables.topics.replace_all(document["topics"], tables.clock.now_ms())
                tables.topics_changed()
            if "groups" in document:
                tables.groups.groups.clear()
                tables.groups.load(document["groups"])
                tables.groups_changed()
            if "delayOffsets" in document:
                tables.delay_delivery.offsets.load(document["delayOffsets"])
                tables.delay_delivery.offsets.changed = True
            if "timer" in document:
                self.timer_handover = TimerHandover.from_json(document["timer"])
            if "held" in document:
                self.held_by_all = max(self.held_by_all, int(document["held"]))
        except (TypeError, ValueError, KeyError) as exc:
            log.error("a replicated metadata command was skipped: %s", exc)
        finally:
            self._recording = recording

    def image(self) -> dict[str, Any]:
        """Every table, for a Raft snapshot."""
        tables = self.tables
        return {
            "offsets": tables.offsets.document(),
            "topics": tables.topics.snapshot(),
            "groups": tables.groups.snapshot(),
            "delayOffsets": tables.delay_delivery.offsets.snapshot(),
            "timer": self.timer_handover.to_json() if self.timer_handover else None,
        }

    def restore(self, image: dict[str, Any]) -> None:
        tables = self.tables
        recording, self._recording = self._recording, False
        try:
            tables.offsets.replace_all(image.get("offsets"))
            tables.topics.replace_all(image.get("topics"), tables.clock.now_ms())
            tables.groups.groups.clear()
            tables.groups.load(image.get("groups"))
            tables.delay_delivery.offsets.load(image.get("delayOffsets"))
            tables.delay_delivery.offsets.changed = True
            timer = image.get("timer")
            self.timer_handover = TimerHandover.from_json(timer) if timer else None
        finally:
            self._recording = recording
        tables.topics_changed()
        tables.groups_changed()
