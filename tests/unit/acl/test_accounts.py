"""The plain_acl.yml model and loader (reference §7.2; 4.9.8 `PlainPermissionManager`)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pocketmq.acl.accounts import (
    ANY,
    DENY,
    PUB,
    SUB,
    Account,
    AclDataVersion,
    check_perm,
    load_file,
    load_rules,
    parse_file,
    parse_perm,
)
from pocketmq.acl.addresses import AclConfigError
from tests.unit.acl.sample_rules import SAMPLE_YAML

SECRET = "s3cr3t-value-never-shown"


def test_sample_file_loads_with_perms_and_retry_groups(tmp_path: Path) -> None:
    path = tmp_path / "plain_acl.yml"
    path.write_text(SAMPLE_YAML)
    rules = load_rules(path)
    assert set(rules.accounts) == {"RocketMQ", "rocketmq2"}
    first = rules.accounts["RocketMQ"]
    assert first.secret_key == "12345678"  # YAML reads it as an int; Java sees "12345678"
    assert first.default_topic_bits == DENY
    assert first.default_group_bits == SUB
    assert dict(first.resource_perms) == {
        "topicA": DENY,
        "topicB": PUB | SUB,
        "topicC": SUB,
        "%RETRY%groupA": DENY,
        "%RETRY%groupB": PUB | SUB,
        "%RETRY%groupC": SUB,
    }
    assert not first.white_pattern.matches("10.0.0.1")
    second = rules.accounts["rocketmq2"]
    assert second.admin
    assert not second.has_resource_perms
    assert second.white_pattern.matches("192.168.1.7")
    assert [p.text for p in rules.global_white] == ["10.10.103.*", "192.168.0.*"]
    assert rules.data_version is None


@pytest.mark.parametrize(
    ("text", "bits"),
    [
        ("PUB", PUB),
        ("SUB", SUB),
        ("PUB|SUB", PUB | SUB),
        ("SUB|PUB", PUB | SUB),
        (" DENY ", DENY),
        ("ANY", DENY),
        ("pub", DENY),
        (None, DENY),
    ],
)
def test_permission_strings(text: str | None, bits: int) -> None:
    assert parse_perm(text) == bits


def test_check_perm_deny_wins_and_any_takes_pub_or_sub() -> None:
    assert check_perm(PUB, PUB | SUB)
    assert not check_perm(PUB, SUB)
    assert not check_perm(SUB, SUB | DENY)
    assert check_perm(ANY, PUB)
    assert check_perm(ANY, SUB)
    assert not check_perm(ANY, DENY)


def test_folder_of_two_files_merges_and_remembers_each_account_file(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text(SAMPLE_YAML)
    (tmp_path / "b.yaml").write_text(
        "globalWhiteRemoteAddresses: ['172.16.0.1']\n"
        "accounts:\n  - {accessKey: producer01, secretKey: abcdefgh, defaultTopicPerm: PUB}\n"
        "dataVersion:\n  - {counter: 4, timestamp: 1700000000000}\n"
    )
    (tmp_path / "notes.txt").write_text("not yaml: [")
    rules = load_rules(tmp_path)
    assert set(rules.accounts) == {"RocketMQ", "rocketmq2", "producer01"}
    assert rules.account_files["producer01"] == str(tmp_path / "b.yaml")
    assert len(rules.global_white) == 3
    assert rules.file(str(tmp_path / "b.yaml")).data_version == AclDataVersion(4, 1700000000000)


def test_duplicate_access_key_across_files_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text(SAMPLE_YAML)
    (tmp_path / "b.yml").write_text("accounts:\n  - {accessKey: RocketMQ, secretKey: otherkey1}\n")
    with pytest.raises(AclConfigError, match=r"'RocketMQ' is already defined in .*a\.yml") as info:
        load_rules(tmp_path)
    assert str(tmp_path / "b.yml") in str(info.value)


def test_duplicate_access_key_in_one_file_is_an_error() -> None:
    text = "accounts:\n  - {accessKey: abcdefg, secretKey: 1234567}\n" * 1
    text += "  - {accessKey: abcdefg, secretKey: 7654321}\n"
    with pytest.raises(AclConfigError, match="defined twice"):
        parse_file(text, "f.yml")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("accounts: [\n", "not valid YAML"),
        ("- just a list\n", "top level is not a mapping"),
        ("accounts: {accessKey: x}\n", "accounts is not a list"),
        (f"accounts:\n  - {{accessKey: short, secretKey: {SECRET}}}\n", "accessKey must be longer"),
        ("accounts:\n  - {accessKey: longenough, secretKey: 123}\n", "secretKey must be longer"),
        (f"accounts:\n  - {{secretKey: {SECRET}}}\n", "needs both accessKey and secretKey"),
        (
            f"accounts:\n  - {{accessKey: longenough, secretKey: {SECRET}, topicPerms: [t]}}\n",
            "topicPerms entry 't' is not name=PERM",
        ),
        (
            f"accounts:\n  - {{accessKey: longenough, secretKey: {SECRET}, "
            "whiteRemoteAddress: 10.0.0.300}\n",
            "whiteRemoteAddress",
        ),
        (
            f"accounts:\n  - {{accessKey: longenough, secretKey: {SECRET}, admin: maybe}}\n",
            "admin is not true or false",
        ),
        ("globalWhiteRemoteAddresses: ['10.1.*']\n", "globalWhiteRemoteAddresses"),
        ("dataVersion: [{counter: x}]\n", "dataVersion"),
    ],
)
def test_broken_file_gives_one_line_naming_file_and_problem_without_secret(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "broken.yml"
    path.write_text(text)
    with pytest.raises(AclConfigError) as info:
        load_rules(path)
    message = str(info.value)
    assert problem in message
    assert str(path) in message
    assert "\n" not in message
    assert SECRET not in message


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(AclConfigError, match=r"missing\.yml: cannot read"):
        load_file(tmp_path / "missing.yml")


def test_empty_file_is_no_rules(tmp_path: Path) -> None:
    (tmp_path / "empty.yml").write_text("")
    assert not load_rules(tmp_path).accounts


def test_secret_key_never_in_repr() -> None:
    account = Account("abcdefgh", SECRET)
    assert SECRET not in repr(account)


def test_written_file_reads_back_and_bumps_data_version(tmp_path: Path) -> None:
    acl_file = parse_file(SAMPLE_YAML, "plain_acl.yml")
    changed = acl_file.with_account(
        Account("newuser1", "newsecret", topic_perms=("t1=PUB",)), now_ms=1_700_000_000_123
    )
    assert changed.data_version == AclDataVersion(1, 1_700_000_000_123)
    again = changed.with_global_white(["10.0.0.*"], now_ms=1_700_000_000_456)
    assert again.data_version == AclDataVersion(2, 1_700_000_000_456)
    text = again.to_yaml_text()
    raw = yaml.safe_load(text)
    assert raw["dataVersion"] == [{"counter": 2, "timestamp": 1_700_000_000_456}]
    assert list(raw) == ["globalWhiteRemoteAddresses", "accounts", "dataVersion"]
    reread = parse_file(text, "plain_acl.yml")
    assert reread.accounts == again.accounts
    assert reread.global_white_remote_addresses == ("10.0.0.*",)
    assert reread.data_version == again.data_version
    gone = reread.without_account("RocketMQ", now_ms=1_700_000_000_789)
    assert [a.access_key for a in gone.accounts] == ["rocketmq2", "newuser1"]
    assert gone.data_version == AclDataVersion(3, 1_700_000_000_789)
    assert reread.without_account("nobody-here", now_ms=5) is reread


def test_bad_global_white_update_is_refused() -> None:
    with pytest.raises(AclConfigError):
        parse_file(SAMPLE_YAML, "p.yml").with_global_white(["10.1.*"], now_ms=1)
