"""How long a store takes to start after a crash: abnormal recovery, timed.

`python benchmarks/recovery_bench.py [--messages 300000] [--queues 4] [--rounds 2] [--dir DIR]`

A store is filled with 1 KiB messages with keys (`pocketmq bench store`'s, round robin over
`--queues` queues of one topic), in 64 MiB CommitLog files, and closed without its clean-stop
steps, as a killed broker leaves it. Each round copies it and times `MessageStore.load()` on
the copy: the CommitLog scanned with CRCs from the safe point, queues and index recovered and
re-dispatched from there, and everything synced before the store would serve.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from pocketmq.bench.store import append_batches, make_messages
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

COMMIT_LOG_FILE = 64 << 20


def store_config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=COMMIT_LOG_FILE
    )


async def fill(root: Path, messages: int, queues: int) -> None:
    store = MessageStore(store_config(root))
    store.load()
    await store.start()
    await append_batches(store, make_messages(messages, 1024, queues), 32)
    store.dispatch_now()
    # One more periodic flush of queues and index, so the checkpoint is a recent one.
    await asyncio.sleep(1.5)
    store.close()  # no clean stop: the next load recovers as after a crash


def timed_load(root: Path) -> str:
    store = MessageStore(store_config(root))
    start = time.perf_counter()
    result = store.load()
    elapsed = time.perf_counter() - start
    store.close()
    return (
        f"load after a crash: {elapsed:.2f} s (CommitLog scanned from {result.scan_start:,} "
        f"to {result.end_offset:,}, {result.records:,} records)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--queues", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where the temporary stores go")
    args = parser.parse_args()
    logging.getLogger("pocketmq.store").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="pocketmq-bench-", dir=args.dir) as work:
        original = Path(work) / "original"
        asyncio.run(fill(original, args.messages, args.queues))
        print(
            f"{args.messages:,} messages of 1 KiB in {args.queues:,} queues stored, "
            "the store left as after a crash"
        )
        for number in range(args.rounds):
            copy = Path(work) / f"copy-{number}"
            # Holes kept: queue files are sparse, and a dense copy of thousands of them is
            # gigabytes of zeros the load would read from disk.
            subprocess.run(["cp", "-a", "--sparse=always", original, copy], check=True)
            os.sync()  # the copy's pages written out first: the load's own syncs are timed
            print(f"round {number + 1}: {timed_load(copy)}", flush=True)
            shutil.rmtree(copy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
