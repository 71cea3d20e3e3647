"""The admin client's ACL 2.0 calls (RocketMQ 5.3's `DefaultMQAdminExt` user and ACL methods):
users (AUTH_CREATE_USER ... AUTH_LIST_USER) and ACLs (AUTH_CREATE_ACL ... AUTH_LIST_ACL) of
one broker, with RocketMQ's `UserInfo` and `AclInfo` JSON bodies."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pocketmq.client.admin.lookups import AdminLookups
from pocketmq.common.codes import RequestCode


def acl_info(
    subject: str,
    resources: Sequence[str],
    actions: Sequence[str],
    source_ips: Sequence[str] | None,
    decision: str | None,
) -> dict[str, Any]:
    """The `AclInfo` mqadmin's createAcl/updateAcl send: one policy, an entry per resource."""
    entry: dict[str, Any] = {"actions": list(actions), "decision": decision}
    if source_ips:
        entry["sourceIps"] = list(source_ips)
    return {
        "subject": subject,
        "policies": [{"entries": [{**entry, "resource": r} for r in resources]}],
    }


class AuthAdmin(AdminLookups):
    async def _auth(
        self, address: str, code: int, fields: Mapping[str, str], body: Any, what: str
    ) -> Any:
        payload = b"" if body is None else json.dumps(body).encode()
        response = await self._broker_ok(address, code, fields, payload, what=what)
        return json.loads(response.body) if response.body else None

    async def create_user(self, address: str, user: Mapping[str, str]) -> None:
        """`user`: `UserInfo` (username, password, userType, userStatus). Raises AdminError."""
        fields = {"username": user["username"]}
        await self._auth(address, RequestCode.AUTH_CREATE_USER, fields, user, "user creation")

    async def update_user(self, address: str, user: Mapping[str, str]) -> None:
        fields = {"username": user["username"]}
        await self._auth(address, RequestCode.AUTH_UPDATE_USER, fields, user, "user update")

    async def delete_user(self, address: str, username: str) -> None:
        fields = {"username": username}
        await self._auth(address, RequestCode.AUTH_DELETE_USER, fields, None, "user deletion")

    async def get_user(self, address: str, username: str) -> dict[str, Any] | None:
        fields = {"username": username}
        found: dict[str, Any] | None = await self._auth(
            address, RequestCode.AUTH_GET_USER, fields, None, "user lookup"
        )
        return found

    async def list_users(self, address: str, name_filter: str = "") -> list[dict[str, Any]]:
        fields = {"filter": name_filter} if name_filter else {}
        found = await self._auth(address, RequestCode.AUTH_LIST_USER, fields, None, "user list")
        return list(found or [])

    async def put_acl(self, address: str, acl: Mapping[str, Any], *, create: bool) -> None:
        """createAcl (or updateAcl) of an `AclInfo`; both merge into the subject's ACL."""
        code = RequestCode.AUTH_CREATE_ACL if create else RequestCode.AUTH_UPDATE_ACL
        await self._auth(address, code, {"subject": acl["subject"]}, acl, "ACL change")

    async def delete_acl(
        self, address: str, subject: str, resource: str | None = None, policy_type: str = ""
    ) -> None:
        fields = {"subject": subject}
        if resource:
            fields["resource"] = resource
        if policy_type:
            fields["policyType"] = policy_type
        await self._auth(address, RequestCode.AUTH_DELETE_ACL, fields, None, "ACL deletion")

    async def get_acl(self, address: str, subject: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self._auth(
            address, RequestCode.AUTH_GET_ACL, {"subject": subject}, None, "ACL lookup"
        )
        return found

    async def list_acls(
        self, address: str, subject_filter: str = "", resource_filter: str = ""
    ) -> list[dict[str, Any]]:
        fields = {}
        if subject_filter:
            fields["subjectFilter"] = subject_filter
        if resource_filter:
            fields["resourceFilter"] = resource_filter
        found = await self._auth(address, RequestCode.AUTH_LIST_ACL, fields, None, "ACL list")
        return list(found or [])
