"""The ACL 1.0 decision, one rule at a time (4.9.8 `PlainPermissionManager.validate`).

Each rule has a request it refuses and a near-identical one it lets through; together they show
that removing the rule would let the refused request pass (a mutant would be caught).
"""

from __future__ import annotations

import json

import pytest

from pocketmq.acl import signing
from pocketmq.acl.accounts import AclRules, parse_file
from pocketmq.acl.resources import ADMIN_ONLY_CODES_4_9_8
from pocketmq.acl.validator import AclValidator, Refusal
from pocketmq.common.codes import RequestCode, ResponseCode
from tests.unit.acl.sample_rules import SAMPLE_YAML

OUTSIDE = "172.20.0.5"  # in no whitelist
EXTRA = """\
  - accessKey: producer01
    secretKey: prodsecret
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
  - accessKey: adminlimited
    secretKey: adminsecret
    admin: true
    topicPerms: [topicZ=SUB]
"""


@pytest.fixture
def validator() -> AclValidator:
    rules = AclRules.from_files([parse_file(SAMPLE_YAML + EXTRA, "plain_acl.yml")])
    return AclValidator(rules)


def _signed(fields: dict[str, str], secret: str, body: bytes | None = None) -> dict[str, str]:
    return {**fields, "Signature": signing.signature(fields, body, secret)}


def _send(topic: str, key: str = "RocketMQ", secret: str = "12345678") -> dict[str, str]:
    return _signed({"AccessKey": key, "a": "P", "b": topic}, secret)


def _refusal(result: Refusal | None, rule: str) -> Refusal:
    assert result is not None
    assert result.rule == rule
    assert result.code == ResponseCode.SYSTEM_ERROR
    assert result.remark.startswith("org.apache.rocketmq.acl.common.AclException: ")
    assert "12345678" not in result.remark
    assert "secret" not in result.remark
    return result


V2 = RequestCode.SEND_MESSAGE_V2


def test_global_whitelist_lets_anything_through(validator: AclValidator) -> None:
    assert validator.check(V2, {"b": "topicA"}, None, "10.10.103.7") is None
    _refusal(validator.check(V2, {"b": "topicA"}, None, OUTSIDE), "access-key")


@pytest.mark.parametrize("fields", [{"b": "topicB"}, {"b": "topicB", "AccessKey": ""}])
def test_missing_or_empty_access_key_is_refused(
    validator: AclValidator, fields: dict[str, str]
) -> None:
    refusal = _refusal(validator.check(V2, fields, None, OUTSIDE), "access-key")
    assert "no AccessKey" in refusal.remark
    assert validator.check(V2, _send("topicB"), None, OUTSIDE) is None


def test_unknown_access_key_is_refused(validator: AclValidator) -> None:
    refusal = _refusal(
        validator.check(V2, _send("topicB", "nobody00"), None, OUTSIDE), "access-key"
    )
    assert "accessKey=nobody00" in refusal.remark


def test_account_whitelist_skips_the_signature(validator: AclValidator) -> None:
    unsigned = {"AccessKey": "rocketmq2", "b": "anyTopic", "Signature": "bogus"}
    assert validator.check(V2, unsigned, None, "192.168.1.9") is None
    _refusal(validator.check(V2, unsigned, None, OUTSIDE), "signature")


def test_wrong_signature_is_refused_and_the_right_one_passes(validator: AclValidator) -> None:
    good = _send("topicB")
    assert validator.check(V2, good, None, OUTSIDE) is None
    refusal = _refusal(validator.check(V2, {**good, "b": "topicC"}, None, OUTSIDE), "signature")
    assert "accessKey=RocketMQ" in refusal.remark
    wrong_secret = _send("topicB", secret="not-the-secret")
    _refusal(validator.check(V2, wrong_secret, None, OUTSIDE), "signature")
    body_changed = _signed({"AccessKey": "RocketMQ", "b": "topicB"}, "12345678", b"one")
    assert validator.check(V2, body_changed, b"one", OUTSIDE) is None
    _refusal(validator.check(V2, body_changed, b"two", OUTSIDE), "signature")


def test_signature_check_is_what_refuses(
    validator: AclValidator, monkeypatch: pytest.MonkeyPatch
) -> None:
    forged = {**_send("topicB"), "Signature": "forged"}
    _refusal(validator.check(V2, forged, None, OUTSIDE), "signature")
    monkeypatch.setattr("pocketmq.acl.validator.verify", lambda *a, **k: True)
    assert validator.check(V2, forged, None, OUTSIDE) is None  # the mutant lets it through


def test_publishing_to_the_trace_topic_is_always_allowed(validator: AclValidator) -> None:
    # RocketMQ's defaultTopicPerm is DENY, yet message trace may publish.
    assert validator.check(V2, _send("RMQ_SYS_TRACE_TOPIC"), None, OUTSIDE) is None
    _refusal(validator.check(V2, _send("someOtherTopic"), None, OUTSIDE), "permission")
    pull = _signed(
        {"AccessKey": "RocketMQ", "topic": "RMQ_SYS_TRACE_TOPIC", "consumerGroup": "groupC"},
        "12345678",
    )
    _refusal(validator.check(RequestCode.PULL_MESSAGE, pull, None, OUTSIDE), "permission")


