"""ACL 2.0 policies (RocketMQ 5.3+): resources, actions, entries, policies, ACLs, and the rules
of changing them.

An `Acl` belongs to one subject (`User:<name>`) and holds at most one `Custom` and one
`Default` policy; each policy is a list of entries keyed by resource. createAcl and updateAcl
behave alike (`AuthorizationMetadataManagerImpl`): a policy whose type the ACL lacks is added,
otherwise its entries are merged by resource: a new resource is appended, a known one has its
actions, source IPs and decision replaced (`Acl.updatePolicy`, `Policy.updateEntry`).
deleteAcl with a resource drops that entry from one policy (Custom unless named), a policy
left empty, and the whole ACL when no policy is left.

A resource key is `*` (anything), or `Type:Name` with Type one of Any, Cluster, Namespace,
Topic, Group (any case), Name literal, `prefix*`, or `*`. The admin wire shape is `AclInfo`
(`remoting/.../protocol/body/AclInfo.java`): `{"policies": [{"entries": [{"actions": [...],
"decision": "Allow", "resource": "Topic:a", "sourceIps": [...]}], "policyType": "Custom"}],
"subject": "User:u"}`, nulls left out, keys in fastjson's alphabetical order.

Source IPs are single addresses (matched as equal strings) or CIDR blocks
(`IPAddressUtils.isIPInRange`): not ACL 1.0's `AddressPattern` forms.

Pure: no I/O; every value is immutable and a change returns a new one.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import Enum, StrEnum
from typing import Self

from pocketmq.acl.users import SUBJECT_PREFIX, AuthError
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX


class _Named(StrEnum):
    """An enum whose value is RocketMQ's name; `named` reads it in any case."""

    @classmethod
    def named(cls, name: object) -> Self | None:
        if not isinstance(name, str):
            return None
        return next((m for m in cls if m.lower() == name.lower()), None)


class ResourceType(_Named):
    UNKNOWN = "Unknown"
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class Action(_Named):
    """`common/action/Action.java`; `code` is the byte RocketMQ stores."""

    UNKNOWN = "Unknown"
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"

    @property
    def code(self) -> int:
        return list(Action).index(self)


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


class ResourcePattern(Enum):
    ANY = 1
    LITERAL = 2
    PREFIXED = 3


@dataclass(frozen=True, slots=True)
class Resource:
    """What an entry guards, or what a request touches (then always LITERAL)."""

    type: ResourceType
    name: str | None
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def parse(cls, key: str | None) -> Resource | None:
        """The resource of a key (`Resource.of(String)`); None for blank or an unknown type."""
        if key is None or not key.strip():
            return None
        if key == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        type_name, _, name = key.partition(":")
        kind = ResourceType.named(type_name)
        if kind is None:
            return None
        if name == "*":
            return cls(kind, None, ResourcePattern.ANY)
        if name.endswith("*"):
            # RocketMQ keeps what precedes the first `*` as the prefix.
            return cls(kind, name.partition("*")[0], ResourcePattern.PREFIXED)
        return cls(kind, name, ResourcePattern.LITERAL)

    @classmethod
    def topic(cls, name: str | None) -> Resource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str | None) -> Resource:
        """A group; a `%RETRY%<group>` name means the group itself (`Resource.ofGroup`)."""
        if name and name.strip() and name.startswith(RETRY_GROUP_TOPIC_PREFIX):
            name = name[len(RETRY_GROUP_TOPIC_PREFIX) :]
        return cls(ResourceType.GROUP, name)

    @classmethod
    def cluster(cls, name: str | None) -> Resource:
        return cls(ResourceType.CLUSTER, name)

    @property
    def key(self) -> str:
        """`Type:Name`, `Type:prefix*`, `Type:*` or `*`; Java prints a missing name as null."""
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type}:*"
        name = "null" if self.name is None else self.name
        return f"{self.type}:{name}" + ("*" if self.pattern is ResourcePattern.PREFIXED else "")

    def matches(self, requested: Resource) -> bool:
        """Whether this (an entry's) resource covers `requested`."""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not requested.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return requested.name == self.name
        return (
            requested.name is not None
            and self.name is not None
            and requested.name.startswith(self.name)
        )


def valid_source_ip(text: str) -> bool:
    """An IPv4/IPv6 address or CIDR block (`IPAddressUtils.isValidIPOrCidr`)."""
    address, slash, prefix = text.partition("/")
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return False
    if not slash:
        return True
    return prefix.isdigit() and int(prefix) <= parsed.max_prefixlen


def source_ip_matches(source_ip: str, allowed: str) -> bool:
    """RocketMQ compares a single address as a string and a CIDR block by value."""
    if "/" not in allowed:
        return source_ip == allowed
    try:
        network = ipaddress.ip_network(allowed, strict=False)
        return ipaddress.ip_address(source_ip) in network
    except ValueError:
        return False  # RocketMQ throws here, which refuses the request all the same


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    source_ips: tuple[str, ...] = ()
    decision: Decision = Decision.ALLOW

    def matches_actions(self, requested: Iterable[Action]) -> bool:
        """A request asking `Any` matches every entry with actions; otherwise one requested
        action must be listed, or the entry lists `All`."""
        if not self.actions:
            return False
        wanted = tuple(requested)
        if Action.ANY in wanted:
            return True
        return Action.ALL in self.actions or any(a in self.actions for a in wanted)

    def matches_source_ip(self, source_ip: str | None) -> bool:
        if not self.source_ips:
            return True
        return bool(source_ip) and any(
            source_ip_matches(source_ip or "", s) for s in self.source_ips
        )

    def to_info(self) -> dict[str, object]:
        info: dict[str, object] = {}
        if self.actions:
            info["actions"] = [str(a) for a in self.actions]
        info["decision"] = str(self.decision)
        info["resource"] = self.resource.key
        if self.source_ips:
            info["sourceIps"] = list(self.source_ips)
        return info


