"""Apache RocketMQ's own benchmark tools (`rocketmq-example` 5.5.0: `benchmark.Producer` and
`benchmark.Consumer`) run against any NameServer, and the figures they print.

`run_benchmark` creates the topic, starts the Consumer, then the Producer once the Consumer has
started, lets both run until each printed enough reports (and at least `duration_s`), kills both
by PID and returns every report parsed. The tools never exit on their own: they send and consume
until killed, and print one report every `report_interval_ms`:

    Current Time: ... | Send TPS: 95 | Max RT(ms): 95 | Average RT(ms):   1.738 |
        Send Failed: 0 | Response Failed: 0
    Current Time: ... | Consume TPS: 90 | AVG(B2C) RT(ms):   2.100 | AVG(S2C) RT(ms):   1.500 |
        MAX(B2C) RT(ms): 40 | MAX(S2C) RT(ms): 38 | Consume Fail: 0

(each on one line). TPS and average RT are over the tools' sliding window (one snapshot a
second); the failure counts are totals since the tool started. The Producer prints its first
report about 10 s after it starts, so a run takes at least that. The topic is created first (with
pocketmq's admin client, which both servers answer): a consumer started before its topic exists
only sees it at its next route poll, 30 s later.
"""

from __future__ import annotations

import asyncio
import math
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.client.admin import AdminClient, TopicSettings
from tests.conformance.reference import CLIENT_JVM, JAVA_DIR, fetch_jars

BENCH_POM = JAVA_DIR / "pom-bench.xml"
PRODUCER_MAIN = "org.apache.rocketmq.example.benchmark.Producer"
CONSUMER_MAIN = "org.apache.rocketmq.example.benchmark.Consumer"
STARTED_LINE = "Consumer Started."
START_TIMEOUT_S = 60.0
POLL_S = 0.2

_NUMBER = r"(-?[0-9.]+|NaN)"
_PRODUCER_REPORT = re.compile(
    rf"Send TPS: {_NUMBER} \| Max RT\(ms\): {_NUMBER} \| Average RT\(ms\):\s*{_NUMBER} \| "
    rf"Send Failed: {_NUMBER} \| Response Failed: {_NUMBER}"
)
_CONSUMER_REPORT = re.compile(
    rf"Consume TPS: {_NUMBER} \| AVG\(B2C\) RT\(ms\):\s*{_NUMBER} \| "
    rf"AVG\(S2C\) RT\(ms\):\s*{_NUMBER} \| MAX\(B2C\) RT\(ms\): {_NUMBER} \| "
    rf"MAX\(S2C\) RT\(ms\): {_NUMBER} \| Consume Fail: {_NUMBER}"
)


@dataclass(frozen=True, slots=True)
class ProducerReport:
    """One report of `benchmark.Producer`; `average_rt_ms` is NaN while nothing was sent."""

    send_tps: int
    max_rt_ms: int
    average_rt_ms: float
    send_failed: int
    response_failed: int


@dataclass(frozen=True, slots=True)
class ConsumerReport:
    """One report of `benchmark.Consumer`: born-to-consumed (B2C) and stored-to-consumed (S2C)
    times; the averages are NaN while nothing was consumed."""

    consume_tps: int
    average_b2c_rt_ms: float
    average_s2c_rt_ms: float
    max_b2c_rt_ms: int
    max_s2c_rt_ms: int
    consume_failed: int


def parse_producer_report(line: str) -> ProducerReport | None:
    match = _PRODUCER_REPORT.search(line)
    if match is None:
        return None
    tps, max_rt, average_rt, send_failed, response_failed = match.groups()
    return ProducerReport(
        int(tps), int(max_rt), float(average_rt), int(send_failed), int(response_failed)
    )


def parse_consumer_report(line: str) -> ConsumerReport | None:
    match = _CONSUMER_REPORT.search(line)
    if match is None:
        return None
    tps, b2c, s2c, b2c_max, s2c_max, failed = match.groups()
    return ConsumerReport(int(tps), float(b2c), float(s2c), int(b2c_max), int(s2c_max), int(failed))


