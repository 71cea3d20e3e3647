"""What a DLedger replica answers beyond a broker's usual requests: its group's status (leader,
term, commit index, each peer's match index and lag) and a leadership transfer to a named
replica. The codes are pocketmq's own (RocketMQ's mqadmin has no DLedger command);
GET_BROKER_HA_STATUS answers the same status."""

from __future__ import annotations

import json

from pocketmq.broker.dledger.replica import DLedgerReplica
from pocketmq.common.codes import (
    DLEDGER_STATUS,
    DLEDGER_TRANSFER_LEADER,
    RequestCode,
    ResponseCode,
)
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler


def dledger_routes(replica: DLedgerReplica) -> dict[int, RequestHandler]:
    async def status(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = json.dumps(replica.status(), separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def transfer(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        target = request.ext_fields.get("to", "")
        refusal = replica.transfer_to(target)
        if refusal is not None:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark=refusal)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, remark=f"handing leadership to {target}"
        )

    return {
        DLEDGER_STATUS: status,
        RequestCode.GET_BROKER_HA_STATUS: status,
        DLEDGER_TRANSFER_LEADER: transfer,
    }
