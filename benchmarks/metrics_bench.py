"""What the broker's metrics cost: `pocketmq up` with metrics off against metrics on.

Each round starts `pocketmq up` (one process, its own data directory, free loopback ports) twice,
once per setting:

- off: `metricsExporterType=DISABLE` (the broker still counts; nothing is exported);
- on: `metricsExporterType=PROM` on a free port, with a thread here fetching `/metrics` once a
  second for the whole life of the server, as Prometheus would (scrapes counted, each must
  answer 200).

Against each: `pocketmq bench producer -q N -w W -s S --json` (pipelined sends: msgs/s and send
p99), then `pocketmq bench consumer --fromFirst -q N --json` (a push consumer draining what was
sent: msgs/s), then the server's peak RSS (`VmHWM` of /proc/<pid>/status) and a stop by its PID.
Rounds alternate which setting goes first (off/on, on/off, ...) so that drift on a busy machine
falls on both; the table has every round, the medians and on/off.

With `--before DIR` (a checkout of earlier code), each round also runs a third setting,
"before": the server from `DIR/src` (the workload tools stay this checkout's), to show what the
counting itself costs against code that had none.

`python benchmarks/metrics_bench.py [--rounds 3] [--messages 30000] [--window 256]
[--size 1024] [--before DIR] [--json]`
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pocketmq.testing import start_up_process

SETTINGS = {
    "before": "",
    "off": "metricsExporterType=DISABLE\n",
    "on": "metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
    "metricsPromExporterPort=0\n",
}
FIGURES = ("send_msgs_per_s", "send_p99_ms", "drain_msgs_per_s", "peak_rss_mib")


class Scraper(threading.Thread):
    """Fetches a /metrics URL every `interval_s` until stopped; counts answers by status."""

    def __init__(self, url: str, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.url, self.interval_s = url, interval_s
        self.stopping = threading.Event()
        self.scrapes = self.ok = self.last_bytes = 0
        self.failures: list[str] = []
        self.took_ms: list[float] = []

    def run(self) -> None:
        due = time.monotonic()
        while not self.stopping.is_set():
            began = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as answer:
                    body, status = answer.read(), answer.status
            except urllib.error.HTTPError as exc:
                body, status = b"", exc.code
            except OSError as exc:
                body, status = b"", repr(exc)
            self.scrapes += 1
            self.took_ms.append((time.perf_counter() - began) * 1000)
            if status == 200:
                self.ok += 1
                self.last_bytes = len(body)
            else:
                self.failures.append(str(status))
            due += self.interval_s
            self.stopping.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


def _bench(kind: str, namesrv: str, *options: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "pocketmq.cli.main", "bench", kind, "-n", namesrv]
    run = subprocess.run(
        [*command, *options, "--json"], capture_output=True, text=True, timeout=900, check=True
    )
    return json.loads(run.stdout[run.stdout.index("{") :])


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise LookupError(f"no VmHWM in /proc/{pid}/status")


def one_run(setting: str, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    """`pocketmq up` with `setting`, the send and the drain workloads, peak RSS, stop."""
    config = work / f"{setting}.properties"
    config.write_text(SETTINGS[setting])
    data = Path(tempfile.mkdtemp(prefix=f"{setting}-", dir=work))
    environment = dict(os.environ)
    if setting == "before":
        os.environ["PYTHONPATH"] = str(Path(args.before) / "src")
    try:
        up = start_up_process(data / "data", data / "up.log", "-c", str(config), timeout_s=60)
    finally:
        os.environ.clear()
        os.environ.update(environment)
    scraper = None
    try:
        if setting == "on":
            scraper = Scraper(f"http://{up.named_address('metrics')}/metrics")
            scraper.start()
        count = str(args.messages)
        sent = _bench(
            "producer", up.address, "-q", count, "-w", str(args.window), "-s", str(args.size)
        )
        drained = _bench("consumer", up.address, "--fromFirst", "-q", count)
        if scraper is not None:
            scraper.stop()
        figures: dict[str, Any] = {
            "send_msgs_per_s": sent["msgs_per_s"],
            "send_p99_ms": sent["send_rt"]["p99_us"] / 1000,
            "send_failed": sent["failed"],
            "drain_msgs_per_s": drained["msgs_per_s"],
            "drained": drained["messages"],
            "drain_end_to_end_p99_ms": drained["end_to_end"]["p99_us"] / 1000,
            "peak_rss_mib": round(_peak_rss_mib(up.process.pid), 1),
        }
        if scraper is not None:
            figures |= {"scrapes": scraper.scrapes, "scrapes_200": scraper.ok}
            figures |= {"scrape_bytes": scraper.last_bytes, "scrape_failures": scraper.failures}
            figures["scrape_ms_median"] = round(statistics.median(scraper.took_ms), 2)
        return figures
    finally:
        if scraper is not None:
            scraper.stop()
        up.stop()


def _cells(figures: dict[str, Any]) -> list[str]:
    cells = [
        f"{figures['send_msgs_per_s']:,.0f}",
        f"{figures['send_p99_ms']:,.2f}",
        f"{figures['drain_msgs_per_s']:,.0f}",
        f"{figures['peak_rss_mib']:,.1f}",
    ]
    scrapes = f"{figures['scrapes_200']} / {figures['scrapes']}" if "scrapes" in figures else ""
    return [*cells, scrapes]


def table(rounds: list[dict[str, dict[str, Any]]], medians: dict[str, dict[str, float]]) -> str:
    lines = [
        "| round | metrics | send msgs/s | send p99 ms | drain msgs/s | peak RSS MiB | "
        "scrapes 200 / all |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [  # each round's runs in the order they ran
        f"| {number} | {setting} | " + " | ".join(_cells(runs[setting])) + " |"
        for number, runs in enumerate(rounds, 1)
        for setting in runs
    ]
    for setting in medians:
        cells = _cells(medians[setting])[:-1]
        lines.append(f"| median | {setting} | " + " | ".join(cells) + " | |")
    for top, bottom in _ratios(medians):
        ratio = [f"{medians[top][key] / medians[bottom][key]:.3f}" for key in FIGURES]
        lines.append(f"| {top} / {bottom} | | " + " | ".join(ratio) + " | |")
    return "\n".join(lines)


def _ratios(medians: dict[str, Any]) -> list[tuple[str, str]]:
    return [("on", "off")] + ([("off", "before")] if "before" in medians else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=30_000)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--before", help="a checkout of earlier code to compare with")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    settings = ["before", "off", "on"] if args.before else ["off", "on"]
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="pocketmq-metrics-bench-") as work:
        for number in range(args.rounds):
            turn = number % len(settings)
            order = settings[turn:] + settings[:turn]
            if number % 2:
                order.reverse()
            runs: dict[str, dict[str, Any]] = {}
            for setting in order:
                print(f"round {number + 1}, metrics {setting} ...", file=sys.stderr, flush=True)
                runs[setting] = one_run(setting, Path(work), args)
            rounds.append(runs)
    medians = {
        setting: {key: statistics.median(r[setting][key] for r in rounds) for key in FIGURES}
        for setting in settings
    }
    bad = [
        f"round {n}: {s}: {r[s]}"
        for n, r in enumerate(rounds, 1)
        for s in r
        if r[s]["send_failed"] or r[s]["drained"] < args.messages or r[s].get("scrape_failures")
    ]
    if args.json:
        ratios = {
            f"{top}_over_{bottom}": {k: medians[top][k] / medians[bottom][k] for k in FIGURES}
            for top, bottom in _ratios(medians)
        }
        out = {"rounds": rounds, "medians": medians, "ratios": ratios, "problems": bad}
        print(json.dumps(out, indent=2))
    else:
        print(table(rounds, medians))
        for problem in bad:
            print(f"problem: {problem}")


if __name__ == "__main__":
    main()
