"""The leader's decisions (RocketMQ's `ControllerResult`): each request becomes the events to
replicate and the answer to give once they applied. Pure functions of the replicated tables and
the liveness this controller sees; `service.py` runs them one at a time on the leader.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from pocketmq.common.codes import ResponseCode
from pocketmq.common.ha_qos import Qos
from pocketmq.controller.election import elect
from pocketmq.controller.heartbeats import LiveBroker
from pocketmq.controller.replicas import BrokerGroup, Event, ReplicasInfo


@dataclass(slots=True)
class Decision:
    events: list[Event] = field(default_factory=list)
    code: int = ResponseCode.SUCCESS
    remark: str | None = None
    answer: Callable[[], tuple[dict[str, str], bytes]] | None = None
    """Builds the response header and body after the events applied."""


def _java(value: object) -> str:
    """How Java prints a value in a remark (`null` for none)."""
    return "null" if value is None else str(value)


def refuse(code: int, remark: str) -> Decision:
    return Decision(code=code, remark=remark)


def sync_state_set_body(group: BrokerGroup) -> bytes:
    return json.dumps(
        {
            "syncStateSet": sorted(group.sync_state_set),
            "syncStateSetEpoch": group.sync_state_set_epoch,
        },
        separators=(",", ":"),
    ).encode()


def master_fields(group: BrokerGroup) -> dict[str, str]:
    fields = {
        "masterAddress": group.master_address,
        "masterEpoch": str(group.master_epoch),
        "syncStateSetEpoch": str(group.sync_state_set_epoch),
    }
    if group.master_id is not None:
        fields["masterBrokerId"] = str(group.master_id)
    return fields


def _replica_answer(
    replicas: ReplicasInfo, name: str, alive: Callable[[int], bool]
) -> Callable[[], tuple[dict[str, str], bytes]]:
    """REGISTER's answer: the master only while it is alive (a replica must not follow a
    master the controller is about to replace)."""

    def answer() -> tuple[dict[str, str], bytes]:
        group = replicas.groups[name]
        fields = {"clusterName": group.cluster, "brokerName": group.name}
        if group.master_id is not None and alive(group.master_id):
            fields.update(master_fields(group))
        return fields, sync_state_set_body(group)

    return answer


def next_broker_id(replicas: ReplicasInfo, cluster: str, name: str) -> Decision:
    group = replicas.groups.get(name)
    next_id = group.next_broker_id() if group else 1

    def answer() -> tuple[dict[str, str], bytes]:
        return {"clusterName": cluster, "brokerName": name, "nextBrokerId": str(next_id)}, b""

    return Decision(answer=answer)


def apply_broker_id(
    replicas: ReplicasInfo, cluster: str, name: str, broker_id: int, code: str
) -> Decision:
    group = replicas.groups.get(name)
    if group is None and broker_id != 1:
        return refuse(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"Broker-set: {name} hasn't been registered in controller, but broker try to apply "
            f"brokerId: {broker_id}",
        )
    held = group.replicas.get(broker_id) if group else None
    if held is not None and held.check_code != code:
        return refuse(
            ResponseCode.CONTROLLER_BROKER_ID_INVALID,
            f"Fail to apply brokerId: {broker_id} in broker-set: {name}",
        )

    def answer() -> tuple[dict[str, str], bytes]:
        return {"clusterName": cluster, "brokerName": name}, b""

    if held is not None:
        return Decision(answer=answer)
    # The check code is `address;time`: the address is the replica's until it registers.
    event = {"type": "applyBrokerId", "cluster": cluster, "group": name, "id": broker_id,
             "code": code, "address": code.partition(";")[0]}  # fmt: skip
    return Decision([event], answer=answer)


def register_broker(
    replicas: ReplicasInfo, name: str, broker_id: int, address: str, alive: Callable[[int], bool]
) -> Decision:
    group = replicas.groups.get(name)
    replica = group.replicas.get(broker_id) if group else None
    if group is None:
        return refuse(
            ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"Broker-set: {name} hasn't been registered in controller",
        )
    if replica is None:
        return refuse(
            ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
            f"BrokerId: {broker_id} hasn't been registered in broker-set: {name}",
        )
    events: list[Event] = []
    if replica.address != address:
        events.append({"type": "updateAddress", "group": name, "id": broker_id,
                       "address": address})  # fmt: skip
    return Decision(events, answer=_replica_answer(replicas, name, alive))


def elect_master(
    replicas: ReplicasInfo,
    name: str,
    live: Callable[[str, int], LiveBroker | None],
    *,
    unclean: bool,
    designated: int | None = None,
    requester: int | None = None,
) -> Decision:
    """A broker that finds no master (`requester`), the leader's scan that found the master
    gone (neither), or an operator's `electMaster -b` (`designated`)."""
    group = replicas.groups.get(name)
    if group is None:
        return refuse(
            ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered"
        )
    if group.master_epoch == 0 and requester is not None and requester in group.replicas:
        # The group's first election: nothing was written yet, the asking replica leads.
        chosen: int | None = requester
        why = "the group's first master"
    else:
        election = elect(
            group, lambda broker_id: live(name, broker_id), unclean=unclean,
            designated=designated,
        )  # fmt: skip
        chosen, why = election.master, election.why
    if chosen is not None and chosen == group.master_id:
        return Decision(
            code=ResponseCode.CONTROLLER_MASTER_STILL_EXIST,
            remark=f"The old master {chosen} is still alive, not need to elect new master for "
            f"broker {name}",
            answer=_elect_answer(replicas, name, members=False),
        )
    if chosen is None:
        if designated is None and requester is None:
            # The scan found the master gone and nobody to replace it: the group has no
            # master (and a new epoch, so the old master's writes are fenced) until a member
            # of the set comes back.
            event = {"type": "electMaster", "group": name, "master": None,
                     "expectMasterEpoch": group.master_epoch}  # fmt: skip
            return Decision(
                [event] if group.master_id is not None else [],
                code=ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE,
                remark=f"Old master has down and failed to elect a new broker master: {why}",
            )
        return refuse(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED,
                      f"Failed to elect a new master: {why}")  # fmt: skip
    event = {"type": "electMaster", "group": name, "master": chosen,
             "expectMasterEpoch": group.master_epoch, "why": why}  # fmt: skip
    return Decision([event], answer=_elect_answer(replicas, name, members=True))


