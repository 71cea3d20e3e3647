"""ACL 2.0 policies: resource keys, `AclInfo` JSON, and create/update/delete merging."""

import json

import pytest

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
    acl_from_info,
    source_ip_matches,
)
from pocketmq.acl.users import AuthError

ACL_JSON = (
    '{"policies":[{"entries":[{"actions":["Pub","Sub"],"decision":"Allow",'
    '"resource":"Topic:orders*","sourceIps":["10.0.0.0/8"]},'
    '{"actions":["All"],"decision":"Deny","resource":"Group:g1"}],"policyType":"Custom"}],'
    '"subject":"User:alice"}'
)


def test_acl_info_round_trips():
    acl = acl_from_info(json.loads(ACL_JSON))
    assert acl.subject == "User:alice"
    first = acl.policies[0].entries[0]
    assert first.resource == Resource(ResourceType.TOPIC, "orders", ResourcePattern.PREFIXED)
    assert json.dumps(acl.to_info(), separators=(",", ":")) == ACL_JSON


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("*", Resource(ResourceType.ANY, None, ResourcePattern.ANY)),
        ("topic:*", Resource(ResourceType.TOPIC, None, ResourcePattern.ANY)),
        ("Group:g", Resource(ResourceType.GROUP, "g")),
        ("Cluster:c*", Resource(ResourceType.CLUSTER, "c", ResourcePattern.PREFIXED)),
        ("Queue:q", None),
        ("", None),
    ],
)
def test_resource_keys(key, expected):
    assert Resource.parse(key) == expected


def test_matching_exact_prefix_any_and_type():
    topic = Resource.topic("orders-1")
    assert Resource.parse("Topic:orders-1").matches(topic)
    assert not Resource.parse("Topic:orders-2").matches(topic)
    assert Resource.parse("Topic:ord*").matches(topic)
    assert Resource.parse("Topic:*").matches(topic)
    assert Resource.parse("*").matches(topic)
    assert not Resource.parse("Group:orders-1").matches(topic)


def test_group_resource_strips_retry_prefix_only():
    assert Resource.group("%RETRY%g").name == "g"
    assert Resource.group("%DLQ%g").name == "%DLQ%g"


def test_source_ips_are_exact_or_cidr():
    assert source_ip_matches("10.1.2.3", "10.0.0.0/8")
    assert not source_ip_matches("11.1.2.3", "10.0.0.0/8")
    assert source_ip_matches("10.1.2.3", "10.1.2.3")
    assert not source_ip_matches("10.1.2.3", "10.1.2.*")


@pytest.mark.parametrize(
    ("entry", "remark"),
    [
        ({"resource": "Queue:q", "actions": ["Pub"], "decision": "Allow"}, "resource is null"),
        ({"resource": "Topic:a", "actions": ["Fly"], "decision": "Allow"}, "actions is empty"),
        ({"resource": "Topic:a", "actions": ["Any"], "decision": "Allow"}, "can not be Any"),
        ({"resource": "Topic:a", "actions": ["Pub"], "decision": "Maybe"}, "decision is null"),
        (
            {"resource": "Topic:a", "actions": ["Pub"], "decision": "Allow", "sourceIps": ["x"]},
            "source ip is invalid",
        ),
    ],
)
def test_invalid_entries_are_refused(entry, remark):
    info = {"subject": "User:a", "policies": [{"entries": [entry]}]}
    with pytest.raises(AuthError, match=remark):
        acl_from_info(info)


def test_policy_type_defaults_to_custom_and_header_subject_is_fallback():
    info = {"policies": [{"entries": [{"resource": "*", "actions": ["Sub"], "decision": "Allow"}]}]}
    acl = acl_from_info(info, "User:bob")
    assert acl.subject == "User:bob"
    assert acl.policies[0].policy_type is PolicyType.CUSTOM


def _entry(key, *actions, decision=Decision.ALLOW):
    return PolicyEntry(Resource.parse(key), tuple(actions), (), decision)


def test_update_merges_entries_by_resource_and_adds_new_policy_types():
    acl = Acl("User:a", (Policy(PolicyType.CUSTOM, (_entry("Topic:a", Action.PUB),)),))
    changed = acl.updated(
        [
            Policy(
                PolicyType.CUSTOM,
                (
                    _entry("Topic:a", Action.SUB, decision=Decision.DENY),
                    _entry("Topic:b", Action.PUB),
                ),
            ),
            Policy(PolicyType.DEFAULT, (_entry("Topic:*", Action.SUB),)),
        ]
    )
    custom = changed.policy(PolicyType.CUSTOM)
    assert [e.resource.key for e in custom.entries] == ["Topic:a", "Topic:b"]
    assert custom.entries[0] == _entry("Topic:a", Action.SUB, decision=Decision.DENY)
    assert changed.policy(PolicyType.DEFAULT) is not None


def test_delete_entry_drops_empty_policy_then_acl():
    acl = Acl(
        "User:a",
        (
            Policy(PolicyType.CUSTOM, (_entry("Topic:a", Action.PUB),)),
            Policy(PolicyType.DEFAULT, (_entry("Topic:*", Action.PUB),)),
        ),
    )
    left = acl.without_entry(Resource.parse("Topic:a"))
    assert [p.policy_type for p in left.policies] == [PolicyType.DEFAULT]
    assert left.without_entry(Resource.parse("Topic:*"), PolicyType.DEFAULT) is None
