"""ACL 2.0 decisions: `AclAuthorizationHandler`, `UserAuthorizationHandler`, authentication."""

from pocketmq.acl.authorization import authenticate, authorize, parse_whitelist
from pocketmq.acl.policies import Acl, Action, Decision, Policy, PolicyEntry, PolicyType, Resource
from pocketmq.acl.signing import signature
from pocketmq.acl.users import User, UserStatus, UserType

ALICE = User("alice", "secret12", UserType.NORMAL, UserStatus.ENABLE)
IP = "192.168.0.1"


def _entry(key, actions=(Action.PUB,), decision=Decision.ALLOW, ips=()):
    return PolicyEntry(Resource.parse(key), tuple(actions), tuple(ips), decision)


def _acl(*entries, default=()):
    policies = [Policy(PolicyType.CUSTOM, tuple(entries))] if entries else []
    if default:
        policies.append(Policy(PolicyType.DEFAULT, tuple(default)))
    return Acl("User:alice", tuple(policies))


def _check(acl, topic="test-1", actions=(Action.PUB,), ip=IP, user=ALICE):
    return authorize("User:alice", user, acl, Resource.topic(topic), actions, ip)


def test_no_acl_or_no_match_is_refused_with_rocketmq_remark():
    refusal = _check(None)
    assert refusal.code == 16
    assert refusal.remark == (
        "User:alice has no permission to access Topic:test-1 from 192.168.0.1, no matched policies."
    )
    assert _check(_acl(_entry("Topic:other"))) is not None


def test_literal_beats_prefix_beats_type_any_beats_any():
    acl = _acl(
        _entry("*"),
        _entry("Topic:*", decision=Decision.DENY),
        _entry("Topic:test*"),
        _entry("Topic:test-1", decision=Decision.DENY),
    )
    assert _check(acl).remark.endswith("the decision is deny.")
    assert _check(acl, "test-2") is None  # prefix allow beats Topic:* deny
    assert _check(acl, "other") is not None  # Topic:* deny beats *
    assert _check(_acl(_entry("*"), _entry("Group:*", decision=Decision.DENY)), "x") is None


def test_longer_prefix_wins():
    acl = _acl(_entry("Topic:test*"), _entry("Topic:test_*", decision=Decision.DENY))
    assert _check(acl, "test_002") is not None
    assert _check(acl, "test-2") is None


def test_equal_specificity_follows_rocketmq_comparator_allow_first():
    acl = _acl(_entry("Topic:a", decision=Decision.DENY), _entry("Topic:a"))
    assert _check(acl, "a") is None


def test_actions_any_all_and_one_of_several():
    assert _check(_acl(_entry("Topic:test-1", (Action.ALL,))), actions=(Action.SUB,)) is None
    assert _check(_acl(_entry("Topic:test-1", (Action.SUB,))), actions=(Action.PUB,)) is not None
    assert _check(_acl(_entry("Topic:test-1", (Action.SUB,))), actions=(Action.ANY,)) is None
    acl = _acl(_entry("Topic:test-1", (Action.SUB,)))
    assert _check(acl, actions=(Action.PUB, Action.SUB, Action.GET)) is None


def test_deny_entry_for_other_action_does_not_apply():
    acl = _acl(_entry("Topic:test-1", (Action.SUB,), Decision.DENY), _entry("Topic:*"))
    assert _check(acl) is None


def test_source_ips():
    acl = _acl(_entry("Topic:test-1", ips=("192.168.0.0/24",)))
    assert _check(acl) is None
    assert _check(acl, ip="10.10.0.1") is not None


def test_default_policy_only_when_custom_matches_nothing():
    acl = _acl(_entry("Topic:test-1", decision=Decision.DENY), default=(_entry("Topic:*"),))
    assert _check(acl) is not None
    assert _check(acl, "other") is None


def test_super_user_passes_and_unknown_user_and_no_subject_fail():
    root = User("alice", "x", UserType.SUPER, UserStatus.ENABLE)
    assert _check(None, user=root) is None
    assert _check(None, user=None).remark == "User:alice not found."
    no_subject = authorize(None, None, None, Resource.topic("t"), (Action.PUB,), IP)
    assert no_subject.remark.startswith("Authorization failed")


def test_authentication_signature_and_disabled_user():
    fields = {"AccessKey": "alice", "topic": "t"}
    fields["Signature"] = signature(fields, b"body", "secret12")
    assert authenticate(ALICE, fields, b"body") is None
    assert authenticate(ALICE, fields, b"other").remark == "check signature failed."
    disabled = User("alice", "secret12", UserType.NORMAL, UserStatus.DISABLE)
    assert authenticate(disabled, fields, b"body").remark == "User:alice is disabled."
    assert authenticate(None, fields, b"body").remark == "User:alice is not found."
    assert authenticate(ALICE, {"topic": "t"}, None).code == 16


def test_whitelist_parsing():
    assert parse_whitelist(" 10, 11 ,,") == {"10", "11"}
