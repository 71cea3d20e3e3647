"""Dispatch with and without what the append wrote handed over, in one process.

`python benchmarks/dispatch_bench.py [--messages N] [--rounds R]`

Each round makes two fresh stores and puts `--messages` messages of 1 KiB (a tag, a key and a
unique id, 8 queues, batches of 32) into each, dispatching after every batch as a broker does
between puts: into one through the store's append path, which hands each record to the
dispatcher (`Dispatcher.expect`), into the other straight to the CommitLog, so dispatch must
parse every record back. The two kinds alternate within each round; reported are the medians
of time a message in the appends and in the dispatches (`time.perf_counter` around each), and
of this process's CPU time for both (`time.process_time`, which also counts the thread that
makes the CommitLog's pages ahead of the writer).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pocketmq.common.properties import encode_properties  # noqa: E402
from pocketmq.store.api import MessageToStore  # noqa: E402
from pocketmq.store.config import MessageStoreConfig  # noqa: E402
from pocketmq.store.message_store import MessageStore  # noqa: E402

BATCH = 32
QUEUES = 8


def batches(count: int) -> list[list[MessageToStore]]:
    body = b"x" * 1024
    return [
        [
            MessageToStore(
                topic="DispatchBench",
                body=body,
                properties=encode_properties(
                    {
                        "TAGS": "TagA",
                        "KEYS": f"key-{first + n}",
                        "UNIQ_KEY": f"C0A8000A00002A9F{first + n:016X}",
                    }
                ),
                queue_id=(first // BATCH) % QUEUES,
                born_host=("10.0.0.1", 5555),
            )
            for n in range(BATCH)
        ]
        for first in range(0, count, BATCH)
    ]


def one_run(
    work: Path, puts: list[list[MessageToStore]], handed_over: bool
) -> tuple[float, float, float]:
    """Seconds in the appends, seconds in the dispatches, CPU seconds of both."""
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(work)))
    store.load()
    # `_append` is the put path's append (it hands records over); the CommitLog's own `append`
    # hands nothing over.
    append = store._append if handed_over else store.commit_log.append
    dispatch = store.dispatcher.dispatch_available
    appending = dispatching = 0.0
    try:
        cpu = time.process_time()
        for batch in puts:
            began = time.perf_counter()
            result = append(batch)
            appended = time.perf_counter()
            dispatched = dispatch()
            appending += appended - began
            dispatching += time.perf_counter() - appended
            assert result.ok, result.remark
            assert dispatched == len(batch)
        return appending, dispatching, time.process_time() - cpu
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    puts = batches(args.messages)
    count = sum(map(len, puts))
    figures: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory(prefix="pocketmq-dispatch-bench-") as work:
        for number in range(args.rounds):
            for handed_over in (False, True):
                run_dir = Path(work) / f"{number}-{handed_over}"
                figures[handed_over].append(one_run(run_dir, puts, handed_over))
    for handed_over, runs in figures.items():
        append_us = statistics.median(a for a, _, _ in runs) / count * 1e6
        dispatch_us = statistics.median(d for _, d, _ in runs) / count * 1e6
        cpu_us = statistics.median(c for _, _, c in runs) / count * 1e6
        how = "handed over" if handed_over else "parsed back"
        print(
            f"{how:12s}: append {append_us:.2f} us, dispatch {dispatch_us:.2f} us, CPU "
            f"{cpu_us:.2f} us a message ({count:,} messages, median of {len(runs)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
