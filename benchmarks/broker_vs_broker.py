"""pocketmq's broker beside Apache RocketMQ's, under RocketMQ's own load tools.

`python benchmarks/broker_vs_broker.py [--seconds S] [--threads N] [--rounds R] [--out FILE]`

For each flush mode (ASYNC_FLUSH, SYNC_FLUSH) and each server (`pocketmq up`, Apache RocketMQ
5.5.0's NameServer and broker from Maven Central), one at a time on loopback: RocketMQ's
`benchmark.Consumer` and `benchmark.Producer` (`rocketmq-example` 5.5.0, the same flags for
both servers: `-w N -s 1024`, one topic of 4 queues) run for `--seconds` after the producer's
first report. Reported per run: the producer's send TPS and average RT (medians of its reports
after the first, which covers the JVM's warm-up), its max RT (the largest of those reports), the
consumer's TPS (median of its busy reports), failures, and the peak resident memory (VmHWM) of
the broker's process: for pocketmq that is `pocketmq up`, NameServer included; for RocketMQ the
broker's JVM alone; and the CPUs the broker's process and the whole machine kept busy in the
middle of the load, with the broker's CPU for one message (sent and consumed). RocketMQ runs
with G1 and a 1 GiB heap (`-Xms1g -Xmx1g -XX:+UseG1GC`), the collector its own start scripts
choose, sized for this machine.

The tools print average and max RT, not percentiles, so the table has no p99. The figures are
medians over `--rounds` rounds, each round alternating the servers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.conformance.benchmark_tools import (  # noqa: E402
    BenchmarkRun,
    BenchmarkSettings,
    benchmark_classpath,
    run_benchmark,
)
from tests.conformance.reference import ApacheRocketMQ  # noqa: E402

from pocketmq.testing import start_up_process  # noqa: E402
from pocketmq.testing.proc_stat import proc_stat  # noqa: E402

ROCKETMQ_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC"]
FLUSH_MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")


@dataclass(frozen=True)
class Figures:
    server: str
    flush: str
    send_tps: float
    average_rt_ms: float
    max_rt_ms: float
    consume_tps: float
    failures: int
    peak_rss_mib: float
    anon_mib: float
    """Resident at the end of the load: the process's own memory (heap, stacks, code's data)."""
    file_mib: float
    """Resident at the end of the load: pages of mapped files (the CommitLog, queues, index),
    which the page cache holds whether or not a process maps them."""
    broker_cores: float
    """CPUs the broker's process kept busy in the middle of the load (see `CpuWatch`)."""
    machine_cores: float
    """CPUs the whole machine kept busy over the same time: the broker and both tools' JVMs."""

    @property
    def broker_us_a_message(self) -> float:
        """The broker's CPU for one message sent and consumed."""
        return self.broker_cores / self.send_tps * 1e6 if self.send_tps else float("nan")


class CpuWatch:
    """Samples a process's CPU time and the machine's busy time once a second while the load
    runs; `busy()` compares the samples at a fifth and at four fifths of the run, away from the
    tools' start (JVM warm-up) and their stop."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._samples: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.is_set():
            try:
                process_s = proc_stat(self._pid).cpu_s
                with open("/proc/stat") as stat:
                    cpu = [int(v) for v in stat.readline().split()[1:]]
            except OSError:
                return
            machine_s = (sum(cpu) - cpu[3] - cpu[4]) / tick  # all but idle and iowait
            self._samples.append((time.monotonic(), process_s, machine_s))
            self._stop.wait(1.0)

    def busy(self) -> tuple[float, float]:
        """CPUs busy in the process and in the whole machine, or NaN with too few samples."""
        samples = self._samples
        if len(samples) < 5:
            return float("nan"), float("nan")
        first, last = samples[len(samples) // 5], samples[len(samples) * 4 // 5]
        elapsed = last[0] - first[0]
        return (last[1] - first[1]) / elapsed, (last[2] - first[2]) / elapsed


@dataclass(frozen=True)
class Resident:
    peak_mib: float
    anon_mib: float
    file_mib: float


def resident(pid: int) -> Resident:
    """The process's peak resident set (VmHWM) and its present one split into anonymous memory
    and mapped files (RssAnon, RssFile + RssShmem), in MiB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmHWM", "RssAnon", "RssFile", "RssShmem"):
            fields[name] = int(value.split()[0]) / 1024
    nan = float("nan")
    return Resident(
        fields.get("VmHWM", nan),
        fields.get("RssAnon", nan),
        fields.get("RssFile", nan) + fields.get("RssShmem", 0.0),
    )


def figures(server: str, flush: str, run: BenchmarkRun, rss: Resident, cpu: CpuWatch) -> Figures:
    sent = run.busy_producer[1:] or run.busy_producer
    consumed = run.busy_consumer[1:] or run.busy_consumer
    broker_cores, machine_cores = cpu.busy()
    return Figures(
        server=server,
        flush=flush,
        send_tps=statistics.median(r.send_tps for r in sent) if sent else 0.0,
        average_rt_ms=statistics.median(r.average_rt_ms for r in sent) if sent else 0.0,
        max_rt_ms=max((r.max_rt_ms for r in sent), default=0),
        consume_tps=statistics.median(r.consume_tps for r in consumed) if consumed else 0.0,
        failures=run.send_failed + run.response_failed + run.consume_failed,
        peak_rss_mib=rss.peak_mib,
        anon_mib=rss.anon_mib,
        file_mib=rss.file_mib,
        broker_cores=broker_cores,
        machine_cores=machine_cores,
    )


