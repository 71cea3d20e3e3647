"""How cost grows, for pocketmq and Apache RocketMQ: send and consume TPS and average send RT
against message size, the tools' thread count (producers and consumers) and the topic's queue
count, under RocketMQ's own load tools (see `broker_vs_broker.py`, whose servers and measures
this reuses).

`python benchmarks/scaling.py [--seconds S] [--axes size,threads,queues] [--plots DIR]`

Prints one markdown table per axis and, with matplotlib installed (the `peers` extra), writes
one PNG per axis into `--plots` (default `docs/perf/`): TPS on the left, average RT on the
right, log scale on x. ASYNC_FLUSH; one run per point and server. The tools print average
and max RT, not percentiles.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from tests.conformance.benchmark_tools import BenchmarkSettings, benchmark_classpath  # noqa: E402

from broker_vs_broker import (  # noqa: E402
    Figures,
    measure_pocketmq,
    measure_rocketmq,
)

BASE = BenchmarkSettings(topic="Scaling", group="scaling", threads=16)
AXES: dict[str, tuple[str, list[int]]] = {
    "size": ("message size, bytes", [128, 1024, 16 * 1024, 128 * 1024, 1024 * 1024]),
    "threads": ("producer and consumer threads", [1, 4, 16, 64]),
    # 16,384: each written queue holds one open file in either server, and this machine's
    # limit is 20,000 (`ulimit -n`), which 20,000 queues and the rest would pass.
    "queues": ("queues of the topic", [8, 128, 1024, 4096, 16384]),
}
SERVERS = (("pocketmq", measure_pocketmq), ("Apache RocketMQ 5.5.0", measure_rocketmq))


def settings_for(axis: str, value: int) -> BenchmarkSettings:
    if axis == "size":
        return replace(BASE, message_size_bytes=value)
    if axis == "threads":
        return replace(BASE, threads=value)
    return replace(BASE, queues=value)


def table(axis: str, points: dict[tuple[str, int], Figures]) -> str:
    title, values = AXES[axis]
    lines = [
        f"| {title} | server | send TPS | average RT ms | consume TPS | failures |",
        "| ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for value in values:
        for server, _ in SERVERS:
            found = points.get((server, value))
            if found is None:
                lines.append(f"| {value:,} | {server} | did not run | | | |")
                continue
            lines.append(
                f"| {value:,} | {server} | {found.send_tps:,.0f} | "
                f"{found.average_rt_ms:.3f} | {found.consume_tps:,.0f} | {found.failures} |"
            )
    return "\n".join(lines)


def plot(axis: str, points: dict[tuple[str, int], Figures], folder: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.stderr.write("matplotlib is not installed (the `peers` extra): no plot\n")
        return None
    title, values = AXES[axis]
    figure, (tps, rt) = plt.subplots(1, 2, figsize=(10, 4))
    for server, _ in SERVERS:
        xs = [v for v in values if (server, v) in points]
        tps.plot(xs, [points[server, v].send_tps for v in xs], marker="o", label=server)
        rt.plot(xs, [points[server, v].average_rt_ms for v in xs], marker="o", label=server)
    for ax, label in ((tps, "send TPS"), (rt, "average send RT, ms")):
        ax.set_xscale("log")
        ax.set_xlabel(title)
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    figure.suptitle(f"pocketmq and Apache RocketMQ, RocketMQ's benchmark tools: by {title}")
    figure.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"scaling-{axis}.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="load time per point")
    parser.add_argument("--axes", default=",".join(AXES))
    parser.add_argument("--plots", type=Path, default=HERE.parent / "docs" / "perf")
    parser.add_argument("--out", type=Path, help="also write the tables here")
    args = parser.parse_args()
    classpath = benchmark_classpath()
    texts = []
    for axis in args.axes.split(","):
        points: dict[tuple[str, int], Figures] = {}
        for value in AXES[axis][1]:
            for server, measure in SERVERS:
                began = time.monotonic()
                settings = settings_for(axis, value)
                try:
                    with tempfile.TemporaryDirectory(prefix="pocketmq-scaling-") as work:
                        (Path(work) / "tools").mkdir()
                        got = measure("ASYNC_FLUSH", Path(work), settings, args.seconds, classpath)
                except Exception as exc:  # noqa: BLE001
                    # One point that cannot run (a tool that exits, a server that does not
                    # start) is a gap in the table, not the end of the run.
                    first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
                    sys.stderr.write(f"{axis} {value:,}, {server}: failed: {first_line}\n")
                    continue
                points[server, value] = got
                sys.stderr.write(
                    f"{axis} {value:,}, {server}: send TPS {got.send_tps:,.0f}, average RT "
                    f"{got.average_rt_ms:.3f} ms ({time.monotonic() - began:.0f} s)\n"
                )
        texts.append(f"#### By {AXES[axis][0]}\n\n{table(axis, points)}\n")
        path = plot(axis, points, args.plots)
        if path is not None:
            sys.stderr.write(f"wrote {path}\n")
    text = "\n".join(texts)
    sys.stdout.write(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
