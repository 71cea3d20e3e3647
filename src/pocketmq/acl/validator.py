"""The ACL 1.0 decision: may this request from this address go on (`PlainPermissionManager`)?

The checks run in RocketMQ 4.9.8's order, the first that decides wins:

0. classify the request (`resources.needed_perms`); a malformed one is refused;
1. the peer is in a `globalWhiteRemoteAddresses` pattern: allowed;
2. no `AccessKey` (or an empty one, as the C++ client may send): refused;
   an `AccessKey` no account has: refused;
3. the peer is in the account's `whiteRemoteAddress`: allowed, no signature needed;
4. wrong `Signature`: refused;
5. the request publishes to `RMQ_SYS_TRACE_TOPIC`: allowed (message trace);
6. an admin-only code from a non-admin account: refused;
7. an admin account with no topicPerms/groupPerms at all: allowed;
8. each resource: its explicit perm, else the account's default topic / group perm; a perm
   holding DENY refuses, a needed ANY is met by PUB or SUB.

4.9.8 signals a refusal by throwing from its RPC hook; the request task's catch-all answers
SYSTEM_ERROR (1) with the exception's text (`NettyRemotingAbstract.processRequestCommand`),
so `Refusal.code` is SYSTEM_ERROR and `Refusal.remark` starts with the Java exception class
name as `RemotingHelper.exceptionSimpleDesc` prints it. The rest of the remark is pocketmq's
wording; it names the rule, the access key, the resource and the missing perm, never a secret.

Pure: no I/O, no clock. `rules` may be swapped at any time (one attribute assignment).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pocketmq.acl.accounts import PUB, Account, AclRules, check_perm, perm_name
from pocketmq.acl.resources import ADMIN_ONLY_CODES, AclRequestError, ResourcePerm, needed_perms
from pocketmq.acl.signing import ACCESS_KEY, verify
from pocketmq.common.codes import ResponseCode
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX, TRACE_TOPIC

_EXCEPTION_PREFIX = "org.apache.rocketmq.acl.common.AclException: "


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a request was refused: the response code to answer and its remark."""

    code: int
    remark: str
    rule: str
    """Which check refused: `request`, `access-key`, `signature`, `admin`, `permission`."""


def _refuse(rule: str, text: str) -> Refusal:
    return Refusal(int(ResponseCode.SYSTEM_ERROR), _EXCEPTION_PREFIX + text, rule)


def _describe(resource: str) -> str:
    # RocketMQ prints `group:<name>` for a retry resource and `topic:<name>` otherwise.
    if resource.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "group:" + resource[len(RETRY_GROUP_TOPIC_PREFIX) :]
    return "topic:" + resource


class AclValidator:
    """Decides requests against `rules`; see the module docstring for the order of checks."""

    def __init__(
        self,
        rules: AclRules,
        *,
        admin_only_codes: frozenset[int] = ADMIN_ONLY_CODES,
        unique_key_query_signed: bool = False,
    ) -> None:
        """
        Args:
            rules: The loaded rules; assign `validator.rules` to swap them after a reload.
            admin_only_codes: Codes only admin accounts may send.
            unique_key_query_signed: See `signing.verify` (False is RocketMQ 4.9.8).
        """
        self.rules = rules
        self.inner_accounts: dict[str, Account] = {}
        """Accounts of the cluster's own parts (a local proxy's hop to its broker), kept in
        memory only, never in a file."""
        self._admin_only_codes = admin_only_codes
        self._unique_key_query_signed = unique_key_query_signed

    def check(
        self, code: int, ext_fields: Mapping[str, str], body: bytes | None, remote_ip: str
    ) -> Refusal | None:
        """Runs the checks on one request.

        Args:
            code: The request code.
            ext_fields: The request's ext fields as received.
            body: The request body, or None.
            remote_ip: The peer's IP address, without port.

        Returns:
            None to let the request through; else a Refusal, which the caller sends back as
            the response (code and remark) instead of running the handler.
        """
        try:
            needed = needed_perms(code, ext_fields, body)
        except AclRequestError as exc:
            return _refuse("request", f"cannot check request code={code}: {exc}")
        unique_key_query_signed = self._unique_key_query_signed

        def signed(secret_key: str) -> bool:
            return verify(
                ext_fields, body, secret_key, unique_key_query_signed=unique_key_query_signed
            )

        return self.check_needs(code, needed, ext_fields.get(ACCESS_KEY), remote_ip, signed)

    def check_needs(
        self,
        code: int,
        needed: tuple[ResourcePerm, ...],
        access_key: str | None,
        remote_ip: str,
        signed: Callable[[str], bool],
    ) -> Refusal | None:
        """The checks from the whitelists on, for a request whose resources are known and
        whose signature `signed(secret_key)` verifies (the proxy's gRPC requests: their own
        signature scheme, and messages rather than ext fields)."""
        rules = self.rules  # one read: a concurrent swap cannot mix two rule sets
        if any(pattern.matches(remote_ip) for pattern in rules.global_white):
            return None
        if not access_key:
            return _refuse("access-key", "the request carries no AccessKey")
        account = rules.accounts.get(access_key) or self.inner_accounts.get(access_key)
        if account is None:
            return _refuse("access-key", f"no ACL account has accessKey={access_key}")
        if account.white_pattern.matches(remote_ip):
            return None
        if not signed(account.secret_key):
            return _refuse("signature", f"signature mismatch for accessKey={access_key}")
        if any(n.resource == TRACE_TOPIC and n.perm == PUB for n in needed):
            return None
        return self._check_perms(code, account, needed)

    def _check_perms(
        self, code: int, account: Account, needed: tuple[ResourcePerm, ...]
    ) -> Refusal | None:
        if code in self._admin_only_codes and not account.admin:
            return _refuse(
                "admin",
                f"request code={code} is for admin accounts; accessKey={account.access_key} "
                "is not one",
            )
        if account.admin and not account.has_resource_perms:
            return None
        for resource, perm in needed:
            owned = account.resource_perms.get(resource)
            if owned is None:
                is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
                owned = account.default_group_bits if is_group else account.default_topic_bits
            if not check_perm(perm, owned):
                return _refuse(
                    "permission",
                    f"accessKey={account.access_key} lacks {perm_name(perm)} on "
                    f"{_describe(resource)} (has {perm_name(owned)})",
                )
        return None
