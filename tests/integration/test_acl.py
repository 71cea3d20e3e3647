"""ACL 1.0 on a real broker (`aclEnable=true`, RocketMQ's plain_acl.yml): requests without an
account, with a wrong secret, on a topic the account may not use, or of an admin-only code from
a normal account are refused with RocketMQ's answer and a remark naming the rule; signed
requests within the account's rights go through; the file is re-read when it changes (a broken
one keeps the last good rules, with one warning); the admin commands change accounts; no secret
ever reaches a log or an error."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import Admin, Message, Producer, SendStatus
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import RocketMQError
from pocketmq.testing import ServerProcess, start_up_process, wait_until
from tests.integration.replication import BrokerGroup

ADMIN = SessionCredentials("RocketMQAdmin", "admin-secret-1")
PRODUCER = SessionCredentials("producerAK", "producer-secret-2")
CONSUMER = SessionCredentials("consumerAK", "consumer-secret-3")
SECRETS = ("admin-secret-1", "producer-secret-2", "consumer-secret-3", "newcomer-secret-4")

RULES = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: RocketMQAdmin
    secretKey: admin-secret-1
    admin: true
  - accessKey: producerAK
    secretKey: producer-secret-2
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB
  - accessKey: consumerAK
    secretKey: consumer-secret-3
    admin: false
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(RULES)
    config = tmp_path / "broker.properties"
    config.write_text(f"aclEnable=true\naclFilePath={rules}\nautoCreateTopicEnable=false\n")
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        with Admin([server.address], credentials=ADMIN) as admin:
            admin.create_topic(TopicSettings("AclTopic", 2, 2), cluster="DefaultCluster")
            admin.create_topic(TopicSettings("OtherTopic", 2, 2), cluster="DefaultCluster")
        yield server, rules
    finally:
        server.stop()
        logs = (tmp_path / "up.log").read_text(errors="replace")
        leaked = [secret for secret in SECRETS if secret in logs]
        assert not leaked, f"secret keys in the broker's log: {leaked}"


def send(namesrv: str, topic: str, credentials: SessionCredentials | None) -> SendStatus:
    with Producer(
        "acl-producer", namesrv=namesrv, credentials=credentials, send_timeout_s=3, retry_times=0
    ) as producer:
        return producer.send(Message(topic, b"secured")).status


def refusal(namesrv: str, topic: str, credentials: SessionCredentials | None) -> str:
    with pytest.raises(RocketMQError) as refused:
        send(namesrv, topic, credentials)
    text = str(refused.value)
    assert not any(secret in text for secret in SECRETS)
    return text


def admin_cli(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert not any(secret in completed.stdout + completed.stderr for secret in SECRETS)
    return completed


def test_each_rule_refuses_what_it_should_and_signed_requests_go_through(
    secured: tuple[ServerProcess, Path],
) -> None:
    server, _ = secured
    namesrv = server.address
    assert "carries no AccessKey" in refusal(namesrv, "AclTopic", None)
    wrong = SessionCredentials(PRODUCER.access_key, "not-the-secret")
    assert "signature mismatch for accessKey=producerAK" in refusal(namesrv, "AclTopic", wrong)
    stranger = SessionCredentials("strangerAK", "stranger-secret")
    assert "no ACL account has accessKey=strangerAK" in refusal(namesrv, "AclTopic", stranger)
    assert send(namesrv, "AclTopic", PRODUCER) is SendStatus.SEND_OK
    denied = refusal(namesrv, "OtherTopic", PRODUCER)
    assert "accessKey=producerAK lacks PUB on topic:OtherTopic" in denied
    with Admin([namesrv], credentials=CONSUMER) as consumer:
        bodies = [m.message.body for m in consumer.consume("AclTopic", count=5)]
    assert bodies == [b"secured"]
    not_admin = Admin([namesrv], credentials=PRODUCER)
    with not_admin, pytest.raises(RocketMQError, match="is for admin accounts"):
        not_admin.create_topic(TopicSettings("Forbidden", 1, 1), cluster="DefaultCluster")


def test_the_rules_file_is_reread_and_a_broken_one_keeps_the_last_good_rules(
    secured: tuple[ServerProcess, Path], tmp_path: Path
) -> None:
    server, rules = secured
    namesrv = server.address
    refusal(namesrv, "OtherTopic", PRODUCER)
    rules.write_text(
        RULES.replace("      - AclTopic=PUB", "      - AclTopic=PUB\n      - OtherTopic=PUB")
    )

    def allowed() -> bool:
        try:
            return send(namesrv, "OtherTopic", PRODUCER) is SendStatus.SEND_OK
        except RocketMQError:
            return False

    wait_until(allowed, "the changed rules in force", timeout_s=30)
    log = tmp_path / "up.log"
    rules.write_text("accounts: [this is: not yaml")
    wait_until(
        lambda: "keeping the previous ones" in log.read_text(errors="replace"),
        "one warning about the broken file",
        timeout_s=30,
    )
    assert send(namesrv, "OtherTopic", PRODUCER) is SendStatus.SEND_OK
    assert log.read_text(errors="replace").count("keeping the previous ones") == 1


def test_admin_commands_manage_accounts_and_only_admins_may(
    secured: tuple[ServerProcess, Path],
) -> None:
    server, _ = secured
    namesrv = server.address
    admin = ("--authAccessKey", ADMIN.access_key, "--authSecretKey", ADMIN.secret_key)
    created = admin_cli(
        namesrv, "updateAclConfig", "-c", "DefaultCluster", "-a", "newcomerAK",
        "-s", "newcomer-secret-4", "-i", "DENY", "-t", "OtherTopic=PUB", *admin,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    newcomer = SessionCredentials("newcomerAK", "newcomer-secret-4")
    assert send(namesrv, "OtherTopic", newcomer) is SendStatus.SEND_OK
    versions = admin_cli(namesrv, "clusterAclConfigVersion", "-c", "DefaultCluster", *admin)
    assert versions.returncode == 0, versions.stderr
    assert "plain_acl.yml" in versions.stdout
    as_producer = ("--authAccessKey", PRODUCER.access_key, "--authSecretKey", PRODUCER.secret_key)
    refused = admin_cli(
        namesrv, "deleteAclConfig", "-c", "DefaultCluster", "-a", "newcomerAK", *as_producer
    )
    assert refused.returncode == 1
    assert "is for admin accounts" in refused.stderr
    deleted = admin_cli(
        namesrv, "deleteAclConfig", "-c", "DefaultCluster", "-a", "newcomerAK", *admin
    )
    assert deleted.returncode == 0, deleted.stderr
    assert "no ACL account has accessKey=newcomerAK" in refusal(namesrv, "OtherTopic", newcomer)


def test_a_slave_syncs_from_a_checking_master_with_its_inner_account(tmp_path: Path) -> None:
    """The slave's own requests (topic, group and offset sync) are checked like any: signed
    with `innerClientAuthenticationCredentials` they go through; unsigned they are refused."""
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(
        RULES + "  - accessKey: replicaAccount\n    secretKey: replica-secret-5\n    admin: true\n"
    )
    group = BrokerGroup(tmp_path)
    acl = {"aclEnable": "true", "aclFilePath": str(rules)}
    inner = '{"accessKey": "replicaAccount", "secretKey": "replica-secret-5"}'
    try:
        group.add("master", "broker-a", 0, "ASYNC_MASTER", **acl)
        group.add(
            "signed", "broker-a", 1, "SLAVE", **acl, innerClientAuthenticationCredentials=inner
        )
        group.add("unsigned", "broker-a", 2, "SLAVE", **acl)
        master = group.start("master")
        signed = group.start("signed")
        unsigned = group.start("unsigned")
        logs = tuple(b.process.log_path for b in (master, signed, unsigned) if b.process)
        wait_until(
            lambda: "metadata synced from master" in logs[1].read_text(errors="replace"),
            "the signed slave's sync",
            timeout_s=30,
        )
        wait_until(
            lambda: "metadata sync from master" in logs[2].read_text(errors="replace"),
            "the unsigned slave's refused sync",
            timeout_s=30,
        )
        assert "carries no AccessKey" in logs[2].read_text(errors="replace")
        assert "accessKey=replicaAccount" not in logs[0].read_text(errors="replace")
        assert not any("replica-secret-5" in log.read_text(errors="replace") for log in logs)
    finally:
        group.close()
