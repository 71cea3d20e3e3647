"""The broker's ACL 1.0 admin requests, as RocketMQ 4.9's `AdminBrokerProcessor` answers them:
UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51), GET_BROKER_CLUSTER_ACL_INFO (52),
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53).

An update merges into an existing account: the fields a request carries replace the account's,
the others stay (`admin` is always carried). Failures answer 4.9's own codes (209-211, which
5.x reuses for other meanings) with a remark that names the problem, never a secret key.
With ACL off (`aclEnable=false`) each answers that it is off.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Final

from pocketmq.acl.accounts import Account, AclDataVersion
from pocketmq.acl.addresses import AclConfigError
from pocketmq.acl.hook import AclHook
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler

UPDATE_AND_CREATE_ACL_CONFIG_FAILED: Final = 209
DELETE_ACL_CONFIG_FAILED: Final = 210
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED: Final = 211
ACL_OFF: Final = "ACL is off on this broker: set aclEnable=true (and aclFilePath) to manage it"


def _split(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _version(version: AclDataVersion | None) -> dict[str, int]:
    if version is None:
        return {"counter": 0, "timestamp": 0}
    return {"counter": version.counter, "timestamp": version.timestamp}


def merged_account(existing: Account | None, fields: Mapping[str, str]) -> Account:
    """The account an update request asks for, over `existing` (None: a new account).

    Raises:
        AclConfigError: a new account without a secret key, or fields that do not make one.
    """
    access_key = fields.get("accessKey", "")
    secret_key = fields.get("secretKey") or (existing.secret_key if existing else "")
    if not secret_key:
        raise AclConfigError(f"account {access_key!r}: a new account needs a secretKey")
    old = existing if existing is not None else Account(access_key, secret_key)
    topic_perms = _split(fields.get("topicPerms"))
    group_perms = _split(fields.get("groupPerms"))
    return Account(
        access_key,
        secret_key,
        white_remote_address=fields.get("whiteRemoteAddress", old.white_remote_address),
        admin=fields.get("admin", "false").strip().lower() == "true",
        default_topic_perm=fields.get("defaultTopicPerm") or old.default_topic_perm,
        default_group_perm=fields.get("defaultGroupPerm") or old.default_group_perm,
        topic_perms=old.topic_perms if topic_perms is None else topic_perms,
        group_perms=old.group_perms if group_perms is None else group_perms,
    )


class AclAdminHandlers:
    """Answers the ACL admin codes for one broker."""

    def __init__(
        self,
        hook: AclHook | None,
        *,
        cluster_name: str,
        broker_name: str,
        broker_address: Callable[[], str],
    ) -> None:
        self.hook = hook
        self.cluster_name = cluster_name
        self.broker_name = broker_name
        self.broker_address = broker_address

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: self.update_account,
            RequestCode.DELETE_ACL_CONFIG: self.delete_account,
            RequestCode.GET_BROKER_CLUSTER_ACL_INFO: self.version_info,
            RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: self.update_global_white,
        }

    async def update_account(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        failed = UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        if self.hook is None:
            return RemotingCommand.response_to(request, failed, ACL_OFF)
        fields = request.ext_fields
        access_key = fields.get("accessKey", "")
        try:
            existing = self.hook.rules.accounts.get(access_key)
            account = merged_account(existing, fields)
            self.hook.update_account(account, by=channel.remote_address)
        except (AclConfigError, OSError) as exc:
            return RemotingCommand.response_to(
                request, failed, f"the account {access_key} was not updated: {exc}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def delete_account(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        failed = DELETE_ACL_CONFIG_FAILED
        if self.hook is None:
            return RemotingCommand.response_to(request, failed, ACL_OFF)
        access_key = request.ext_fields.get("accessKey", "")
        try:
            deleted = self.hook.delete_account(access_key, by=channel.remote_address)
        except (AclConfigError, OSError) as exc:
            return RemotingCommand.response_to(
                request, failed, f"the account {access_key} was not deleted: {exc}"
            )
        if not deleted:
            return RemotingCommand.response_to(
                request, failed, f"no ACL account has accessKey={access_key}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def update_global_white(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        failed = UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED
        if self.hook is None:
            return RemotingCommand.response_to(request, failed, ACL_OFF)
        listed = _split(request.ext_fields.get("globalWhiteAddrs"))
        if listed is None:  # an empty value clears the list; a missing one is a mistake
            return RemotingCommand.response_to(
                request, failed, "the request has no globalWhiteAddrs: name the patterns"
            )
        addresses = list(listed)
        path = request.ext_fields.get("aclFileFullPath") or None
        try:
            self.hook.update_global_white(addresses, path, by=channel.remote_address)
        except (AclConfigError, OSError) as exc:
            return RemotingCommand.response_to(
                request, failed, f"the global whitelist was not updated: {exc}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def version_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        if self.hook is None:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, ACL_OFF)
        rules = self.hook.rules
        every_file = {acl_file.path: _version(acl_file.data_version) for acl_file in rules.files}
        fields = {
            "version": json.dumps(_version(rules.data_version), separators=(",", ":")),
            "allAclFileVersion": json.dumps(every_file, separators=(",", ":")),
            "brokerName": self.broker_name,
            "brokerAddr": self.broker_address(),
            "clusterName": self.cluster_name,
        }
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=fields)
