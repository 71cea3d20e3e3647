"""ACL 1.0 accounts to ACL 2.0 users and ACLs, as RocketMQ's `AuthMigrator` does it.

Run by a 5.x broker at start when `migrateAuthFromV1Enabled` is true, for each account whose
access key is not yet a user:

- the user: username = accessKey, password = secretKey, `admin: true` gives a Super user
  (which passes every check, so an admin's own perms are dropped in effect), else Normal;
- the Custom policy: one entry per `topicPerms` item (`Topic:<name>`) then per `groupPerms`
  item (`Group:<name>`, a `%RETRY%` prefix stripped); an item that is not `name=PERM` is
  skipped;
- the Default policy: `defaultTopicPerm` as `Topic:*`, then `defaultGroupPerm` as `Group:*`,
  each only when set;
- a perm maps to actions PUB -> [Pub], SUB -> [Sub], PUB|SUB or SUB|PUB -> [Pub, Sub],
  anything else -> [All]; the decision is Deny exactly for `DENY`, else Allow (so a
  misspelt perm becomes Allow All, where ACL 1.0 read it as DENY);
- no entry has source IPs: neither `whiteRemoteAddress` nor `globalWhiteRemoteAddresses`
  carries over, and an account without any perms gets no ACL.

Pure: existing usernames arrive as an argument.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from pocketmq.acl.accounts import Account, AclRules
from pocketmq.acl.policies import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
)
from pocketmq.acl.users import User, UserType, new_user

_ACTIONS = {
    "PUB": (Action.PUB,),
    "SUB": (Action.SUB,),
    "PUB|SUB": (Action.PUB, Action.SUB),
    "SUB|PUB": (Action.PUB, Action.SUB),
}


def _entry(resource: Resource, perm: str) -> PolicyEntry:
    perm = perm.strip()
    decision = Decision.DENY if perm == "DENY" else Decision.ALLOW
    return PolicyEntry(resource, _ACTIONS.get(perm, (Action.ALL,)), (), decision)


def _perm_entries(items: Iterable[str], group: bool) -> list[PolicyEntry]:
    entries: list[PolicyEntry] = []
    for item in items:
        pieces = [p for p in item.split("=") if p]  # Java's StringUtils.split drops empties
        if len(pieces) != 2:
            continue
        name = pieces[0].strip()
        resource = Resource.group(name) if group else Resource.topic(name)
        entries.append(_entry(resource, pieces[1]))
    return entries


def migrated_user(account: Account) -> User:
    """The user of an account (validated and defaulted as createUser does)."""
    kind = UserType.SUPER if account.admin else UserType.NORMAL
    return new_user(User(account.access_key, account.secret_key, kind))


def migrated_acl(account: Account) -> Acl | None:
    """The ACL of an account, or None when it has no perms at all."""
    policies: list[Policy] = []
    custom = _perm_entries(account.topic_perms, False) + _perm_entries(account.group_perms, True)
    if custom:
        policies.append(Policy(PolicyType.CUSTOM, tuple(custom)))
    defaults: list[PolicyEntry] = []
    for perm, kind in (
        (account.default_topic_perm, ResourceType.TOPIC),
        (account.default_group_perm, ResourceType.GROUP),
    ):
        if perm is not None and perm.strip():
            defaults.append(_entry(Resource(kind, None, ResourcePattern.ANY), perm))
    if defaults:
        policies.append(Policy(PolicyType.DEFAULT, tuple(defaults)))
    if not policies:
        return None
    return Acl(User(account.access_key).subject, tuple(policies))


def migrate(rules: AclRules, existing_users: Container[str] = ()) -> list[tuple[User, Acl | None]]:
    """Users and ACLs to create for the accounts of `rules`, skipping existing usernames.

    Returns:
        (user, acl or None) per migrated account, in the rules' order; the caller creates
        the user first, then the ACL.
    """
    return [
        (migrated_user(account), migrated_acl(account))
        for account in rules.accounts.values()
        if account.access_key not in existing_users
    ]