@dataclass(frozen=True, slots=True)
class BenchmarkSettings:
    """The flags both tools get; the same for every server measured."""

    topic: str = "BenchmarkTopic"
    group: str = "benchmark_consumer"
    threads: int = 2
    message_size_bytes: int = 1024
    report_interval_ms: int = 2000
    queues: int = 4

    def producer_args(self, namesrv: str) -> list[str]:
        return [
            *("-n", namesrv, "-t", self.topic, "-w", str(self.threads)),
            *("-s", str(self.message_size_bytes), "-ri", str(self.report_interval_ms)),
        ]

    def consumer_args(self, namesrv: str) -> list[str]:
        # `-p false`: the group is exactly `group` (the tool appends a random suffix otherwise).
        return [
            *("-n", namesrv, "-t", self.topic, "-w", str(self.threads)),
            *("-g", self.group, "-p", "false", "-ri", str(self.report_interval_ms)),
        ]


@dataclass
class BenchmarkRun:
    """What both tools printed: every report, and their whole output for a failure message."""

    producer: list[ProducerReport] = field(default_factory=list)
    consumer: list[ConsumerReport] = field(default_factory=list)
    producer_output: str = ""
    consumer_output: str = ""
    commands: list[list[str]] = field(default_factory=list)

    @property
    def busy_producer(self) -> list[ProducerReport]:
        return [report for report in self.producer if report.send_tps > 0]

    @property
    def busy_consumer(self) -> list[ConsumerReport]:
        return [report for report in self.consumer if report.consume_tps > 0]

    @property
    def send_failed(self) -> int:
        return self.producer[-1].send_failed if self.producer else 0

    @property
    def response_failed(self) -> int:
        return self.producer[-1].response_failed if self.producer else 0

    @property
    def consume_failed(self) -> int:
        return self.consumer[-1].consume_failed if self.consumer else 0

    def summary(self) -> str:
        """The figures in one line, from each tool's last report: its window is the latest
        (the first reports of a run also cover the seconds before traffic started)."""
        sent = self.producer[-1] if self.producer else None
        consumed = self.consumer[-1] if self.consumer else None
        producer = (
            f"send TPS {sent.send_tps}, average RT {sent.average_rt_ms:.3f} ms, "
            f"max RT {sent.max_rt_ms} ms, send failed {sent.send_failed}, "
            f"response failed {sent.response_failed}"
            if sent
            else "no producer report"
        )
        consumer = (
            f"consume TPS {consumed.consume_tps}, "
            f"average B2C RT {consumed.average_b2c_rt_ms:.3f} ms, "
            f"average S2C RT {consumed.average_s2c_rt_ms:.3f} ms, "
            f"consume failed {consumed.consume_failed}"
            if consumed
            else "no consumer report"
        )
        return (
            f"{producer}; {consumer} "
            f"({len(self.producer)} producer / {len(self.consumer)} consumer reports)"
        )


class BenchmarkTool:
    """One of the tools as a subprocess, its output in a file (a pipe nobody reads would fill
    and stall it)."""

    def __init__(self, classpath: str, main: str, args: list[str], work: Path, name: str) -> None:
        self.name = name
        self.output_path = work / f"{name}.out"
        self.command = [
            "java",
            *CLIENT_JVM,
            # The client 5.x writes its log to ~/logs/rocketmqlogs/tools*.log (it ignores
            # rocketmq.client.logRoot): one home per tool keeps the two logs apart.
            f"-Duser.home={work / name}",
            "-cp",
            classpath,
            main,
            *args,
        ]
        with self.output_path.open("wb") as output:
            self.process = subprocess.Popen(
                self.command, stdout=output, stderr=subprocess.STDOUT, cwd=work
            )

    def output(self) -> str:
        return self.output_path.read_text(errors="replace")

    def lines(self) -> list[str]:
        return self.output().splitlines()

    def exited(self) -> bool:
        return self.process.poll() is not None

    def stop(self) -> None:
        """Kills it: the tools have no orderly end short of a message count."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(30)


def benchmark_classpath() -> str:
    """`rocketmq-example` 5.5.0 and its dependencies, fetched once into the reference cache."""
    return f"{fetch_jars(BENCH_POM)}/*"


async def create_topic(namesrv: str, settings: BenchmarkSettings) -> None:
    """Creates the tools' topic on DefaultCluster and waits (10 s at most) for its route."""
    async with AdminClient([namesrv]) as admin:
        await admin.create_topic(
            TopicSettings(settings.topic, settings.queues, settings.queues),
            cluster="DefaultCluster",
        )
        if not await admin.wait_for_route(settings.topic, timeout_s=10):
            raise AssertionError(f"no route for {settings.topic} at {namesrv} within 10 s")


