"""Admin operations on the controllers of controller mode, as mqadmin's getControllerMetaData,
getSyncStateSet, electMaster, cleanBrokerMetadata, getControllerConfig and
updateControllerConfig send them: metadata and settings from the address given; the rest to
the leader that address names. getBrokerEpoch asks a broker."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pocketmq.client.admin.errors import AdminError, check
from pocketmq.client.admin.lookups import AdminLookups
from pocketmq.common.codes import RequestCode
from pocketmq.common.config import format_properties, parse_properties
from pocketmq.remoting.command import RemotingCommand


class ControllerAdmin(AdminLookups):
    async def _controller(
        self,
        address: str,
        code: int,
        fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        what: str,
    ) -> RemotingCommand:
        response = await self._broker(address, code, fields, body, what=what)
        check(response, what, f"controller {address}")
        return response

    async def controller_metadata(self, address: str) -> dict[str, str]:
        """CONTROLLER_GET_METADATA_INFO: group, leader id and address, peers, isLeader."""
        response = await self._controller(
            address, RequestCode.CONTROLLER_GET_METADATA_INFO, what="controller metadata"
        )
        return dict(response.ext_fields)

    async def controller_leader(self, address: str) -> str:
        """The leader's address, as the controller at `address` knows it.

        Raises:
            AdminError: it knows no leader.
        """
        leader = (await self.controller_metadata(address)).get("controllerLeaderAddress")
        if not leader:
            raise AdminError(f"controller {address} knows no leader yet; try again shortly")
        return leader

    async def sync_state_data(self, controller: str, broker_names: list[str]) -> dict[str, Any]:
        """CONTROLLER_GET_SYNC_STATE_DATA: each group's master, epochs and replicas."""
        leader = await self.controller_leader(controller)
        response = await self._controller(
            leader,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
            body=json.dumps(broker_names).encode(),
            what="SyncStateSet",
        )
        table: dict[str, Any] = json.loads(response.body or b"{}").get("replicasInfoTable", {})
        return table

    async def elect_master(
        self, controller: str, cluster: str, broker_name: str, broker_id: int
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """CONTROLLER_ELECT_MASTER naming `broker_id`; the new master's header and body."""
        leader = await self.controller_leader(controller)
        response = await self._controller(
            leader,
            RequestCode.CONTROLLER_ELECT_MASTER,
            {
                "clusterName": cluster,
                "brokerName": broker_name,
                "brokerId": str(broker_id),
                "designateElect": "true",
            },
            what="electMaster",
        )
        return dict(response.ext_fields), json.loads(response.body or b"{}")

    async def clean_broker_metadata(
        self,
        controller: str,
        cluster: str,
        broker_name: str,
        broker_ids: list[int] | None,
        *,
        clean_living: bool,
    ) -> None:
        """CLEAN_BROKER_DATA: forgets the replicas (all of the group without ids)."""
        leader = await self.controller_leader(controller)
        fields = {"clusterName": cluster, "brokerName": broker_name,
                  "isCleanLivingBroker": str(clean_living).lower()}  # fmt: skip
        if broker_ids:
            fields["brokerControllerIdsToClean"] = ";".join(str(i) for i in broker_ids)
        await self._controller(
            leader, RequestCode.CLEAN_BROKER_DATA, fields, what="cleanBrokerMetadata"
        )

    async def controller_config(self, address: str) -> dict[str, str]:
        response = await self._controller(
            address, RequestCode.GET_CONTROLLER_CONFIG, what="controller config"
        )
        return parse_properties(response.body.decode("utf-8"), source=address)

    async def update_controller_config(self, address: str, updates: dict[str, str]) -> None:
        await self._controller(
            address,
            RequestCode.UPDATE_CONTROLLER_CONFIG,
            body=format_properties(updates).encode(),
            what="updateControllerConfig",
        )

    async def broker_epochs(self, address: str) -> dict[str, Any]:
        """GET_BROKER_EPOCH_CACHE: a controller-mode broker's epochs and CommitLog end."""
        response = await self._broker_ok(
            address, RequestCode.GET_BROKER_EPOCH_CACHE, what="broker epochs"
        )
        document: dict[str, Any] = json.loads(response.body or b"{}")
        return document

    async def raw_request(
        self, address: str, code: int, fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """One request, any answer (for tools and tests that check codes)."""
        return await self._broker(address, code, fields, body, what=f"request {code}")