def test_admin_only_codes_need_an_admin(validator: AclValidator) -> None:
    code = RequestCode.UPDATE_AND_CREATE_TOPIC
    plain = _signed({"AccessKey": "RocketMQ", "topic": "x"}, "12345678")
    refusal = _refusal(validator.check(code, plain, None, OUTSIDE), "admin")
    assert f"code={int(code)}" in refusal.remark
    assert "accessKey=RocketMQ" in refusal.remark
    admin = _signed({"AccessKey": "rocketmq2", "topic": "x"}, "12345678")
    assert validator.check(code, admin, None, OUTSIDE) is None


def test_acl_changes_are_admin_only_unless_4_9_8_set_is_chosen(validator: AclValidator) -> None:
    plain = _signed({"AccessKey": "RocketMQ", "accessKey": "other00"}, "12345678")
    _refusal(validator.check(RequestCode.DELETE_ACL_CONFIG, plain, None, OUTSIDE), "admin")
    legacy = AclValidator(validator.rules, admin_only_codes=ADMIN_ONLY_CODES_4_9_8)
    assert legacy.check(RequestCode.DELETE_ACL_CONFIG, plain, None, OUTSIDE) is None


def test_admin_without_resource_perms_passes_every_resource(validator: AclValidator) -> None:
    assert validator.check(V2, _send("topicA", "rocketmq2"), None, OUTSIDE) is None
    # An admin that lists perms is checked against them and its (DENY) defaults.
    limited = _send("topicQ", "adminlimited", "adminsecret")
    _refusal(validator.check(V2, limited, None, OUTSIDE), "permission")


def test_explicit_topic_perm_decides(validator: AclValidator) -> None:
    refusal = _refusal(validator.check(V2, _send("topicA"), None, OUTSIDE), "permission")
    assert "topic:topicA" in refusal.remark
    assert "PUB" in refusal.remark
    assert validator.check(V2, _send("topicB"), None, OUTSIDE) is None
    _refusal(validator.check(V2, _send("topicC"), None, OUTSIDE), "permission")  # SUB only


def test_default_perms_apply_to_unlisted_resources(validator: AclValidator) -> None:
    assert validator.check(V2, _send("anyTopic", "producer01", "prodsecret"), None, OUTSIDE) is None
    _refusal(validator.check(V2, _send("anyTopic"), None, OUTSIDE), "permission")  # DENY default


def test_group_perms_use_the_retry_resource(validator: AclValidator) -> None:
    def pull(group: str) -> dict[str, str]:
        return _signed(
            {"AccessKey": "RocketMQ", "topic": "topicC", "consumerGroup": group}, "12345678"
        )

    assert validator.check(RequestCode.PULL_MESSAGE, pull("groupC"), None, OUTSIDE) is None
    assert validator.check(RequestCode.PULL_MESSAGE, pull("unlisted"), None, OUTSIDE) is None
    refusal = _refusal(
        validator.check(RequestCode.PULL_MESSAGE, pull("groupA"), None, OUTSIDE), "permission"
    )
    assert "group:groupA" in refusal.remark
    assert "SUB" in refusal.remark


def test_heartbeat_is_checked_per_consumer_group(validator: AclValidator) -> None:
    def beat(group: str) -> tuple[dict[str, str], bytes]:
        body = json.dumps(
            {
                "clientID": "c",
                "consumerDataSet": [
                    {"groupName": group, "subscriptionDataSet": [{"topic": "topicC"}]}
                ],
            }
        ).encode()
        return _signed({"AccessKey": "RocketMQ"}, "12345678", body), body

    fields, body = beat("groupB")
    assert validator.check(RequestCode.HEART_BEAT, fields, body, OUTSIDE) is None
    fields, body = beat("groupA")
    _refusal(validator.check(RequestCode.HEART_BEAT, fields, body, OUTSIDE), "permission")


def test_malformed_request_is_refused_even_from_a_whitelisted_address(
    validator: AclValidator,
) -> None:
    # 4.9.8 parses the request before it looks at any whitelist.
    _refusal(validator.check(RequestCode.HEART_BEAT, {}, b"{", "10.10.103.7"), "request")
    assert validator.check(RequestCode.HEART_BEAT, {}, b"{}", "10.10.103.7") is None


def test_rules_can_be_swapped(validator: AclValidator) -> None:
    _refusal(validator.check(V2, _send("anyTopic"), None, OUTSIDE), "permission")
    validator.rules = AclRules.from_files(
        [
            parse_file(
                SAMPLE_YAML.replace("defaultTopicPerm: DENY", "defaultTopicPerm: PUB"), "p.yml"
            )
        ]
    )
    assert validator.check(V2, _send("anyTopic"), None, OUTSIDE) is None
