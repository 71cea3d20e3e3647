"""Flame graphs of the broker and the client under the peers workloads (a) and (c).

Starts `pocketmq up` (ASYNC_FLUSH) on free loopback ports, runs `benchmarks/peers/workloads.py
pocketmq produce|drain` under `py-spy record` while a second `py-spy record` samples the broker,
and writes SVG flame graphs plus the collapsed stacks to `--out` (docs/perf by default), then
prints the functions with the most samples (own time) for each.

`python benchmarks/profile_hot_paths.py [--messages N] [--out DIR]` (needs `pip install
-e .[peers]` for py-spy, and permission to trace processes)
"""

from __future__ import annotations

import argparse
import collections
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "peers"))

from servers import start_pocketmq  # noqa: E402


def own_time(collapsed: Path, top: int) -> list[tuple[str, float]]:
    """The leaf frames with the largest share of samples."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        leaf = stack.rsplit(";", 1)[-1]
        counts[leaf] += int(n)
        total += int(n)
    return [(frame, 100 * n / total) for frame, n in counts.most_common(top)] if total else []


def retitle(svg: Path, title: str) -> None:
    """Replaces the flame graph's title, which py-spy fills with its command line (local
    paths), by a description of the run."""
    text = svg.read_text()
    text = re.sub(r'(<text id="title"[^>]*>)[^<]*(</text>)', rf"\g<1>{title}\g<2>", text, count=1)
    svg.write_text(text)


def record(args: list[str], output: Path, fmt: str) -> list[str]:
    py_spy = Path(sys.executable).with_name("py-spy")
    return [str(py_spy), "record", "--rate", "200", "--format", fmt, "-o", str(output), *args]


def profile(workload: str, messages: int, out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="pocketmq-profile-") as tmp:
        server = start_pocketmq(Path(tmp), "ASYNC_FLUSH")
        script = str(ROOT / "benchmarks/peers/workloads.py")
        client = [sys.executable, script, "pocketmq", workload, server.address]
        client += ["--messages", str(messages), "--tag", workload]
        try:
            for fmt, suffix in (("flamegraph", "svg"), ("raw", "txt")):
                broker_out = out / f"broker-{workload}.{suffix}"
                client_out = out / f"client-{workload}.{suffix}"
                target = ["--pid", str(server.pids_for_cpu[0]), "--nonblocking"]
                broker = subprocess.Popen(
                    record(target, broker_out, fmt),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(1)
                subprocess.run(
                    record(["--", *client], client_out, fmt), check=True, capture_output=True
                )
                broker.send_signal(2)  # SIGINT: py-spy writes its output and exits
                broker.wait(timeout=60)
                if fmt == "flamegraph":
                    for side, path in (("broker", broker_out), ("client", client_out)):
                        retitle(path, f"pocketmq {side}, peers workload {workload} (py-spy 200 Hz)")
        finally:
            server.stop()
    for side in ("broker", "client"):
        print(f"\n{side}, workload {workload}: own time of the top frames")
        for frame, share in own_time(out / f"{side}-{workload}.txt", 15):
            print(f"  {share:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "perf")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for workload in ("produce", "drain"):
        profile(workload, args.messages, args.out)


if __name__ == "__main__":
    main()
