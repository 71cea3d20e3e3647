"""What the controllers replicate: every broker group's replicas, its master and the
SyncStateSet, with their epochs (RocketMQ's `ReplicasInfoManager` tables).

State changes as events: the leader decides them (`decisions.py`), Raft replicates them, and
every controller replica applies them here, in log order. `apply` is deterministic and checks
each event's precondition again (the epoch it was decided at), so an event decided by a deposed
leader and committed later cannot overwrite a newer decision.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

Event = dict[str, Any]


@dataclass(slots=True)
class Replica:
    """One broker of a group, as registered."""

    address: str
    check_code: str = ""


@dataclass(slots=True)
class BrokerGroup:
    """One brokerName: its replicas, who is master since which epoch, and who is in sync."""

    cluster: str
    name: str
    replicas: dict[int, Replica] = field(default_factory=dict)
    master_id: int | None = None
    master_epoch: int = 0
    sync_state_set: set[int] = field(default_factory=set)
    sync_state_set_epoch: int = 0
    next_id: int = 1
    """The next id to hand out: never goes back, so a cleaned id is not given again."""

    @property
    def master_address(self) -> str:
        if self.master_id is None or self.master_id not in self.replicas:
            return ""
        return self.replicas[self.master_id].address

    def next_broker_id(self) -> int:
        return max(self.next_id, max(self.replicas, default=0) + 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "name": self.name,
            "replicas": {str(i): [r.address, r.check_code] for i, r in self.replicas.items()},
            "masterId": self.master_id,
            "masterEpoch": self.master_epoch,
            "syncStateSet": sorted(self.sync_state_set),
            "syncStateSetEpoch": self.sync_state_set_epoch,
            "nextId": self.next_id,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> BrokerGroup:
        return cls(
            cluster=document["cluster"],
            name=document["name"],
            replicas={int(i): Replica(*value) for i, value in document["replicas"].items()},
            master_id=document["masterId"],
            master_epoch=document["masterEpoch"],
            sync_state_set=set(document["syncStateSet"]),
            sync_state_set_epoch=document["syncStateSetEpoch"],
            next_id=document.get("nextId", 1),
        )


class ReplicasInfo:
    """The replicated tables; the Raft state machine's state."""

    def __init__(self) -> None:
        self.groups: dict[str, BrokerGroup] = {}
        self.applied_events = 0

    # -- applying ------------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Applies one event; one whose precondition no longer holds changes nothing."""
        kind = event.get("type")
        handler = _APPLY.get(str(kind))
        if handler is None:
            log.warning("ignored a controller event of unknown type %r", kind)
            return
        handler(self, event)
        self.applied_events += 1

    def _apply_broker_id(self, event: Event) -> None:
        group = self.groups.get(event["group"])
        if group is None:
            group = self.groups[event["group"]] = BrokerGroup(event["cluster"], event["group"])
        broker_id = int(event["id"])
        held = group.replicas.get(broker_id)
        if held is not None and held.check_code != event["code"]:
            return  # taken by another broker meanwhile
        group.replicas[broker_id] = Replica(event.get("address", ""), event["code"])
        group.next_id = max(group.next_id, broker_id + 1)

    def _apply_address(self, event: Event) -> None:
        group = self.groups.get(event["group"])
        replica = group.replicas.get(int(event["id"])) if group else None
        if replica is not None:
            replica.address = event["address"]

    def _apply_alter(self, event: Event) -> None:
        group = self.groups.get(event["group"])
        if group is None or group.sync_state_set_epoch != event["expectSyncStateSetEpoch"]:
            return
        if group.master_epoch != event["expectMasterEpoch"]:
            return
        log.info("%s: SyncStateSet %s -> %s (epoch %d)", group.name,
                 sorted(group.sync_state_set), event["syncStateSet"],
                 group.sync_state_set_epoch + 1)  # fmt: skip
        group.sync_state_set = set(event["syncStateSet"])
        group.sync_state_set_epoch += 1

    def _apply_elect(self, event: Event) -> None:
        group = self.groups.get(event["group"])
        if group is None or group.master_epoch != event["expectMasterEpoch"]:
            return
        master = event["master"]
        group.master_epoch += 1
        log.info(
            "%s: master %s in epoch %d (%s)", group.name,
            master if master is not None else "none", group.master_epoch, event.get("why", "-"),
        )  # fmt: skip
        if master is None:
            # No candidate: the group has no master until one can be elected; the set stays,
            # so that only its members may become master later (no unclean election), and the
            # new epoch fences the old master.
            group.master_id = None
            return
        group.master_id = int(master)
        group.sync_state_set = {int(master)}
        group.sync_state_set_epoch += 1

    def _apply_clean(self, event: Event) -> None:
        name = event["group"]
        group = self.groups.get(name)
        if group is None:
            return
        ids = event.get("ids")
        if ids is None:
            del self.groups[name]
            return
        for broker_id in ids:
            group.replicas.pop(int(broker_id), None)
            group.sync_state_set.discard(int(broker_id))
            if group.master_id == int(broker_id):
                group.master_id = None
        if not group.replicas:
            del self.groups[name]

    # -- snapshots -----------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        document = {
            "groups": [g.to_json() for g in self.groups.values()],
            "appliedEvents": self.applied_events,
        }
        return json.dumps(document, separators=(",", ":")).encode()

    def load(self, image: bytes) -> None:
        self.groups = {}
        self.applied_events = 0
        if not image:
            return
        document = json.loads(image)
        for raw in document["groups"]:
            group = BrokerGroup.from_json(raw)
            self.groups[group.name] = group
        self.applied_events = document.get("appliedEvents", 0)


_APPLY = {
    "applyBrokerId": ReplicasInfo._apply_broker_id,
    "updateAddress": ReplicasInfo._apply_address,
    "alterSyncStateSet": ReplicasInfo._apply_alter,
    "electMaster": ReplicasInfo._apply_elect,
    "cleanBrokerData": ReplicasInfo._apply_clean,
}


def encode_events(events: list[Event]) -> bytes:
    return json.dumps(events, separators=(",", ":")).encode()


class ControllerStateMachine:
    """The Raft `StateMachine` over `ReplicasInfo`: a command is a JSON list of events."""

    def __init__(self, replicas: ReplicasInfo) -> None:
        self.replicas = replicas

    def apply(self, index: int, command: bytes) -> None:
        if not command:
            return
        try:
            events = json.loads(command)
        except ValueError:
            log.error("controller log entry %d is not JSON; skipped", index)
            return
        for event in events:
            self.replicas.apply(event)

    def snapshot(self) -> bytes:
        return self.replicas.to_bytes()

    def restore(self, image: bytes) -> None:
        self.replicas.load(image)
