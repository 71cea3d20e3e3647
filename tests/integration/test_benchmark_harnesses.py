"""The benchmark harnesses still run: the peers harness end to end against pocketmq alone, and
the instructions benchmark's in-process send path (without valgrind, which the suite does not
need), with counts small enough for the suite (the figures mean nothing at this size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_peers_harness_runs_every_workload_against_pocketmq(tmp_path: Path) -> None:
    out = tmp_path / "peers.md"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "peers" / "run.py"), "--systems", "pocketmq",
         "--rounds", "1", "--messages", "400", "--sync-messages", "50", "--rate", "200",
         "--seconds", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = out.read_text()
    for section in ("(a) pipelined produce", "(b) sync sends", "(c) drain", "(d) end-to-end"):
        assert section in report
    rows = [line for line in report.splitlines() if line.startswith("| pocketmq |")]
    assert len(rows) == 8, report  # two durability rows, four workloads
    assert not [row for row in rows if "failed" in row or "not received" in row], report


def test_the_instructions_harness_stores_sends_and_pulls_them() -> None:
    """The work `instructions_bench.py` counts: sends the broker answers with SUCCESS, single
    and batched, and pulls that each carry the messages asked for (it asserts each answer)."""
    for mode in (["--batch", "8"], ["--batch", "0"], ["--pull", "4"]):
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "instructions_bench.py"), "--inner", "40",
             *mode],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
