"""ACL 2.0 (RocketMQ 5.3's users and ACL policies) on real brokers: an initial Super user
manages users and ACLs with mqadmin's commands; a normal user's signed requests go as far as
its ACL allows (allow and deny entries, literal and prefixed resources), each refusal answers
NO_PERMISSION with RocketMQ's remark; users and ACLs survive a restart and reach every broker of
a cluster, slaves included; ACL 1.0 accounts migrate at start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.client import Admin, Message, Producer, SendStatus
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import RocketMQError
from pocketmq.testing import ServerProcess, start_up_process, wait_until
from tests.integration.replication import BrokerGroup

ROOT = SessionCredentials("rocketmq", "root-secret-0")
APP = SessionCredentials("orderApp", "order-secret-1")
AUTH = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "initAuthenticationUser": json.dumps({"username": "rocketmq", "password": "root-secret-0"}),
}
AS_ROOT = ("--accessKey", ROOT.access_key, "--secretKey", ROOT.secret_key)


def up(work: Path, **settings: str) -> ServerProcess:
    config = work / "broker.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in {**AUTH, **settings}.items()))
    return start_up_process(
        work / "data", work / f"up-{len(list(work.glob('up-*.log')))}.log", "-c", str(config)
    )


def admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", *args, "-n", namesrv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "root-secret-0" not in completed.stdout + completed.stderr
    assert "order-secret-1" not in completed.stdout + completed.stderr
    return completed


def send(namesrv: str, topic: str, credentials: SessionCredentials | None) -> SendStatus:
    producer = Producer(
        "orderApp-producers", namesrv=namesrv, credentials=credentials, send_timeout_s=3,
        retry_times=0,
    )  # fmt: skip
    with producer:
        return producer.send(Message(topic, b"order")).status


def refusal(namesrv: str, topic: str, credentials: SessionCredentials | None) -> str:
    with pytest.raises(RocketMQError) as refused:
        send(namesrv, topic, credentials)
    return str(refused.value)


def test_a_super_user_grants_and_a_normal_user_gets_what_its_acl_allows(tmp_path: Path) -> None:
    server = up(tmp_path)
    try:
        namesrv = server.address
        with Admin([namesrv], credentials=ROOT) as root:
            for topic in ("Orders", "OrdersAudit", "Payments"):
                root.create_topic(TopicSettings(topic, 2, 2), cluster="DefaultCluster")
        steps = [
            ("createUser", "-u", "orderApp", "-p", "order-secret-1"),
            ("createAcl", "-s", "User:orderApp", "-r", "Topic:Orders*", "-a", "Pub", "-d", "Allow"),
            ("createAcl", "-s", "User:orderApp", "-r", "Topic:OrdersAudit", "-a", "Pub",
             "-d", "Deny"),
        ]  # fmt: skip
        for step in steps:
            done = admin(namesrv, step[0], "-c", "DefaultCluster", *step[1:], *AS_ROOT)
            assert done.returncode == 0, done.stderr
        assert send(namesrv, "Orders", APP) is SendStatus.SEND_OK
        assert refusal(namesrv, "OrdersAudit", APP).endswith(
            "User:orderApp has no permission to access Topic:OrdersAudit from 127.0.0.1, "
            "the decision is deny."
        )
        assert "Topic:Payments from 127.0.0.1, no matched policies." in refusal(
            namesrv, "Payments", APP
        )
        assert "username cannot be null." in refusal(namesrv, "Orders", None)
        wrong = SessionCredentials("orderApp", "not-the-secret")
        assert "check signature failed." in refusal(namesrv, "Orders", wrong)
        as_app = ("--accessKey", APP.access_key, "--secretKey", APP.secret_key)
        forbidden = admin(
            namesrv, "createUser", "-c", "DefaultCluster", "-u", "x", "-p", "y", *as_app
        )
        assert forbidden.returncode == 1
        assert "has no permission to access Cluster:DefaultCluster" in forbidden.stderr
        listed = admin(namesrv, "listAcl", "-c", "DefaultCluster", *AS_ROOT)
        assert "Topic:OrdersAudit" in listed.stdout
        assert "Deny" in listed.stdout
        disabled = admin(
            namesrv, "updateUser", "-c", "DefaultCluster", "-u", "orderApp", "-s", "disable",
            *AS_ROOT,
        )  # fmt: skip
        assert disabled.returncode == 0, disabled.stderr
        assert "User:orderApp is disabled." in refusal(namesrv, "Orders", APP)
        enabled = admin(
            namesrv, "updateUser", "-c", "DefaultCluster", "-u", "orderApp", "-s", "enable",
            *AS_ROOT,
        )  # fmt: skip
        assert enabled.returncode == 0, enabled.stderr
    finally:
        assert server.stop() == 0
    again = up(tmp_path)  # the users and ACLs are in the broker's store
    try:
        assert send(again.address, "Orders", APP) is SendStatus.SEND_OK
        assert "the decision is deny." in refusal(again.address, "OrdersAudit", APP)
    finally:
        assert again.stop() == 0
    logs = "".join(path.read_text(errors="replace") for path in tmp_path.glob("up-*.log"))
    assert "ACL 2.0 user created: orderApp by accessKey=rocketmq" in logs
    assert "root-secret-0" not in logs
    assert "order-secret-1" not in logs


def test_acl_1_accounts_migrate_at_start(tmp_path: Path) -> None:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(
        "accounts:\n  - accessKey: legacyApp\n    secretKey: legacy-secret-2\n"
        "    defaultTopicPerm: DENY\n    topicPerms:\n      - Legacy=PUB\n"
    )
    server = up(tmp_path, migrateAuthFromV1Enabled="true", aclFilePath=str(rules))
    try:
        with Admin([server.address], credentials=ROOT) as root:
            root.create_topic(TopicSettings("Legacy", 2, 2), cluster="DefaultCluster")
            root.create_topic(TopicSettings("Other", 2, 2), cluster="DefaultCluster")
        legacy = SessionCredentials("legacyApp", "legacy-secret-2")
        assert send(server.address, "Legacy", legacy) is SendStatus.SEND_OK
        assert "the decision is deny." in refusal(server.address, "Other", legacy)
        later = tmp_path / "later_acl.yml"
        later.write_text(
            "accounts:\n  - accessKey: laterApp\n    secretKey: later-secret-3\n"
            "    defaultTopicPerm: DENY\n    topicPerms:\n      - Other=PUB\n"
        )
        migrated = admin(
            server.address, "migrateAcl", "-c", "DefaultCluster", "-f", str(later), *AS_ROOT
        )
        assert migrated.returncode == 0, migrated.stderr
        assert "migrated laterApp" in migrated.stdout
        later_app = SessionCredentials("laterApp", "later-secret-3")
        assert send(server.address, "Other", later_app) is SendStatus.SEND_OK
    finally:
        assert server.stop() == 0


def test_users_reach_every_broker_of_a_cluster_so_a_slave_has_them(tmp_path: Path) -> None:
    group = BrokerGroup(tmp_path)
    try:
        inner = json.dumps({"accessKey": "rocketmq", "secretKey": "root-secret-0"})
        settings = {**AUTH, "innerClientAuthenticationCredentials": inner}
        group.add("master", "broker-a", 0, "ASYNC_MASTER", **settings)
        group.add("slave", "broker-a", 1, "SLAVE", **settings)
        group.start("master")
        slave = group.start("slave")
        with Admin([group.namesrv_addr], credentials=ROOT) as root:
            wait_until(
                lambda: len(root.cluster_info().broker_addr_table["broker-a"].broker_addrs) == 2,
                "master and slave registered",
                timeout_s=30,
            )
        done = admin(
            group.namesrv_addr,
            "createUser",
            "-c",
            "DefaultCluster",
            "-u",
            "orderApp",
            "-p",
            "order-secret-1",
            *AS_ROOT,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.count("success") == 2, done.stdout
        found = admin(
            group.namesrv_addr, "getUser", "-b", slave.address, "-u", "orderApp", *AS_ROOT
        )
        assert found.returncode == 0, found.stderr
        assert "orderApp" in found.stdout
    finally:
        group.close()
