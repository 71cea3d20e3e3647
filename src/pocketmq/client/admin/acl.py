"""The admin client's ACL 1.0 calls (RocketMQ 4.9's `DefaultMQAdminExt` ACL methods): accounts
and the global whitelist of a broker's `plain_acl.yml`, and the rules' versions."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from pocketmq.client.admin.lookups import AdminLookups
from pocketmq.common.codes import RequestCode


@dataclass(frozen=True, slots=True)
class AclFileVersion:
    """One rules file of a broker and its data version."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    path: str
    counter: int
    timestamp_ms: int


class AclAdmin(AdminLookups):
    async def update_acl_account(self, address: str, fields: Mapping[str, str]) -> None:
        """Creates or updates an account (UPDATE_AND_CREATE_ACL_CONFIG); `fields` are the
        request's: accessKey, secretKey, whiteRemoteAddress, admin, defaultTopicPerm,
        defaultGroupPerm, topicPerms, groupPerms (lists comma-separated).

        Raises:
            AdminError: the broker refused (ACL off, a bad value, no admin rights).
        """
        await self._broker_ok(
            address, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, fields, what="ACL account update"
        )

    async def delete_acl_account(self, address: str, access_key: str) -> None:
        """Deletes an account (DELETE_ACL_CONFIG). Raises AdminError."""
        await self._broker_ok(
            address,
            RequestCode.DELETE_ACL_CONFIG,
            {"accessKey": access_key},
            what="ACL account deletion",
        )

    async def update_global_white_addresses(
        self, address: str, patterns: str, acl_file: str | None = None
    ) -> None:
        """Replaces `globalWhiteRemoteAddresses` (comma-separated patterns) of the broker's
        main rules file, or of `acl_file` (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG). Raises AdminError."""
        fields = {"globalWhiteAddrs": patterns}
        if acl_file:
            fields["aclFileFullPath"] = acl_file
        await self._broker_ok(
            address,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
            fields,
            what="ACL global whitelist update",
        )

    async def acl_versions(self, address: str) -> list[AclFileVersion]:
        """Each rules file of the broker with its version (GET_BROKER_CLUSTER_ACL_INFO)."""
        response = await self._broker_ok(
            address, RequestCode.GET_BROKER_CLUSTER_ACL_INFO, what="ACL version"
        )
        fields = response.ext_fields
        versions = json.loads(fields.get("allAclFileVersion") or "{}")
        return [
            AclFileVersion(
                fields.get("clusterName", ""),
                fields.get("brokerName", ""),
                fields.get("brokerAddr", address),
                path,
                int(version.get("counter", 0)),
                int(version.get("timestamp", 0)),
            )
            for path, version in versions.items()
        ]
