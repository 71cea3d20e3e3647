"""Produce and consume throughput of 1 KiB messages through the official C++ client.

Starts `pocketmq up` on free ports, then runs the interop drivers (tests/interop/scripts) in the
C++ client's virtualenv (created on first use, see docs/interop.md): one producer sending
`--messages` messages one at a time (sync), then one push consumer reading them all.
`python benchmarks/cpp_client_bench.py [--messages N] [--size BYTES]`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.interop.conftest import Driver, ensure_cpp_client  # noqa: E402

from pocketmq.testing import start_server_process  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    python = ensure_cpp_client()
    with tempfile.TemporaryDirectory(prefix="pocketmq-cpp-bench-") as work:
        work_dir = Path(work)
        up = start_server_process(
            ["up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", work + "/up"],
            work_dir / "up.log",
        )
        try:
            producer = Driver(
                python,
                "cpp_produce.py",
                [up.address, "BenchTopic", str(args.messages), "--size", str(args.size)],
                work_dir,
            )
            sent = producer.finish(timeout_s=600)
            rate = sent["sent"] / sent["seconds"]
            print(f"C++ producer, sync sends of {args.size} B: {rate:,.0f} msgs/s", flush=True)
            consumer = Driver(
                python,
                "cpp_push_consume.py",
                [up.address, "CG_BENCH", "BenchTopic", str(args.messages), "600", "--summary-only"],
                work_dir,
            )
            got = consumer.finish(timeout_s=600, stop=False)
            rate = got["received"] / got["seconds"]
            print(f"C++ push consumer, {args.size} B: {rate:,.0f} msgs/s", flush=True)
        finally:
            up.stop()


if __name__ == "__main__":
    main()
