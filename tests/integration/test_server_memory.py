"""A started server keeps freed memory for its large frames (`runtime.memory`): batch sends of
256 KiB reach `pocketmq up` without its pages being faulted in afresh for each one."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from pocketmq.client import Message, Producer, SendStatus
from pocketmq.testing import start_up_process
from pocketmq.testing.proc_stat import proc_stat

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
    reason="the settings are glibc's",
)

BATCH = 256
"""Messages of 1 KiB a batch send: a frame of about 270 KiB."""


def _minor_faults(pid: int) -> int:
    return proc_stat(pid).minor_faults


def test_batch_sends_do_not_fault_in_fresh_pages_each(tmp_path: Path) -> None:
    server = start_up_process(tmp_path / "data", tmp_path / "up.log")
    try:
        batch = [Message("MemoryTopic", bytes(1024)) for _ in range(BATCH)]
        with Producer("memory-producer", namesrv=server.address) as producer:
            # Past the first touches of the queue's and the index's pages.
            for _ in range(200):
                assert producer.send_batch(batch).status is SendStatus.SEND_OK
            before = _minor_faults(server.process.pid)
            sends = 200
            for _ in range(sends):
                assert producer.send_batch(batch).status is SendStatus.SEND_OK
            faults = _minor_faults(server.process.pid) - before
    finally:
        server.stop()
    # With glibc's defaults the broker faulted in about 166 pages a send here (each frame
    # decoded into fresh memory); with the memory kept, about 4 (its files growing).
    assert faults / sends < 12, f"{faults / sends:.1f} page faults a batch send"
