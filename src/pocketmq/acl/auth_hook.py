"""ACL 2.0 in front of a remoting server (RocketMQ 5.3+'s `authenticationEnabled` and
`authorizationEnabled`): the users and ACLs (`auth_store`), the check of each request, and the
audit log.

Authentication, when on: the `AccessKey` names a user, the `Signature` is ACL 1.0's with the
user's password as the secret; a missing, unknown or disabled user or a bad signature is
refused. Authorization, when on: each resource the request names (`request_actions`) must be
allowed by the user's ACL (a Super user may do everything). Request codes in
`authenticationWhitelist` / `authorizationWhitelist` skip the step. A refusal answers
NO_PERMISSION (16) with RocketMQ's remark and writes one line to `pocketmq.audit`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pocketmq.acl.auth_store import AuthStore
from pocketmq.acl.authorization import authenticate, authorize_all, parse_whitelist
from pocketmq.acl.request_actions import PARSE_ERROR_REMARK, RequestParseError, requested
from pocketmq.acl.signing import ACCESS_KEY
from pocketmq.acl.users import SUBJECT_PREFIX, User, UserType, initial_users
from pocketmq.acl.validator import Refusal
from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel

audit = logging.getLogger("pocketmq.audit")


@dataclass(frozen=True, slots=True)
class AuthSettings:
    """RocketMQ's `AuthConfig` keys, as a broker's file gives them."""

    authentication: bool
    authorization: bool
    cluster_name: str
    authentication_whitelist: str = ""
    authorization_whitelist: str = ""
    init_user: str = ""
    inner_credentials: str = ""


class AuthHook:
    """The users and ACLs a server checks requests against, and its request guard."""

    def __init__(self, settings: AuthSettings, store_path: Path) -> None:
        """Loads the users and ACLs and creates the initial Super users.

        Raises:
            AuthError: the file or the initial users' settings cannot be used.
        """
        self.settings = settings
        self.store = AuthStore(store_path)
        self.inner_users: dict[str, User] = {}
        self._skip_authentication = parse_whitelist(settings.authentication_whitelist)
        self._skip_authorization = parse_whitelist(settings.authorization_whitelist)
        created = self.store.ensure_users(
            initial_users(settings.init_user, settings.inner_credentials)
        )
        audit.info(
            "ACL 2.0 on (authentication %s, authorization %s): %d users, %d ACLs%s",
            "on" if settings.authentication else "off",
            "on" if settings.authorization else "off",
            len(self.store.users),
            len(self.store.acls),
            f"; created {', '.join(created)}" if created else "",
        )

    def user_of(self, access_key: str | None) -> User | None:
        if not access_key:
            return None
        return self.store.users.get(access_key) or self.inner_users.get(access_key)

    def allow_inner(self, access_key: str, secret_key: str) -> None:
        """Lets another part of this process (a local proxy) in as a Super user that lives in
        memory only."""
        self.inner_users[access_key] = User(access_key, secret_key, UserType.SUPER)

    def check(self, request: RemotingCommand, remote_ip: str) -> Refusal | None:
        """None to let `request` through, else why not."""
        code = str(request.code)
        access_key = request.ext_fields.get(ACCESS_KEY)
        user = self.user_of(access_key)
        if self.settings.authentication and code not in self._skip_authentication:
            refusal = authenticate(user, request.ext_fields, request.body, version=request.version)
            if refusal is not None:
                return refusal
        if self.settings.authorization and code not in self._skip_authorization:
            try:
                asked = requested(
                    request.code,
                    request.ext_fields,
                    request.body,
                    cluster_name=self.settings.cluster_name,
                )
            except RequestParseError:
                return Refusal(int(ResponseCode.NO_PERMISSION), PARSE_ERROR_REMARK, "request")
            if asked:
                acl = self.store.acls.get(SUBJECT_PREFIX + access_key) if access_key else None
                return authorize_all(access_key, user, acl, asked, remote_ip)
        return None

    def guard(self, request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        refusal = self.check(request, channel.remote_ip)
        if refusal is None:
            return None
        audit.warning(
            "refused request code=%d from %s accessKey=%s rule=%s: %s",
            request.code,
            channel.remote_ip,
            request.ext_fields.get(ACCESS_KEY) or "-",
            refusal.rule,
            refusal.remark,
        )
        return RemotingCommand.response_to(request, refusal.code, refusal.remark)

    def caller(self, request: RemotingCommand) -> User | None:
        """The signed-in user of an admin request (whose rights the handlers check)."""
        return self.user_of(request.ext_fields.get(ACCESS_KEY))

    @property
    def checking(self) -> bool:
        return self.settings.authentication or self.settings.authorization
