"""The broker's ACL 2.0 admin requests (RocketMQ 5.3+'s `AdminBrokerProcessor`): users
(AUTH_CREATE_USER 3001 ... AUTH_LIST_USER 3005) and ACLs (AUTH_CREATE_ACL 3006 ...
AUTH_LIST_ACL 3010), with RocketMQ's headers, JSON bodies (`UserInfo`, `AclInfo`), answers and
remarks. Who may call them is the authorization's business (Update or Get on the cluster); on
top of it only a Super user may create, change or delete a Super user.

Every change is one line on the `pocketmq.audit` log, naming who made it and never a password.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from pocketmq.acl.auth_hook import AuthHook
from pocketmq.acl.policies import PolicyType, acl_from_info
from pocketmq.acl.users import AuthError, User, UserType
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler

audit = logging.getLogger("pocketmq.audit")

Handler = Callable[[RemotingCommand], RemotingCommand]


def _json(document: Any) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def _body(request: RemotingCommand) -> dict[str, Any]:
    try:
        document = json.loads(request.body or b"{}")
    except ValueError:
        raise AuthError("The body is not JSON") from None
    if not isinstance(document, dict):
        raise AuthError("The body is not a JSON object")
    return document


class AuthAdminHandlers:
    """Answers the ACL 2.0 admin codes for one broker."""

    def __init__(self, hook: AuthHook) -> None:
        self.hook = hook
        self.store = hook.store

    def routes(self) -> dict[int, RequestHandler]:
        table: dict[int, Handler] = {
            RequestCode.AUTH_CREATE_USER: self._create_user,
            RequestCode.AUTH_UPDATE_USER: self._update_user,
            RequestCode.AUTH_DELETE_USER: self._delete_user,
            RequestCode.AUTH_GET_USER: self._get_user,
            RequestCode.AUTH_LIST_USER: self._list_users,
            RequestCode.AUTH_CREATE_ACL: self._put_acl,
            RequestCode.AUTH_UPDATE_ACL: self._put_acl,
            RequestCode.AUTH_DELETE_ACL: self._delete_acl,
            RequestCode.AUTH_GET_ACL: self._get_acl,
            RequestCode.AUTH_LIST_ACL: self._list_acls,
        }
        return {code: self._answering(handler) for code, handler in table.items()}

    def _answering(self, handler: Handler) -> RequestHandler:
        async def answer(request: RemotingCommand, channel: Channel) -> RemotingCommand:
            try:
                response = handler(request)
            except AuthError as exc:
                return RemotingCommand.response_to(request, ResponseCode.NO_PERMISSION, str(exc))
            except OSError as exc:
                return RemotingCommand.response_to(
                    request, ResponseCode.SYSTEM_ERROR, f"the users and ACLs file: {exc}"
                )
            if response.code == ResponseCode.SUCCESS and request.code in _CHANGES:
                caller = request.ext_fields.get("AccessKey") or "-"
                audit.info(
                    "%s %s by accessKey=%s from %s",
                    _CHANGES[request.code],
                    request.ext_fields.get("username") or request.ext_fields.get("subject"),
                    caller,
                    channel.remote_ip,
                )
            return response

        return answer

    def _super_only(self, request: RemotingCommand, user: User | None, verb: str) -> None:
        if user is not None and user.is_super:
            caller = self.hook.caller(request)
            if caller is None or not caller.is_super:
                raise _SystemError(f"The super user can only be {verb} by super user")

    # -- users ---------------------------------------------------------------------------------
    def _user_of(self, request: RemotingCommand) -> User:
        username = request.ext_fields.get("username", "")
        if not username.strip():
            raise _Invalid("The username is blank")
        return User.from_info(_body(request), username=username)

    def _create_user(self, request: RemotingCommand) -> RemotingCommand:
        try:
            user = self._user_of(request)
            if user.user_type is None:
                user = User(user.username, user.password, UserType.NORMAL, user.user_status)
            self._super_only(request, user, "create")
        except _Answer as answer:
            return answer.to(request)
        self.store.create_user(user)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _update_user(self, request: RemotingCommand) -> RemotingCommand:
        try:
            change = self._user_of(request)
            self._super_only(request, self.store.users.get(change.username), "update")
            self._super_only(request, change, "update")
        except _Answer as answer:
            return answer.to(request)
        self.store.update_user(change)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _delete_user(self, request: RemotingCommand) -> RemotingCommand:
        username = request.ext_fields.get("username", "")
        if not username.strip():
            raise AuthError("username can not be blank")
        try:
            self._super_only(request, self.store.users.get(username), "delete")
        except _Answer as answer:
            return answer.to(request)
        self.store.delete_user(username)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _get_user(self, request: RemotingCommand) -> RemotingCommand:
        username = request.ext_fields.get("username", "")
        if not username.strip():
            return _Invalid("The username is blank").to(request)
        user = self.store.users.get(username)
        body = _json(user.to_info()) if user is not None else b""
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    def _list_users(self, request: RemotingCommand) -> RemotingCommand:
        users = self.store.list_users(request.ext_fields.get("filter"))
        body = _json([user.to_info() for user in users]) if users else b""
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    # -- ACLs ----------------------------------------------------------------------------------
    def _put_acl(self, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return _SystemError("The body of acl is null").to(request)
        acl = acl_from_info(_body(request), subject=request.ext_fields.get("subject"))
        self.store.put_acl(acl)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _delete_acl(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        policy_type = PolicyType.named(fields.get("policyType"))
        self.store.delete_acl(fields.get("subject", ""), policy_type, fields.get("resource"))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def _get_acl(self, request: RemotingCommand) -> RemotingCommand:
        subject = request.ext_fields.get("subject", "")
        if not subject.strip():
            raise AuthError("The subject is null.")
        acl = self.store.acls.get(subject)
        body = _json(acl.to_info()) if acl is not None else b""
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    def _list_acls(self, request: RemotingCommand) -> RemotingCommand:
        fields = request.ext_fields
        acls = self.store.list_acls(fields.get("subjectFilter"), fields.get("resourceFilter"))
        body = _json([acl.to_info() for acl in acls]) if acls else b""
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)


_CHANGES: dict[int, str] = {
    RequestCode.AUTH_CREATE_USER: "ACL 2.0 user created:",
    RequestCode.AUTH_UPDATE_USER: "ACL 2.0 user updated:",
    RequestCode.AUTH_DELETE_USER: "ACL 2.0 user deleted:",
    RequestCode.AUTH_CREATE_ACL: "ACL 2.0 ACL created for",
    RequestCode.AUTH_UPDATE_ACL: "ACL 2.0 ACL updated for",
    RequestCode.AUTH_DELETE_ACL: "ACL 2.0 ACL deleted for",
}


class _Answer(Exception):
    code: int = ResponseCode.SYSTEM_ERROR

    def to(self, request: RemotingCommand) -> RemotingCommand:
        return RemotingCommand.response_to(request, self.code, str(self))


class _Invalid(_Answer):
    code = ResponseCode.INVALID_PARAMETER


class _SystemError(_Answer):
    code = ResponseCode.SYSTEM_ERROR