def measure_pocketmq(
    flush: str, work: Path, settings: BenchmarkSettings, seconds: float, classpath: str
) -> Figures:
    config = work / "broker.properties"
    config.write_text(f"flushDiskType={flush}\n")
    server = start_up_process(
        work / "data", work / "pocketmq.log", "--metrics-port", "0", "-c", str(config)
    )
    try:
        with CpuWatch(server.process.pid) as cpu:
            run = run_benchmark(
                server.address, work / "tools", settings, duration_s=seconds, classpath=classpath
            )
        rss = resident(server.process.pid)
    finally:
        server.stop()
    return figures("pocketmq", flush, run, rss, cpu)


def measure_rocketmq(
    flush: str, work: Path, settings: BenchmarkSettings, seconds: float, classpath: str
) -> Figures:
    reference = ApacheRocketMQ(work, broker_settings={"flushDiskType": flush}, jvm=ROCKETMQ_JVM)
    reference.start()
    try:
        with CpuWatch(reference.processes[-1].pid) as cpu:
            run = run_benchmark(
                reference.namesrv_addr,
                work / "tools",
                settings,
                duration_s=seconds,
                classpath=classpath,
            )
        rss = resident(reference.processes[-1].pid)
    finally:
        reference.stop()
    return figures("Apache RocketMQ 5.5.0", flush, run, rss, cpu)


def table(rows: list[Figures]) -> str:
    lines = [
        "| flush | server | send TPS | average RT ms | max RT ms | consume TPS | failures "
        "| peak RSS MiB | RSS at the end MiB: own / mapped files | broker CPUs busy "
        "| broker CPU us a message | machine CPUs busy |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines.extend(
        f"| {r.flush} | {r.server} | {r.send_tps:,.0f} | {r.average_rt_ms:.3f} "
        f"| {r.max_rt_ms:.0f} | {r.consume_tps:,.0f} | {r.failures} | {r.peak_rss_mib:,.0f} "
        f"| {r.anon_mib:,.0f} / {r.file_mib:,.0f} | {r.broker_cores:.2f} "
        f"| {r.broker_us_a_message:.0f} | {r.machine_cores:.2f} |"
        for r in rows
    )
    return "\n".join(lines)


def median_figures(runs: list[Figures]) -> Figures:
    first = runs[0]
    return Figures(
        first.server,
        first.flush,
        statistics.median(r.send_tps for r in runs),
        statistics.median(r.average_rt_ms for r in runs),
        statistics.median(r.max_rt_ms for r in runs),
        statistics.median(r.consume_tps for r in runs),
        sum(r.failures for r in runs),
        statistics.median(r.peak_rss_mib for r in runs),
        statistics.median(r.anon_mib for r in runs),
        statistics.median(r.file_mib for r in runs),
        statistics.median(r.broker_cores for r in runs),
        statistics.median(r.machine_cores for r in runs),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="load time per run")
    parser.add_argument("--threads", type=int, default=16, help="the tools' -w")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--flush", default=",".join(FLUSH_MODES))
    parser.add_argument("--servers", default="pocketmq,rocketmq")
    parser.add_argument("--out", type=Path, help="also write the table here")
    args = parser.parse_args()
    settings = BenchmarkSettings(
        topic="BrokerVsBroker", group="broker_vs_broker", threads=args.threads
    )
    classpath = benchmark_classpath()
    results: dict[tuple[str, str], list[Figures]] = {}
    known = {
        "pocketmq": ("pocketmq", measure_pocketmq),
        "rocketmq": ("Apache RocketMQ 5.5.0", measure_rocketmq),
    }
    servers = [known[name] for name in args.servers.split(",")]
    for round_number in range(1, args.rounds + 1):
        for flush in args.flush.split(","):
            for name, measure in servers:
                began = time.monotonic()
                with tempfile.TemporaryDirectory(prefix="pocketmq-bvb-") as work:
                    (Path(work) / "tools").mkdir()
                    got = measure(flush, Path(work), settings, args.seconds, classpath)
                results.setdefault((flush, name), []).append(got)
                sys.stderr.write(
                    f"round {round_number}, {flush}, {name}: send TPS {got.send_tps:,.0f}, "
                    f"consume TPS {got.consume_tps:,.0f}, peak RSS {got.peak_rss_mib:,.0f} MiB, "
                    f"broker {got.broker_cores:.2f} CPUs ({got.broker_us_a_message:.0f} us a "
                    f"message), machine {got.machine_cores:.2f} CPUs "
                    f"({time.monotonic() - began:.0f} s)\n"
                )
    text = table([median_figures(runs) for runs in results.values()])
    sys.stdout.write(text + "\n")
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
