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
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.common.stored_message import decode_record
from pocketmq.store.dispatch import DispatchRequest, parse_dispatch
from pocketmq.store.message_store import MessageStore
from tests.fault.store_writer import QUEUES, TOPIC, config, expected_message

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


def commit_log_records(store: MessageStore) -> Iterator[DispatchRequest]:
    """Every record of the CommitLog, parsed with body CRCs checked."""
    offset = store.commit_log.min_offset
    for _ in range(10_000_000):
        if offset >= store.commit_log.max_offset:
            return
        found = store.commit_log.view_from(offset)
        assert found is not None
        view, position = found
        request = parse_dispatch(view, position, offset, check_crc=True)
        view.release()
        if request is None:
            offset = store.commit_log.next_file_offset(offset)
        else:
            offset += request.size
            yield request


def check_store(root: Path, acked: dict[int, int]) -> int:
    """Opens the store as the next start would and checks it; returns the highest seq stored."""
    store = MessageStore(config(str(root)))
    store.load()
    try:
        highest = -1
        stored: set[int] = set()
        for queue_id in range(QUEUES):
            offset = store.get_min_offset_in_queue(TOPIC, queue_id)
            for _ in range(100_000):
                result = store.get_message(TOPIC, queue_id, offset, 256)
                if not result.buffers:
                    break
                for queue_offset, raw in zip(result.queue_offsets, result.buffers, strict=True):
                    message = decode_record(raw)  # checks framing and body CRC
                    seq = int(message.properties["SEQ"])
                    expected = expected_message(seq)
                    assert message.body == expected.body, f"seq {seq} body differs"
                    assert message.queue_id == queue_id == expected.queue_id
                    assert message.queue_offset == queue_offset
                    assert message.born_timestamp == seq
                    stored.add(seq)
                    highest = max(highest, seq)
                offset = result.next_begin_offset
            assert offset == store.get_max_offset_in_queue(TOPIC, queue_id)
        records = 0
        for request in commit_log_records(store):
            records += 1
            position = store.get_commit_log_offset_in_queue(
                request.topic, request.queue_id, request.queue_offset
            )
            assert position == request.commit_log_offset, "queue and commit log disagree"
        assert records == len(stored), "a commit log record is missing from its queue"
        missing = set(acked) - stored
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
        for seq, physical in acked.items():
            message = store.look_message_by_offset(physical)
            assert message is not None, f"no record at the acknowledged offset of seq {seq}"
            assert message.properties["SEQ"] == str(seq)
        for seq in random.sample(sorted(acked), min(20, len(acked))):
            found = store.query_message(TOPIC, f"k{seq}", 4)
            assert [m.properties["SEQ"] for m in found] == [str(seq)], f"index lost k{seq}"
        return highest
    finally:
        store.close()


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
        highest = check_store(root, acked)
        next_seq = max(highest, max(acked, default=-1)) + 1
    assert total_acks > ROUNDS * 10, "the writer hardly wrote anything; the test proves nothing"
