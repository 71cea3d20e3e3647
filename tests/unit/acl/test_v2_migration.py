"""ACL 1.0 -> 2.0 migration of the sample plain_acl.yml (`AuthMigrator`)."""

from pocketmq.acl.accounts import AclRules, parse_file
from pocketmq.acl.migration import migrate
from pocketmq.acl.policies import Action, Decision, PolicyType
from pocketmq.acl.users import UserType
from tests.unit.acl.sample_rules import SAMPLE_YAML


def _rules():
    return AclRules.from_files([parse_file(SAMPLE_YAML, "plain_acl.yml")])


def test_sample_accounts_become_users_admin_is_super():
    result = dict((u.username, (u, a)) for u, a in migrate(_rules()))
    assert result["RocketMQ"][0].user_type is UserType.NORMAL
    assert result["RocketMQ"][0].password == "12345678"
    assert result["rocketmq2"][0].user_type is UserType.SUPER
    assert result["rocketmq2"][1] is None  # no perms, and the whitelist does not carry over


def test_sample_perms_become_entries():
    (_, acl) = next((u, a) for u, a in migrate(_rules()) if u.username == "RocketMQ")
    custom = acl.policy(PolicyType.CUSTOM)
    got = [(e.resource.key, e.actions, e.decision, e.source_ips) for e in custom.entries]
    assert got == [
        ("Topic:topicA", (Action.ALL,), Decision.DENY, ()),
        ("Topic:topicB", (Action.PUB, Action.SUB), Decision.ALLOW, ()),
        ("Topic:topicC", (Action.SUB,), Decision.ALLOW, ()),
        ("Group:groupA", (Action.ALL,), Decision.DENY, ()),
        ("Group:groupB", (Action.PUB, Action.SUB), Decision.ALLOW, ()),
        ("Group:groupC", (Action.SUB,), Decision.ALLOW, ()),
    ]
    default = acl.policy(PolicyType.DEFAULT)
    assert [(e.resource.key, e.actions, e.decision) for e in default.entries] == [
        ("Topic:*", (Action.ALL,), Decision.DENY),
        ("Group:*", (Action.SUB,), Decision.ALLOW),
    ]


def test_existing_users_are_skipped():
    assert [u.username for u, _ in migrate(_rules(), {"RocketMQ"})] == ["rocketmq2"]