def _wait(
    condition: Callable[[], bool], what: str, timeout_s: float, tools: list[BenchmarkTool]
) -> None:
    """Polls `condition` until true, at most `timeout_s`; fails at once when a tool exits."""
    deadline = time.monotonic() + timeout_s
    for _ in range(math.ceil(timeout_s / POLL_S) + 1):
        if condition():
            return
        if any(tool.exited() for tool in tools) or time.monotonic() > deadline:
            break
        time.sleep(POLL_S)
    outputs = "\n".join(
        f"{tool.name} (exit code {tool.process.poll()}):\n{tool.output()[-3000:]}" for tool in tools
    )
    raise AssertionError(f"not within {timeout_s} s: {what}\n{outputs}")


def run_benchmark(
    namesrv: str,
    work: Path,
    settings: BenchmarkSettings | None = None,
    *,
    duration_s: float = 0.0,
    producer_reports: int = 2,
    busy_consumer_reports: int = 1,
    timeout_s: float = 60.0,
    classpath: str | None = None,
) -> BenchmarkRun:
    """Runs the benchmark Consumer and Producer against `namesrv` and returns their reports.

    Args:
        namesrv: The NameServer, `host:port`, of a cluster named DefaultCluster.
        work: An empty folder for the tools' output and client logs.
        settings: The tools' flags; the defaults are small (2 threads, 1 KiB messages).
        duration_s: The least time the producer sends (for measurements); 0 stops as soon as
            the report counts are reached.
        producer_reports: Stop no earlier than this many producer reports.
        busy_consumer_reports: Stop no earlier than this many consumer reports with TPS > 0.
        timeout_s: The most the reports may take after the producer started.
        classpath: The tools' class path; `benchmark_classpath()` when not given.

    Returns:
        Every report both printed before they were killed.

    Raises:
        AssertionError: A tool exited, or the reports did not come within `timeout_s`; the
            message carries its output.
    """
    settings = settings or BenchmarkSettings()
    classpath = classpath or benchmark_classpath()
    asyncio.run(create_topic(namesrv, settings))
    tools: list[BenchmarkTool] = []
    run = BenchmarkRun()
    try:
        consumer = BenchmarkTool(
            classpath, CONSUMER_MAIN, settings.consumer_args(namesrv), work, "consumer"
        )
        tools.append(consumer)
        # Two JVMs starting together on a busy machine stretch the first requests past the
        # client's 3 s timeout; the consumer starts first and the producer once it is up.
        _wait(
            lambda: STARTED_LINE in consumer.output(),
            "the consumer started",
            START_TIMEOUT_S,
            tools,
        )
        producer = BenchmarkTool(
            classpath, PRODUCER_MAIN, settings.producer_args(namesrv), work, "producer"
        )
        tools.append(producer)
        started = time.monotonic()

        def enough() -> bool:
            run.producer = [r for r in map(parse_producer_report, producer.lines()) if r]
            run.consumer = [r for r in map(parse_consumer_report, consumer.lines()) if r]
            return (
                len(run.producer) >= producer_reports
                and len(run.busy_consumer) >= busy_consumer_reports
                and time.monotonic() - started >= duration_s
            )

        _wait(
            enough,
            f"{producer_reports} producer reports and {busy_consumer_reports} busy consumer "
            "reports",
            timeout_s + duration_s,
            tools,
        )
    finally:
        for tool in reversed(tools):
            tool.stop()
        run.commands = [tool.command for tool in tools]
        if tools:
            run.consumer_output = tools[0].output()
        if len(tools) > 1:
            run.producer_output = tools[1].output()
    run.producer = [r for r in map(parse_producer_report, run.producer_output.splitlines()) if r]
    run.consumer = [r for r in map(parse_consumer_report, run.consumer_output.splitlines()) if r]
    return run
