"""The ACL 2.0 decisions (RocketMQ 5.3+): is this signed request from a known, enabled user
(authentication), and may its user do what it asks (authorization)?

Authentication (`DefaultAuthenticationHandler`): the request's `AccessKey` names the user, the
`Signature` is ACL 1.0's (`signing.verify`, the user's password as secret key); no access key,
an unknown user, a disabled user or a bad signature is refused.

Authorization runs once per requested resource, the first refusal wins
(`UserAuthorizationHandler`, then `AclAuthorizationHandler`):

1. no subject (no `AccessKey`): refused; an unknown user: refused; a Super user: allowed;
2. no ACL: refused; else the entries of the Custom policy that match the resource, one of the
   actions and the source IP; when none does, those of the Default policy; none: refused;
3. the most specific match decides: any resource type after a named type; within a type a
   literal name, then the longest prefix, then `Type:*`. At equal specificity RocketMQ's
   comparator puts Allow before Deny (its comment says the opposite; the code is followed,
   and only duplicate resources in one policy can reach that tie);
4. Deny refuses, Allow allows.

The broker answers a refusal with NO_PERMISSION (16) and the exception text as remark
(`AuthenticationPipeline`, `AuthorizationPipeline`); those texts are `REMARK_*` below and are
what a client sees. A user's status is not checked here: RocketMQ's check reads the status of
the request's subject, which is never set, so only authentication refuses a disabled user.

Pure: users and ACLs arrive as arguments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from pocketmq.acl.policies import (
    Acl,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
)
from pocketmq.acl.signing import ACCESS_KEY, SIGNATURE, verify
from pocketmq.acl.users import SUBJECT_PREFIX, User
from pocketmq.acl.validator import Refusal
from pocketmq.common.codes import ResponseCode

REMARK_FAILED: Final = "Authorization failed. Please verify your access rights and try again."
"""What RocketMQ answers when the check itself breaks (e.g. a request without a subject)."""
REMARK_NO_MATCH: Final = "no matched policies."
REMARK_DENIED: Final = "the decision is deny."


def _refuse(rule: str, remark: str) -> Refusal:
    return Refusal(int(ResponseCode.NO_PERMISSION), remark, rule)


def parse_whitelist(text: str | None) -> frozenset[str]:
    """`authenticationWhitelist` / `authorizationWhitelist`: comma-separated request codes
    (as decimal strings, e.g. `"10,11"`) that skip the check."""
    return frozenset(p.strip() for p in (text or "").split(",") if p.strip())


def authenticate(
    user: User | None, ext_fields: Mapping[str, str], body: bytes | None, *, version: int = 0
) -> Refusal | None:
    """Authenticates one remoting request.

    Args:
        user: The user named by the request's `AccessKey`, None when there is none.
        ext_fields: The request's ext fields as received.
        body: The request body, or None.
        version: The request's version; up to V4_9_3 (399) `_UNIQUE_KEY_QUERY` is not signed.

    Returns:
        None when authenticated, else the Refusal to answer.
    """
    username = ext_fields.get(ACCESS_KEY)
    if not username:
        return _refuse("access-key", "username cannot be null.")
    if user is None:
        return _refuse("user", f"User:{username} is not found.")
    if user.is_disabled:
        return _refuse("user", f"User:{username} is disabled.")
    signed = ext_fields.get(SIGNATURE) is not None and verify(
        ext_fields, body, user.password or "", unique_key_query_signed=version > 399
    )
    if not signed:
        return _refuse("signature", "check signature failed.")
    return None


def _rank(entry: PolicyEntry) -> tuple[int, int, int, int]:
    resource = entry.resource
    pattern_order = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1}
    return (
        1 if resource.type is ResourceType.ANY else 0,
        pattern_order.get(resource.pattern, 2),
        # A longer prefix is more specific.
        -len(resource.name or "") if resource.pattern is ResourcePattern.PREFIXED else 0,
        1 if entry.decision is Decision.DENY else 0,
    )


def _matching(
    entries: Iterable[PolicyEntry], resource: Resource, actions: Sequence[Action], ip: str | None
) -> list[PolicyEntry]:
    return [
        e
        for e in entries
        if e.resource.matches(resource) and e.matches_actions(actions) and e.matches_source_ip(ip)
    ]


def deciding_entry(
    acl: Acl, resource: Resource, actions: Sequence[Action], source_ip: str | None
) -> PolicyEntry | None:
    """The entry that decides a request for `resource`, or None when none matches."""
    matched: list[PolicyEntry] = []
    for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(policy_type)
        if policy is not None:
            matched = _matching(policy.entries, resource, actions, source_ip)
        if matched:
            break
    return min(matched, key=_rank) if matched else None


def authorize(
    subject: str | None,
    user: User | None,
    acl: Acl | None,
    resource: Resource,
    actions: Sequence[Action],
    source_ip: str | None,
) -> Refusal | None:
    """Authorizes one requested resource.

    Args:
        subject: The request's subject key (`User:<AccessKey>`), None without an AccessKey.
        user: The stored user of that subject, None if unknown.
        acl: The stored ACL of that subject, None if it has none.
        resource: The requested resource (see `request_actions.requested`).
        actions: The actions asked on it; one allowed action suffices.
        source_ip: The peer's address without port.

    Returns:
        None to go on, else the Refusal (NO_PERMISSION) the caller answers with.
    """
    if subject is None:
        return _refuse("subject", REMARK_FAILED)
    if user is None:
        return _refuse("user", f"{subject} not found.")
    if user.is_super:
        return None

    def refuse(detail: str) -> Refusal:
        where = "null" if source_ip is None else source_ip
        text = f"{subject} has no permission to access {resource.key} from {where}, {detail}"
        return _refuse("acl", text)

    if acl is None:
        return refuse(REMARK_NO_MATCH)
    entry = deciding_entry(acl, resource, actions, source_ip)
    if entry is None:
        return refuse(REMARK_NO_MATCH)
    if entry.decision is Decision.DENY:
        return refuse(REMARK_DENIED)
    return None


def authorize_all(
    username: str | None,
    user: User | None,
    acl: Acl | None,
    requested: Iterable[tuple[Resource, tuple[Action, ...]]],
    source_ip: str | None,
) -> Refusal | None:
    """`authorize` for each requested resource in order; the first refusal, or None."""
    subject = None if username is None else SUBJECT_PREFIX + username
    for resource, actions in requested:
        refusal = authorize(subject, user, acl, resource, actions, source_ip)
        if refusal is not None:
            return refusal
    return None
