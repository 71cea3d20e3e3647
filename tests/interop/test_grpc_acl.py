"""The official 5.x Python client through a pocketmq proxy that checks who calls (local mode:
the proxy of `pocketmq up` checks the broker's ACL 1.0 rules, or its ACL 2.0 users and ACLs): a
signed client sends and receives on what its account allows; a client without credentials,
with a wrong secret, or outside its rights is refused with PERMISSION_DENIED and a remark that
names the rule."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from pocketmq.client import Admin
from pocketmq.client.admin import AdminClient
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.testing import start_up_process
from tests.interop.cpp_harness import CACHE, SCRIPTS, ensure_client_venv
from tests.interop.test_grpc_clients import PYTHON_CLIENT

RULES = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: grpcClientAK
    secretKey: grpc-client-secret
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - GrpcAclTopic=PUB|SUB
  - accessKey: adminAccount
    secretKey: admin-secret
    admin: true
"""


def run_client(
    python: Path, proxy: str, scenario: str, topic: str, account: tuple[str, str] | None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PM_")}
    if account is not None:
        env["PM_ACCESS_KEY"], env["PM_SECRET_KEY"] = account
    return subprocess.run(
        [
            str(python),
            "-u",
            str(SCRIPTS / "python5_client.py"),
            scenario,
            proxy,
            topic,
            "GID_ACL",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_the_python_5x_client_signs_and_the_proxy_checks_it(tmp_path: Path) -> None:
    python = ensure_client_venv(CACHE / "python5", PYTHON_CLIENT, "from rocketmq import Producer")
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(RULES)
    config = tmp_path / "broker.properties"
    config.write_text(f"aclEnable=true\naclFilePath={rules}\n")
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        admin_account = SessionCredentials("adminAccount", "admin-secret")
        with Admin([server.address], credentials=admin_account) as admin:
            for topic in ("GrpcAclTopic", "GrpcOtherTopic"):
                admin.create_topic(TopicSettings(topic, 4, 4), cluster="DefaultCluster")
        proxy = server.named_address("proxy")
        account = ("grpcClientAK", "grpc-client-secret")
        sent = run_client(python, proxy, "produce", "GrpcAclTopic", account)
        assert sent.returncode == 0, sent.stderr[-3000:]
        received = run_client(python, proxy, "receive", "GrpcAclTopic", account)
        assert received.returncode == 0, received.stderr[-3000:]
        assert '"received"' in received.stdout
        refusals = {
            "carries no AccessKey": run_client(python, proxy, "produce", "GrpcAclTopic", None),
            "signature mismatch for accessKey=grpcClientAK": run_client(
                python, proxy, "produce", "GrpcAclTopic", ("grpcClientAK", "not-the-secret")
            ),
            "lacks PUB on topic:GrpcOtherTopic": run_client(
                python, proxy, "produce", "GrpcOtherTopic", account
            ),
        }
    finally:
        assert server.stop() == 0
    audit = (tmp_path / "up.log").read_text(errors="replace")
    for reason, completed in refusals.items():
        assert completed.returncode != 0, reason
        assert reason in audit, reason
    assert "grpc-client-secret" not in audit


def test_the_python_5x_client_against_acl_2_users_through_the_local_proxy(tmp_path: Path) -> None:
    python = ensure_client_venv(CACHE / "python5", PYTHON_CLIENT, "from rocketmq import Producer")
    root = {"username": "rocketmq", "password": "root-secret-0"}
    config = tmp_path / "broker.properties"
    config.write_text(
        "authenticationEnabled=true\nauthorizationEnabled=true\n"
        f"initAuthenticationUser={json.dumps(root)}\n"
    )
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        broker = server.named_address("broker broker-a")

        async def grant() -> None:
            super_user = SessionCredentials("rocketmq", "root-secret-0")
            async with AdminClient([server.address], credentials=super_user) as admin:
                for topic in ("GrpcAclTopic", "GrpcOtherTopic"):
                    settings = TopicSettings(topic, 4, 4, attributes="+message.type=NORMAL")
                    await admin.create_topic(settings, cluster="DefaultCluster")
                user = {"username": "grpcApp", "password": "grpc-app-secret"}
                await admin.create_user(broker, user)
                entries = [
                    {
                        "resource": "Topic:GrpcAclTopic",
                        "actions": ["Pub", "Sub"],
                        "decision": "Allow",
                    },
                    {"resource": "Group:GID_ACL", "actions": ["Sub"], "decision": "Allow"},
                ]
                acl = {"subject": "User:grpcApp", "policies": [{"entries": entries}]}
                await admin.put_acl(broker, acl, create=True)

        asyncio.run(grant())
        proxy = server.named_address("proxy")
        account = ("grpcApp", "grpc-app-secret")
        sent = run_client(python, proxy, "produce", "GrpcAclTopic", account)
        assert sent.returncode == 0, sent.stderr[-3000:]
        received = run_client(python, proxy, "receive", "GrpcAclTopic", account)
        assert received.returncode == 0, received.stderr[-3000:]
        refusals = {
            "username cannot be null.": run_client(python, proxy, "produce", "GrpcAclTopic", None),
            "check signature failed.": run_client(
                python, proxy, "produce", "GrpcAclTopic", ("grpcApp", "not-the-secret")
            ),
            "User:grpcApp has no permission to access Topic:GrpcOtherTopic": run_client(
                python, proxy, "produce", "GrpcOtherTopic", account
            ),
        }
    finally:
        assert server.stop() == 0
    audit = (tmp_path / "up.log").read_text(errors="replace")
    for reason, completed in refusals.items():
        assert completed.returncode != 0, reason
        assert reason in audit, reason
    assert "grpc-app-secret" not in audit
    assert "root-secret-0" not in audit
