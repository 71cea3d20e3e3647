"""Taking a broker group out of the write path at one NameServer, and putting it back.

    code                               request ext   answer ext
    WIPE_WRITE_PERM_OF_BROKER (205)    brokerName    wipeTopicCount
    ADD_WRITE_PERM_OF_BROKER (327)     brokerName    addTopicCount

Before a broker is stopped for maintenance, an operator wipes its write permission at every
NameServer (`mqadmin wipeWritePerm`): routes then show its queues without PERM_WRITE, producers
stop choosing them at their next route refresh, and consumers drain what is left. The count is
the number of topics the group serves here; an unknown group answers SUCCESS with 0, as in
RocketMQ.

The change lives only in this NameServer's route table: the broker's own topic permissions stay
as they are, so a broker registration with a changed data version (a topic created or updated on
it) writes its own permissions back, and a restarted NameServer forgets the wipe. This is
RocketMQ's behaviour too. Adding the permission sets every queue data of the group to read-write
(RocketMQ's `PERM_READ | PERM_WRITE`), whatever it was before the wipe.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.namesrv.route_table import RouteTable
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)


class WritePermHandlers:
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER over one route table."""

    def __init__(self, table: RouteTable) -> None:
        self.table = table

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm,
        }

    async def wipe_write_perm(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return self._change(request, self.table.wipe_write_perm, "wiped", "wipeTopicCount")

    async def add_write_perm(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return self._change(request, self.table.add_write_perm, "added", "addTopicCount")

    @staticmethod
    def _change(
        request: RemotingCommand, change: Callable[[str], int], done: str, count_field: str
    ) -> RemotingCommand:
        broker_name = request.ext_fields.get("brokerName")
        if not broker_name:
            # RocketMQ's header check (@CFNotNull) fails the request with this as SYSTEM_ERROR.
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, "the custom field <brokerName> is null"
            )
        count = change(broker_name)
        log.warning("%s write perm of broker %s on %d topic(s)", done, broker_name, count)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={count_field: str(count)}
        )
