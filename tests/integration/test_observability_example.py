"""The observability example works as docs/observability.md says: its commands, run as written
(on free ports, in a scratch folder), start a cluster that writes JSON log files per component,
serve Prometheus metrics counting the traced message, and show that message's trace."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from pocketmq.testing import ServerProcess, start_server_process
from tests.integration.metrics_scrape import scrape
from tests.integration.test_docs_examples import DOCS, README_NAMESRV, blocks_of

ROOT = Path(__file__).resolve().parents[2]
PAGE = DOCS / "observability.md"
COMMAND_TIMEOUT_S = 60
FREE_PORTS = ["--namesrv-port", "0", "--broker-port", "0", "--metrics-port", "0"]


def page_commands() -> list[list[str]]:
    [block] = [b for b in blocks_of(PAGE) if b.marker and "test_observability_example" in b.marker]
    return [shlex.split(line) for line in block.code.splitlines() if line.strip()]


def run(words: list[str], cwd: Path) -> str:
    done = subprocess.run(
        words,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, f"{shlex.join(words)}: {done.stderr}"
    return done.stdout


def test_the_page_s_commands_work_as_written(tmp_path: Path) -> None:
    up, send, curl, query = page_commands()
    assert up[:2] == ["pocketmq", "--log-dir"]
    assert send[:2] == ["msg_id=$(python", "examples/observability/traced_send.py"]
    assert curl[0] == "curl"
    assert query[:5] == ["pocketmq", "admin", "queryMsgTraceById", "-i", "$msg_id"]
    logs = tmp_path / "logs"
    config = ROOT / up[up.index("-c") + 1]
    args = [*up[1:], *FREE_PORTS, "--data-dir", str(tmp_path / "data")]
    args[args.index("-c") + 1] = str(config)
    args[args.index("--log-dir") + 1] = str(logs)
    server: ServerProcess = start_server_process(args, tmp_path / "up.log")
    try:
        namesrv = server.address
        msg_id = run(
            [
                sys.executable,
                str(ROOT / send[1]),
                send[2].rstrip(")").replace(README_NAMESRV, namesrv),
            ],
            tmp_path,
        ).strip()
        metrics = scrape(server.named_address("metrics"))
        assert metrics.value("rocketmq_messages_in_total", topic="Orders", env="dev") == 1
        assert metrics.value("rocketmq_messages_out_total", consumer_group="OrdersConsumers") == 1
        query_args = [w.replace(README_NAMESRV, namesrv) for w in query[1:]]
        query_args[query_args.index("-i") + 1] = msg_id
        trace = ""
        for _ in range(60):  # the consumer's trace record is sent within ~100 ms of its close
            trace = run([sys.executable, "-m", "pocketmq.cli.main", *query_args], tmp_path)
            if "OrdersProducers" in trace and "OrdersConsumers" in trace:
                break
        assert "OrdersProducers" in trace, trace
        assert "OrdersConsumers" in trace, trace
    finally:
        server.stop()
    broker_lines = (logs / "broker.log").read_text().splitlines()
    assert broker_lines, "broker.log is empty"
    assert all(json.loads(line)["logger"].startswith("pocketmq.") for line in broker_lines)
    assert (logs / "store.log").exists()
    assert (logs / "pocketmq.log").stat().st_size > (logs / "broker.log").stat().st_size
