"""Crash safety of the store, proven by killing a real writer process with SIGKILL.

Each round starts the writer (which recovers the store left by the previous kill), lets it
append with SYNC_FLUSH for a random while, kills it with SIGKILL, and then checks the store as
the next start will see it: every acknowledged message reads back with its exact bytes, every
stored message is a correct message (nothing unacknowledged turned into garbage), and each
ConsumeQueue and the index agree with the CommitLog. `POCKETMQ_CRASH_ROUNDS` sets the round
count (CI default 20); `POCKETMQ_CRASH_SEED` replays one run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fault.store_checks import check_store

pytestmark = [pytest.mark.fault]

WRITER = Path(__file__).with_name("store_writer.py")
ROUNDS = int(os.environ.get("POCKETMQ_CRASH_ROUNDS", "20"))
SEED = int(os.environ.get("POCKETMQ_CRASH_SEED", str(random.randrange(1 << 30))))


def run_writer_until_killed(root: Path, first_seq: int, run_s: float) -> dict[int, int]:
    """Runs the writer for `run_s` seconds after it is ready, SIGKILLs it; returns its acks."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path.cwd()), *sys.path])}
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(root), str(first_seq)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()
        if ready.strip() != "READY":
            proc.kill()
            raise AssertionError(f"writer did not start: {ready!r} {proc.stderr.read()}")  # type: ignore[union-attr]
        time.sleep(run_s)
    finally:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
    acks: dict[int, int] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ACK":  # the last line may be torn by the kill
            acks[int(parts[1])] = int(parts[2])
    assert proc.returncode == -signal.SIGKILL, err
    return acks


def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    sys.stdout.write(f"POCKETMQ_CRASH_SEED={SEED}\n")
    root = tmp_path / "store"
    acked: dict[int, int] = {}
    next_seq = 0
    total_acks = 0
    for _ in range(ROUNDS):
        acks = run_writer_until_killed(root, next_seq, rng.uniform(0.05, 0.4))
        total_acks += len(acks)
        acked.update(acks)
        highest = check_store(root, acked)[0]
        next_seq = max(highest, max(acked, default=-1)) + 1
    assert total_acks > ROUNDS * 10, "the writer hardly wrote anything; the test proves nothing"
