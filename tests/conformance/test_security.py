"""The official Java client (4.9.8) against a secured pocketmq: over TLS when the broker and
NameServer enforce it (RocketMQ's `-Dtls.enable=true` on the client, its test mode trusting the
throwaway certificate), and refused there without TLS."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.testing import ServerProcess, start_server_process
from tests.conformance.reference import run_java_driver

pytestmark = pytest.mark.conformance


def secured_up(tmp_path: Path, **settings: str) -> ServerProcess:
    config = tmp_path / "secured.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return start_server_process(
        [
            "up",
            "--namesrv-port", "0",
            "--broker-port", "0",
            "--proxy-port", "0",
            "--data-dir", str(tmp_path / "data"),
            "-c", str(config),
        ],
        tmp_path / "up.log",
    )  # fmt: skip


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
