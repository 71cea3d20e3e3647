"""The real mqadmin manages pocketmq's ACL as it manages RocketMQ's: mqadmin 4.9.7's ACL 1.0
commands (updateAclConfig, clusterAclConfigVersion, updateGlobalWhiteAddr, deleteAclConfig)
against a broker with `aclEnable=true`, and mqadmin 5.5.0's user and ACL commands against one
with ACL 2.0, each signing with the admin account of its `conf/tools.yml` as operators run it;
what each command changed is checked by a client that then can, or cannot, send."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import Admin, Message, Producer, SendStatus
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import RocketMQError
from pocketmq.testing import ServerProcess, start_up_process
from tests.conformance.reference import (
    JAVA_DIR,
    ReferenceUnavailable,
    fetch_jars,
    mqadmin_java,
)

pytestmark = pytest.mark.conformance

LOGBACK = """<configuration>
  <appender name="E" class="ch.qos.logback.core.ConsoleAppender"><target>System.err</target>
    <encoder><pattern>%msg%n</pattern></encoder></appender>
  <root level="WARN"><appender-ref ref="E"/></root>
</configuration>
"""


class Mqadmin:
    """One release's mqadmin, signing as `account` (its ROCKETMQ_HOME's conf/tools.yml)."""

    def __init__(self, pom: str, home: Path, account: SessionCredentials) -> None:
        try:
            self.lib = fetch_jars(JAVA_DIR / pom)
        except ReferenceUnavailable as exc:
            pytest.fail(str(exc), pytrace=False)
        self.home = home
        (home / "conf").mkdir(parents=True, exist_ok=True)
        (home / "conf" / "logback_tools.xml").write_text(LOGBACK)
        (home / "conf" / "tools.yml").write_text(
            f"accessKey: {account.access_key}\nsecretKey: {account.secret_key}\n"
        )

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [*mqadmin_java(f"{self.lib}/*"), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env={"ROCKETMQ_HOME": str(self.home), "PATH": "/usr/bin:/bin"},
            cwd=self.home,
            check=False,
        )  # fmt: skip
        return done.stdout + done.stderr


def start(work: Path, settings: dict[str, str]) -> ServerProcess:
    config = work / "broker.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return start_up_process(work / "data", work / "up.log", "-c", str(config))


def sends(namesrv: str, topic: str, account: SessionCredentials) -> bool:
    producer = Producer("mqadmin-check", namesrv=namesrv, credentials=account, retry_times=0)
    try:
        with producer:
            return producer.send(Message(topic, b"m")).status is SendStatus.SEND_OK
    except RocketMQError:
        return False


@pytest.fixture
def acl1(tmp_path: Path) -> Iterator[tuple[ServerProcess, Path]]:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(
        "accounts:\n  - accessKey: rocketmqAdmin\n    secretKey: admin-secret-0\n    admin: true\n"
    )
    server = start(tmp_path, {"aclEnable": "true", "aclFilePath": str(rules)})
    try:
        yield server, rules
    finally:
        server.stop()


def test_mqadmin_4_9_manages_acl_1_accounts(
    acl1: tuple[ServerProcess, Path], tmp_path: Path
) -> None:
    server, rules = acl1
    admin_account = SessionCredentials("rocketmqAdmin", "admin-secret-0")
    mqadmin = Mqadmin("pom-server-4.xml", tmp_path / "home", admin_account)
    namesrv, broker = server.address, server.named_address("broker broker-a")
    with Admin([namesrv], credentials=admin_account) as admin:
        admin.create_topic(TopicSettings("MqadminTopic", 2, 2), cluster="DefaultCluster")
    newcomer = SessionCredentials("newcomerAK", "newcomer-secret")
    assert not sends(namesrv, "MqadminTopic", newcomer)
    out = mqadmin("updateAclConfig", "-n", namesrv, "-b", broker, "-a", "newcomerAK",
                  "-s", "newcomer-secret", "-i", "PUB")  # fmt: skip
    assert "create or update plain access config to" in out, out
    assert sends(namesrv, "MqadminTopic", newcomer)
    out = mqadmin("clusterAclConfigVersion", "-n", namesrv, "-c", "DefaultCluster")
    assert str(rules) in out, out
    out = mqadmin("updateGlobalWhiteAddr", "-n", namesrv, "-b", broker, "-g", "10.1.1.*")
    assert "update global white remote addresses to" in out, out
    assert "10.1.1.*" in rules.read_text()
    out = mqadmin("deleteAclConfig", "-n", namesrv, "-b", broker, "-a", "newcomerAK")
    assert "delete plain access config account from" in out, out
    assert not sends(namesrv, "MqadminTopic", newcomer)


def test_mqadmin_5_manages_acl_2_users_and_acls(tmp_path: Path) -> None:
    root = SessionCredentials("rocketmq", "root-secret-0")
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": "rocketmq", "password": "root-secret-0"}),
    }
    server = start(tmp_path, settings)
    try:
        mqadmin = Mqadmin("pom-server.xml", tmp_path / "home", root)
        namesrv = server.address
        with Admin([namesrv], credentials=root) as admin:
            admin.create_topic(TopicSettings("Orders", 2, 2), cluster="DefaultCluster")
        app = SessionCredentials("orderApp", "order-secret-1")
        steps = [
            (("createUser", "-u", "orderApp", "-p", "order-secret-1"), "create user to"),
            (("createAcl", "-s", "User:orderApp", "-r", "Topic:Orders", "-a", "Pub",
              "-d", "Allow"), "create acl to"),
        ]  # fmt: skip
        for args, success in steps:
            out = mqadmin(*args[:1], "-n", namesrv, "-c", "DefaultCluster", *args[1:])
            assert success in out, out
        assert sends(namesrv, "Orders", app)
        listed = mqadmin("listAcl", "-n", namesrv, "-c", "DefaultCluster")
        assert "User:orderApp" in listed, listed
        assert "Topic:Orders" in listed, listed
        users = mqadmin("listUser", "-n", namesrv, "-c", "DefaultCluster")
        assert "orderApp" in users, users
        out = mqadmin("updateUser", "-n", namesrv, "-c", "DefaultCluster", "-u", "orderApp",
                      "-s", "disable")  # fmt: skip
        assert "update user to" in out, out
        assert not sends(namesrv, "Orders", app)
        out = mqadmin("deleteUser", "-n", namesrv, "-c", "DefaultCluster", "-u", "orderApp")
        assert "delete user to" in out, out
        assert "orderApp" not in mqadmin("listUser", "-n", namesrv, "-c", "DefaultCluster")
    finally:
        server.stop()