def _elect_answer(
    replicas: ReplicasInfo, name: str, *, members: bool
) -> Callable[[], tuple[dict[str, str], bytes]]:
    def answer() -> tuple[dict[str, str], bytes]:
        group = replicas.groups[name]
        body: dict[str, object] = {"syncStateSet": sorted(group.sync_state_set)}
        if members:
            body["brokerMemberGroup"] = {
                "brokerAddrs": {str(i): r.address for i, r in sorted(group.replicas.items())},
                "brokerName": group.name,
                "cluster": group.cluster,
            }
        return master_fields(group), json.dumps(body, separators=(",", ":")).encode()

    return answer


def alter_sync_state_set(
    replicas: ReplicasInfo,
    name: str,
    master_id: int,
    master_epoch: int,
    new_set: set[int],
    set_epoch: int,
    alive: Callable[[str, int], bool],
    *,
    qos: Qos = Qos.AVAILABILITY,
) -> Decision:
    """A master grows or shrinks its group's SyncStateSet; checked in RocketMQ's order, then
    the group's QoS (NO_LOSS keeps two members at least)."""
    group = replicas.groups.get(name)
    failed = ResponseCode.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    if group is None:
        return refuse(failed, "Broker metadata is not existed")
    if new_set == group.sync_state_set:
        return refuse(
            failed,
            "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet",
        )
    rejecting = "Rejecting alter syncStateSet request because"
    if master_id != group.master_id:
        return refuse(
            ResponseCode.CONTROLLER_INVALID_MASTER,
            f"{rejecting} the current leader is:{{{_java(group.master_id)}}}, not {{{master_id}}}",
        )
    if master_epoch != group.master_epoch:
        return refuse(
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            f"{rejecting} the current master epoch is:{{{group.master_epoch}}}, not "
            f"{{{master_epoch}}}",
        )
    if set_epoch != group.sync_state_set_epoch:
        return refuse(
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            f"{rejecting} the current syncStateSet epoch is:{{{group.sync_state_set_epoch}}}, "
            f"not {{{set_epoch}}}",
        )
    for broker_id in sorted(new_set):
        if broker_id not in group.replicas:
            return refuse(
                ResponseCode.CONTROLLER_INVALID_REPLICAS,
                f"{rejecting} the replicas {{{broker_id}}} don't exist",
            )
        if not alive(name, broker_id):
            return refuse(
                ResponseCode.CONTROLLER_BROKER_NOT_ALIVE,
                f"{rejecting} the replicas {{{broker_id}}} don't alive",
            )
    if master_id not in new_set:
        return refuse(
            failed, f"{rejecting} the newSyncStateSet don't contains origin leader {{{master_id}}}"
        )
    if qos is Qos.NO_LOSS and len(new_set) < 2 <= len(group.sync_state_set):
        return refuse(
            failed,
            f"{rejecting} {name} keeps at least two in-sync replicas (QoS NO_LOSS), not "
            f"{sorted(new_set)}",
        )
    event = {"type": "alterSyncStateSet", "group": name, "syncStateSet": sorted(new_set),
             "expectSyncStateSetEpoch": set_epoch, "expectMasterEpoch": master_epoch}  # fmt: skip
    return Decision([event], answer=_alter_answer(replicas, name))


def _alter_answer(replicas: ReplicasInfo, name: str) -> Callable[[], tuple[dict[str, str], bytes]]:
    def answer() -> tuple[dict[str, str], bytes]:
        group = replicas.groups[name]
        fields = {"newSyncStateSetEpoch": str(group.sync_state_set_epoch)}
        return fields, sync_state_set_body(group)

    return answer


def clean_broker_data(
    replicas: ReplicasInfo,
    name: str,
    ids: list[int] | None,
    *,
    clean_living: bool,
    alive: Callable[[str, int], bool],
) -> Decision:
    invalid = ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    group = replicas.groups.get(name)
    if group is None:
        return refuse(invalid, f"Broker {name} is not existed,clean broker data failure.")
    if not clean_living:
        if ids is None and group.master_id is not None:
            return refuse(invalid, f"Broker {name} is still alive, clean up failure")
        living = [i for i in (ids or []) if alive(name, i)]
        if living:
            return refuse(
                invalid, f"Broker [{name},  {living[0]}] is still alive, clean up failure"
            )
    event = {"type": "cleanBrokerData", "group": name, "ids": ids}
    return Decision([event], answer=lambda: ({}, b""))
