"""Who a controller-mode broker is and what the controllers say of its group: the broker id it
applied for (kept in `<storePathRootDir>/brokerIdentity`), and the replica info the controller
answers (master, epoch, SyncStateSet)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from pocketmq.broker.controlled.client import ControllerClient, ControllerUnavailable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.json_file import JsonFile

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """The controller's word on a group: who is master since which epoch, who is in sync."""

    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    @classmethod
    def from_response(cls, response: RemotingCommand) -> ReplicaInfo:
        fields = response.ext_fields
        raw_id = fields.get("masterBrokerId", "")
        master_id = int(raw_id) if raw_id not in ("", "-1") else None
        body = json.loads(response.body) if response.body else {}
        return cls(
            master_id=master_id,
            master_address=fields.get("masterAddress", "") if master_id is not None else "",
            master_epoch=int(fields.get("masterEpoch") or 0),
            sync_state_set=frozenset(int(i) for i in body.get("syncStateSet", [])),
            sync_state_set_epoch=int(
                body.get("syncStateSetEpoch", fields.get("syncStateSetEpoch") or 0)
            ),
        )


async def take_broker_id(
    controllers: ControllerClient,
    identity: JsonFile,
    *,
    cluster: str,
    name: str,
    address: str,
    now_ms: Callable[[], int],
) -> int:
    """This broker's id: from `identity`, else applied for. The id and check code are saved
    before they are applied for, so a broker that crashes in between applies again with the
    same check code and gets the same id.

    Raises:
        ControllerUnavailable: no leader answered, or it refused (an id taken meanwhile: the
            next attempt starts over).
    """
    document = identity.load() or {}
    if document.get("brokerName") == name and document.get("done"):
        return int(document["brokerId"])
    broker_id = int(document.get("brokerId", 0))
    code = str(document.get("registerCheckCode", ""))
    if not broker_id:
        response = await controllers.invoke(
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID, {"clusterName": cluster, "brokerName": name}
        )
        broker_id = int(response.ext_fields.get("nextBrokerId") or 0)
        if response.code != ResponseCode.SUCCESS or broker_id < 1:
            raise ControllerUnavailable(f"no broker id: {response.code} {response.remark}")
        code = f"{address};{now_ms()}"
        document = {"clusterName": cluster, "brokerName": name, "brokerId": broker_id,
                    "registerCheckCode": code, "done": False}  # fmt: skip
        await asyncio.to_thread(identity.save, document)
    response = await controllers.invoke(
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
        {
            "clusterName": cluster,
            "brokerName": name,
            "appliedBrokerId": str(broker_id),
            "registerCheckCode": code,
        },
    )
    if response.code == ResponseCode.CONTROLLER_BROKER_ID_INVALID:
        await asyncio.to_thread(identity.save, {"brokerName": name})
        raise ControllerUnavailable(f"broker id {broker_id} was taken: {response.remark}")
    if response.code != ResponseCode.SUCCESS:
        raise ControllerUnavailable(f"broker id refused: {response.code} {response.remark}")
    await asyncio.to_thread(identity.save, {**document, "done": True})
    log.info("broker %s of %s has controller broker id %d", address, name, broker_id)
    return broker_id
