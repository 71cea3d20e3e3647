"""The official Java client (4.9.8) against a secured pocketmq: over TLS when the broker and
NameServer enforce it (RocketMQ's `-Dtls.enable=true` on the client, its test mode trusting the
throwaway certificate), and refused there without TLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.testing import ServerProcess, start_up_process
from tests.conformance.reference import run_java_driver

pytestmark = pytest.mark.conformance


def secured_up(tmp_path: Path, **settings: str) -> ServerProcess:
    config = tmp_path / "secured.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))


def test_the_java_client_over_tls_against_enforcing_mode(
    java_classpath: str, tmp_path: Path
) -> None:
    server = secured_up(tmp_path, **{"tls.server.mode": "enforcing", "tls.enable": "true"})
    try:
        args = [server.address, "JavaTlsTopic", "java-tls", "5"]
        over_tls = run_java_driver(
            java_classpath, "Secured", args, tmp_path / "tls", jvm=["-Dtls.enable=true"]
        )
        assert over_tls["sent"] == 5
        assert over_tls["consumed"] == [f"secured-{i}" for i in range(5)]
        plain = run_java_driver(java_classpath, "Secured", args, tmp_path / "plain")
        assert plain["sent"] == 0
        assert "sendError" in plain
    finally:
        assert server.stop() == 0


ACL_RULES = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: javaClientAK
    secretKey: java-client-secret
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""


def test_the_java_client_signs_with_its_acl_hook_and_is_refused_without_it(
    java_classpath: str, tmp_path: Path
) -> None:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text(ACL_RULES)
    server = secured_up(tmp_path, aclEnable="true", aclFilePath=str(rules))
    try:
        args = [server.address, "JavaAclTopic", "java-acl", "5"]
        signed = run_java_driver(
            java_classpath,
            "Secured",
            [*args, "javaClientAK", "java-client-secret"],
            tmp_path / "signed",
        )
        assert signed["sent"] == 5, signed
        assert signed["consumed"] == [f"secured-{i}" for i in range(5)]
        unsigned = run_java_driver(java_classpath, "Secured", args, tmp_path / "unsigned")
        assert unsigned["sent"] == 0
        assert "AccessKey" in unsigned["sendError"], unsigned
        wrong = run_java_driver(
            java_classpath, "Secured", [*args, "javaClientAK", "not-the-secret"], tmp_path / "wrong"
        )
        assert wrong["sent"] == 0
        assert "signature mismatch" in wrong["sendError"], wrong
    finally:
        assert server.stop() == 0
    assert "java-client-secret" not in (tmp_path / "up.log").read_text(errors="replace")
