"""What a controller-mode broker answers about its role: NOTIFY_BROKER_ROLE_CHANGED (1008,
from the controller leader), GET_BROKER_EPOCH_CACHE (1007, mqadmin's getBrokerEpoch) and
GET_BROKER_HA_STATUS (907, with the controller's view added)."""

from __future__ import annotations

import json
import logging
from typing import Any

from pocketmq.broker.controlled.identity import ReplicaInfo
from pocketmq.broker.controlled.replica import ControlledReplica
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)


def _json(request: RemotingCommand, document: dict[str, Any]) -> RemotingCommand:
    body = json.dumps(document, separators=(",", ":")).encode()
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)


def controlled_routes(replica: ControlledReplica) -> dict[int, RequestHandler]:
    async def role_changed(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            info = ReplicaInfo.from_response(request)
        except (ValueError, TypeError) as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("the controller announces master %s (%s) in epoch %d", info.master_id,
                 info.master_address, info.master_epoch)  # fmt: skip
        await replica.apply(info)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def epoch_cache(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return _json(request, replica.epoch_cache())

    async def status(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return _json(request, replica.status())

    return {
        RequestCode.NOTIFY_BROKER_ROLE_CHANGED: role_changed,
        RequestCode.GET_BROKER_EPOCH_CACHE: epoch_cache,
        RequestCode.GET_BROKER_HA_STATUS: status,
    }
