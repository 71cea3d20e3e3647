"""Creating many topics one after another, pocketmq beside Apache RocketMQ.

`python benchmarks/topics_bench.py [--topics N] [--step S] [--servers pocketmq,rocketmq]`

For each server (`pocketmq up`, Apache RocketMQ 5.5.0's NameServer and broker from Maven
Central), one at a time on loopback and fresh: one admin client (rocketmq-tools 5.5.0's
`DefaultMQAdminExt`, as `mqadmin updateTopic` uses it; `tests/interop/java/v5/CreateTopics.java`)
creates `--topics` topics of 8 queues on the broker, one after another, and reports the time a
topic took over each `--step` of them, and whether the NameServer routed the step's last topic
right after its creation returned. Both brokers answer a creation once the NameServers know the
topic, and both save their whole topic table on each creation, so a creation's cost grows with
the table; how fast it grows is what this measures. Prints a markdown table and, with
matplotlib installed (the `peers` extra), draws it in `docs/perf/scaling-topics.png`.
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
        [namesrv, broker, str(args.topics), str(args.step), "Many"],
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


def plot(columns: list[tuple[str, Any]], folder: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("matplotlib is not installed (the `peers` extra): no plot\n")
        return None
    figure, axes = plt.subplots(figsize=(6, 4))
    for label, steps in columns:
        axes.plot([s["topics"] for s in steps], [s["ms_per_topic"] for s in steps], marker="o",
                  label=label)  # fmt: skip
    axes.set_xlabel("topics on the broker")
    axes.set_ylabel("ms to create one more (updateTopic)")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.suptitle("Creating topics one after another, DefaultMQAdminExt")
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scaling-topics.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=10_000)
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
        with tempfile.TemporaryDirectory(prefix="pocketmq-topics-") as work:
            steps = measure(classpath, args, Path(work))
        sys.stderr.write(f"{label}: {time.monotonic() - began:.0f} s\n")
        columns.append((label, steps))
    header = "| topics so far | " + " | ".join(f"{label}: ms a topic" for label, _ in columns)
    lines = [header + " |", "| ---: |" + " ---: |" * len(columns)]
    for index, step in enumerate(columns[0][1]):
        cells = []
        for _, steps in columns:
            row = steps[index]
            routed = "" if row["routed"] else " (not routed)"
            cells.append(f"{row['ms_per_topic']:.2f}{routed}")
        lines.append(f"| {step['topics']:,} | " + " | ".join(cells) + " |")
    sys.stdout.write("\n".join(lines) + "\n")
    drawn = plot(columns, args.plots)
    if drawn is not None:
        sys.stderr.write(f"plot: {drawn}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
