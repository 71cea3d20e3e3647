"""Creating many topics (or consumer groups) one after another, pocketmq beside Apache RocketMQ.

`python benchmarks/topics_bench.py [--kind topics|groups] [--count N] [--step S]
[--servers pocketmq,rocketmq]`

For each server (`pocketmq up`, Apache RocketMQ 5.5.0's NameServer and broker from Maven
Central), one at a time on loopback and fresh: one admin client (rocketmq-tools 5.5.0's
`DefaultMQAdminExt`, as `mqadmin updateTopic` and `updateSubGroup` use it;
`tests/interop/java/v5/CreateTopics.java`) creates `--count` topics of 8 queues (or consumer
groups) on the broker, one after another, and reports the time each took over each `--step`
of them, and whether the NameServer routed the step's last topic (the broker knew the step's
last group) right after its creation returned. RocketMQ writes its whole table at each
creation, so its cost grows with the table; pocketmq appends the change to a journal. Prints a
markdown table and, with matplotlib installed (the `peers` extra), draws it in
`docs/perf/scaling-topics.png` (or `scaling-groups.png`).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.conformance.reference import ApacheRocketMQ, run_java_driver, v5_drivers  # noqa: E402

from pocketmq.testing import start_up_process  # noqa: E402

ROCKETMQ_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC"]
HERE = Path(__file__).resolve().parent


def create(classpath: str, namesrv: str, broker: str, args: argparse.Namespace, work: Path) -> Any:
    return run_java_driver(
        classpath,
        "CreateTopics",
        [namesrv, broker, str(args.count), str(args.step), "Many", args.kind],
        work / "client",
        timeout_s=3600,
    )["steps"]


def measure_pocketmq(classpath: str, args: argparse.Namespace, work: Path) -> Any:
    server = start_up_process(work / "data", work / "pocketmq.log")
    try:
        match = re.search(r"broker \S+ (\S+) \(", server.ready_line or "")
        assert match, f"no broker address in {server.ready_line!r}"
        return create(classpath, server.address, match.group(1), args, work)
    finally:
        server.stop()


def measure_rocketmq(classpath: str, args: argparse.Namespace, work: Path) -> Any:
    reference = ApacheRocketMQ(work, jvm=ROCKETMQ_JVM)
    reference.start()
    try:
        return create(classpath, reference.namesrv_addr, reference.broker_addr, args, work)
    finally:
        reference.stop()


def plot(columns: list[tuple[str, Any]], kind: str, folder: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("matplotlib is not installed (the `peers` extra): no plot\n")
        return None
    command = {"topics": "updateTopic", "groups": "updateSubGroup"}[kind]
    figure, axes = plt.subplots(figsize=(6, 4))
    for label, steps in columns:
        axes.plot([s["made"] for s in steps], [s["ms_each"] for s in steps], marker="o",
                  label=label)  # fmt: skip
    axes.set_xlabel(f"{kind} on the broker")
    axes.set_ylabel(f"ms to create one more ({command})")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.suptitle(f"Creating {kind} one after another, DefaultMQAdminExt")
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"scaling-{kind}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=["topics", "groups"], default="topics")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--step", type=int, default=1_000)
    parser.add_argument("--servers", default="pocketmq,rocketmq")
    parser.add_argument("--plots", type=Path, default=HERE.parent / "docs" / "perf")
    args = parser.parse_args()
    classpath = v5_drivers()
    known = {
        "pocketmq": ("pocketmq", measure_pocketmq),
        "rocketmq": ("Apache RocketMQ 5.5.0", measure_rocketmq),
    }
    columns: list[tuple[str, Any]] = []
    for name in args.servers.split(","):
        label, measure = known[name]
        began = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"pocketmq-{args.kind}-") as work:
            steps = measure(classpath, args, Path(work))
        sys.stderr.write(f"{label}: {time.monotonic() - began:.0f} s\n")
        columns.append((label, steps))
    one = args.kind[:-1]
    header = f"| {args.kind} so far | " + " | ".join(f"{label}: ms a {one}" for label, _ in columns)
    lines = [header + " |", "| ---: |" + " ---: |" * len(columns)]
    for index, step in enumerate(columns[0][1]):
        cells = []
        for _, steps in columns:
            row = steps[index]
            checked = "" if row["checked"] else " (not found)"
            cells.append(f"{row['ms_each']:.2f}{checked}")
        lines.append(f"| {step['made']:,} | " + " | ".join(cells) + " |")
    sys.stdout.write("\n".join(lines) + "\n")
    drawn = plot(columns, args.kind, args.plots)
    if drawn is not None:
        sys.stderr.write(f"plot: {drawn}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
