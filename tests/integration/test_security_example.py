"""The security example works as docs/security.md says: `examples/security/` starts a cluster
that speaks only TLS and checks ACL (its files copied, the rules file's path and the ports
moved), and the page's blocks marked as run by this file run as written against it (only the
NameServer address moved); the page's accounts file is the example's."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.client import Admin
from pocketmq.client.admin.values import TopicSettings
from pocketmq.client.credentials import SessionCredentials
from pocketmq.testing import ServerProcess, start_up_process
from tests.integration.test_docs_examples import (
    DOCS,
    README_NAMESRV,
    _run_python,
    _run_shell,
    blocks_of,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "security"
PAGE = DOCS / "security.md"


@pytest.fixture
def example(tmp_path: Path) -> Iterator[ServerProcess]:
    rules = tmp_path / "plain_acl.yml"
    rules.write_text((EXAMPLE / "plain_acl.yml").read_text())
    config = tmp_path / "broker.properties"
    config.write_text(
        (EXAMPLE / "broker.properties")
        .read_text()
        .replace("aclFilePath=examples/security/plain_acl.yml", f"aclFilePath={rules}")
    )
    server = start_up_process(tmp_path / "data", tmp_path / "up.log", "-c", str(config))
    try:
        admin = SessionCredentials("rocketmqAdmin", "admin-secret-0")
        with Admin([server.address], tls=True, credentials=admin) as client:
            client.create_topic(TopicSettings("Orders", 4, 4), cluster="DefaultCluster")
        yield server
    finally:
        server.stop()


def test_the_page_shows_the_example_s_accounts_file() -> None:
    text = PAGE.read_text()
    shown = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    example = "".join(
        line + "\n"
        for line in (EXAMPLE / "plain_acl.yml").read_text().splitlines()
        if not line.startswith("#")
    )
    assert shown == example


def test_the_page_s_blocks_run_against_the_example(example: ServerProcess, tmp_path: Path) -> None:
    blocks = [
        block
        for block in blocks_of(PAGE)
        if block.marker and "test_security_example.py (against" in block.marker
    ]
    assert [block.language for block in blocks] == ["python", "sh"]
    work = tmp_path / "reader"
    work.mkdir()
    environment = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    environment["PATH"] = str(Path(sys.executable).parent) + os.pathsep + environment["PATH"]
    for block in blocks:
        code = block.code.replace(README_NAMESRV, example.address)
        if block.language == "python":
            _run_python(block.name, code, work, environment, example.log)
        else:
            _run_shell(block.name, code, work, environment, example.log)
    log = example.log()
    assert "ACL account reportService created or updated" in log
    assert "ACL account reportService deleted" in log
    assert "tls enforcing" in log
