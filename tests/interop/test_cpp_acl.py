"""The C++ client (`set_session_credentials`) against a pocketmq broker with ACL 1.0 on: its
signed sends and push consumption go through; unsigned or wrongly signed sends are refused
(the client reports "No route info" after its retries; the broker's audit log says which rule
refused them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pocketmq.client import Admin
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.testing import start_up_process
from tests.interop.cpp_harness import bodies

RULES = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: cppClientAK
    secretKey: cpp-client-secret
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: adminAccount
    secretKey: admin-secret
    admin: true
"""


def test_the_cpp_client_signs_and_is_refused_without_credentials(cpp: Any, tmp_path: Path) -> None:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(RULES)
    config = tmp_path / "broker.properties"
    config.write_text(f"aclEnable=true\naclFilePath={rules}\n")
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        with Admin(
            [server.address], credentials=SessionCredentials("adminAccount", "admin-secret")
        ) as admin:
            admin.create_topic(TopicSettings("CppAclTopic", 4, 4), cluster="DefaultCluster")
        signed = ["--credentials", "cppClientAK", "cpp-client-secret"]
        producer = cpp("cpp_produce.py", [server.address, "CppAclTopic", "5", *signed])
        assert producer.finish(timeout_s=120)["sent"] == 5
        consumer = cpp(
            "cpp_push_consume.py", [server.address, "CG_ACL", "CppAclTopic", "5", "120", *signed]
        )
        assert consumer.finish(timeout_s=150, stop=False)["distinct"] == 5
        assert sorted(set(bodies(consumer))) == [f"body-{i}" for i in range(5)]
        for credentials, reason in (
            ([], "carries no AccessKey"),
            (
                ["--credentials", "cppClientAK", "not-the-secret"],
                "signature mismatch for accessKey=cppClientAK",
            ),
        ):
            refused = cpp("cpp_produce.py", [server.address, "CppAclTopic", "1", *credentials])
            refused.wait_for("error", timeout_s=120)
            # The C++ client reports "No route info" after its retries; the broker's audit
            # log says which rule refused it.
            audit = (tmp_path / "up.log").read_text(errors="replace")
            assert reason in audit
    finally:
        assert server.stop() == 0
    assert "cpp-client-secret" not in (tmp_path / "up.log").read_text(errors="replace")