@dataclass(frozen=True, slots=True)
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def with_entries(self, entries: Iterable[PolicyEntry]) -> Policy:
        """Entries merged by resource (`Policy.updateEntry`): known ones replaced in place."""
        merged = list(self.entries)
        for new in entries:
            at = next((i for i, e in enumerate(merged) if e.resource == new.resource), None)
            if at is None:
                merged.append(new)
            else:
                merged[at] = new
        return replace(self, entries=tuple(merged))

    def without_entry(self, resource: Resource) -> Policy:
        """The first entry of `resource` removed (`Policy.deleteEntry`)."""
        at = next((i for i, e in enumerate(self.entries) if e.resource == resource), None)
        if at is None:
            return self
        return replace(self, entries=self.entries[:at] + self.entries[at + 1 :])

    def to_info(self) -> dict[str, object]:
        return {"entries": [e.to_info() for e in self.entries], "policyType": str(self.policy_type)}


@dataclass(frozen=True, slots=True)
class Acl:
    subject: str
    policies: tuple[Policy, ...]

    def policy(self, policy_type: PolicyType) -> Policy | None:
        """The first policy of that type, the only one RocketMQ consults."""
        return next((p for p in self.policies if p.policy_type is policy_type), None)

    def updated(self, policies: Iterable[Policy]) -> Acl:
        """This ACL after createAcl/updateAcl of `policies` (`Acl.updatePolicy`)."""
        result = list(self.policies)
        for new in policies:
            at = next((i for i, p in enumerate(result) if p.policy_type is new.policy_type), None)
            if at is None:
                result.append(new)
            else:
                result[at] = result[at].with_entries(new.entries)
        return replace(self, policies=tuple(result))

    def without_entry(
        self, resource: Resource, policy_type: PolicyType | None = None
    ) -> Acl | None:
        """This ACL after deleteAcl of one resource; None when no policy is left (RocketMQ
        then deletes the ACL)."""
        kind = policy_type or PolicyType.CUSTOM
        at = next((i for i, p in enumerate(self.policies) if p.policy_type is kind), None)
        if at is None:
            return self if self.policies else None
        policy = self.policies[at].without_entry(resource)
        kept = list(self.policies)
        if policy.entries:
            kept[at] = policy
        else:
            del kept[at]
        return replace(self, policies=tuple(kept)) if kept else None

    def to_info(self) -> dict[str, object]:
        """The `AclInfo` JSON object."""
        info: dict[str, object] = {}
        if self.policies:
            info["policies"] = [p.to_info() for p in self.policies]
        info["subject"] = self.subject
        return info


def _entry_from_info(raw: object) -> PolicyEntry:
    if not isinstance(raw, Mapping):
        raise AuthError("The policy entries is empty.")
    resource = Resource.parse(_text(raw.get("resource")))
    if resource is None:
        raise AuthError("The resource is null.")
    # The broker's converter drops action names it does not know.
    actions = tuple(a for a in map(Action.named, _list(raw.get("actions"))) if a is not None)
    if not actions:
        raise AuthError("The actions is empty.")
    if Action.ANY in actions:
        raise AuthError("The actions can not be Any.")
    source_ips = tuple(str(s) for s in _list(raw.get("sourceIps")))
    for source_ip in source_ips:
        if not source_ip.strip():
            raise AuthError("The source ip is empty.")
        if not valid_source_ip(source_ip):
            raise AuthError("The source ip is invalid.")
    decision = Decision.named(raw.get("decision"))
    if decision is None:
        raise AuthError("The decision is null or illegal.")
    return PolicyEntry(resource, actions, source_ips, decision)


def acl_from_info(info: Mapping[str, object], subject: str | None = None) -> Acl:
    """An ACL from an `AclInfo` object, checked as createAcl/updateAcl check it.

    Args:
        info: The decoded request body.
        subject: The request header's `subject`, used when the body names none.

    Raises:
        AuthError: With RocketMQ's remark (`The policies is empty.` ...).
    """
    body_subject = _text(info.get("subject"))
    chosen = body_subject if parse_subject(body_subject) else subject
    if not parse_subject(chosen):
        raise AuthError("The subject type is null.")
    raw_policies = _list(info.get("policies"))
    if not raw_policies:
        raise AuthError("The body of acl is null")
    policies: list[Policy] = []
    for raw in raw_policies:
        if not isinstance(raw, Mapping) or not _list(raw.get("entries")):
            continue  # the converter skips a policy without entries
        kind = PolicyType.named(raw.get("policyType"))
        entries = tuple(_entry_from_info(e) for e in _list(raw.get("entries")))
        policies.append(Policy(kind or PolicyType.CUSTOM, entries))
    if not policies:
        raise AuthError("The policies is empty.")
    return Acl(chosen or "", tuple(policies))


def parse_subject(key: str | None) -> str | None:
    """The username of a `User:<name>` subject key (type in any case), else None."""
    if key is None:
        return None
    kind, colon, name = key.partition(":")
    if not colon or kind.lower() != SUBJECT_PREFIX[:-1].lower():
        return None
    return name


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list) else []
