"""`pocketmq bench producer` and `pocketmq bench consumer` against a real cluster: live lines
each second, a summary with percentiles, `--json` for scripts, and what was sent is consumed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pocketmq.testing import ServerProcess


def bench(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "bench", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"},
    )


def test_a_producer_run_is_consumed_whole_and_reported(
    pocketmq_process_cluster: ServerProcess,
) -> None:
    namesrv = pocketmq_process_cluster.address
    sent = bench("producer", "-n", namesrv, "-t", "BenchCli", "-q", "3000", "-s", "512",
                 "-b", "4", "--json")  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    summary = json.loads(sent.stdout)
    assert (summary["messages"], summary["failed"], summary["batch"]) == (3000, 0, 4)
    rt = summary["send_rt"]
    assert rt["count"] == 750  # one latency per batch send
    assert 0 < rt["p50_us"] <= rt["p99_us"] <= rt["p999_us"] <= rt["max_us"]
    consumed = bench("consumer", "-n", namesrv, "-t", "BenchCli", "--fromFirst", "-q", "3000",
                     "--json")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    result = json.loads(consumed.stdout)
    assert result["messages"] == 3000
    assert result["end_to_end"]["count"] == 3000


def test_a_timed_run_prints_a_line_per_second_and_a_summary(
    pocketmq_process_cluster: ServerProcess,
) -> None:
    namesrv = pocketmq_process_cluster.address
    run = bench("producer", "-n", namesrv, "-t", "BenchLines", "-d", "2.5", "-r", "500")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    ticks = [line for line in lines if "Send TPS:" in line]
    assert len(ticks) >= 2
    assert all("Average RT(ms):" in line and "Send Failed: 0" in line for line in ticks)
    assert lines[-1].startswith("Summary: ")
    assert "p99.9" in lines[-1]


def test_without_a_nameserver_it_says_how_to_give_one() -> None:
    run = bench("producer", "-q", "1")
    assert run.returncode != 0
    assert "-n host:port" in run.stderr


def test_the_store_benchmark_runs_every_workload(tmp_path: Path) -> None:
    ran = bench("store", "--messages", "2000", "--sync-messages", "200", "--dir", str(tmp_path),
                "--json")  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    figures = json.loads(ran.stdout[ran.stdout.index("[") :])
    counts = {figure["workload"]: figure["messages"] for figure in figures}
    for workload in ("append batch 32, ASYNC_FLUSH", "append batch 32 as sent, ASYNC_FLUSH"):
        assert counts[workload] == 2000
    assert counts["read by queue, 32 per read"] == 2000
    assert all(figure["msgs_per_s"] > 0 for figure in figures)
