"""The official 5.x Python client over TLS to the proxy of a `pocketmq up` whose every port
enforces TLS, with a certificate from a test CA the client trusts (the client checks the
server's certificate and name): it sends and receives; the same client in plaintext fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from pocketmq.client import Admin
from pocketmq.client.admin.values import TopicSettings
from pocketmq.testing import start_up_process
from tests.integration.certificates import Authority
from tests.interop.cpp_harness import CACHE, SCRIPTS, ensure_client_venv
from tests.interop.test_grpc_clients import PYTHON_CLIENT


def run_client(
    python: Path, proxy: str, scenario: str, environment: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-u", str(SCRIPTS / "python5_client.py"), scenario, proxy, "GrpcTls",
         "GID_TLS", "2"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PM_")}, **environment},
        check=False,
    )  # fmt: skip


def test_the_python_5x_client_over_tls_to_an_enforcing_proxy(tmp_path: Path) -> None:
    python = ensure_client_venv(CACHE / "python5", PYTHON_CLIENT, "from rocketmq import Producer")
    authority = Authority(tmp_path)
    cert, key = authority.issue("proxy")
    config = tmp_path / "broker.properties"
    config.write_text(
        "tls.server.mode=enforcing\ntls.enable=true\n"
        f"tls.server.certPath={cert}\ntls.server.keyPath={key}\n"
    )
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        with Admin([server.address], tls=True) as admin:
            settings = TopicSettings("GrpcTls", 4, 4, attributes="+message.type=NORMAL")
            admin.create_topic(settings, cluster="DefaultCluster")
        proxy = server.named_address("proxy")
        trusted = {"PM_TLS": "1", "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(authority.path)}
        sent = run_client(python, proxy, "produce", trusted)
        assert sent.returncode == 0, sent.stderr[-3000:]
        received = run_client(python, proxy, "receive", trusted)
        assert received.returncode == 0, received.stderr[-3000:]
        assert '"received"' in received.stdout
        plaintext = run_client(python, proxy, "produce", {})
        assert plaintext.returncode != 0
    finally:
        assert server.stop() == 0
