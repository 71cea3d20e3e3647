"""Message trace, read back: the Java client (`rocketmq-client` 4.9.8, `enableMsgTrace`) sends
and consumes three messages against Apache RocketMQ and against pocketmq, then the trace of one
sent message is asked for with the real mqadmin (`queryMsgTraceById`, rocketmq-tools 5.5.0) on
each server and with `pocketmq admin queryMsgTraceById` on pocketmq. With times, hosts and costs
replaced by placeholders, the three answers must be the same text, and the reference's must
show the producer group's Pub row and the consumer group's Sub row, both successful.

Clients send trace records asynchronously, in batches, so each query is repeated (one mqadmin
JVM a try) until it shows both rows or `TRACE_WAIT_S` has passed.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from pocketmq.testing import ServerProcess
from tests.conformance.reference import ApacheRocketMQ, mqadmin_java, run_java_driver

pytestmark = pytest.mark.conformance

TOPIC = "TraceQueryTopic"
GROUP = "trace-query"
PRODUCER_GROUP = f"{GROUP}-producer"
TRACE_WAIT_S = 30
QUERY_TIMEOUT_S = 60

_VOLATILE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"), "<time>"),
    (re.compile(r"/?\d{1,3}(\.\d{1,3}){3}(:\d+)?"), "<host>"),
    (re.compile(r"(?<!\S)-?\d+ms\b"), "<cost>"),
    (re.compile(r"[ \t]+"), " "),
]


def normalise(text: str) -> list[str]:
    """The answer's lines with placeholders for what differs from run to run, blanks kept
    (they end each block), trailing blank lines and logback's start-up lines (`|-`) dropped."""
    lines = []
    for line in text.splitlines():
        if "|-" in line:
            continue
        for pattern, placeholder in _VOLATILE:
            line = pattern.sub(placeholder, line)
        lines.append(line.strip())
    while lines and not lines[-1]:
        lines.pop()
    return lines


def rows(lines: list[str]) -> list[list[str]]:
    """The data rows (not the `#` headers) of a trace view, split into cells."""
    return [line.split(" ") for line in lines if line and not line.startswith("#")]


def complete(lines: list[str]) -> bool:
    """Both the send and the consumption have been traced."""
    kinds = {row[0] for row in rows(lines)}
    return {"Pub", "Sub"} <= kinds


def mqadmin(classpath: str, work: Path, msg_id: str, namesrv: str) -> str:
    """The real mqadmin's `queryMsgTraceById`, in a JVM of its own; its stdout."""
    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [
            *mqadmin_java(
                classpath, f"-Duser.home={work}", f"-Drocketmq.client.logRoot={work / 'logs'}"
            ),
            *("queryMsgTraceById", "-i", msg_id, "-n", namesrv),
        ],
        capture_output=True,
        text=True,
        timeout=QUERY_TIMEOUT_S,
        cwd=work,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    (work / "answer.txt").write_text(done.stdout)  # the last try's, for whoever debugs this
    return done.stdout


def pocketmq_admin(msg_id: str, namesrv: str) -> str:
    """`pocketmq admin queryMsgTraceById`; its stdout."""
    done = subprocess.run(
        [
            sys.executable,
            *("-m", "pocketmq.cli.main", "admin", "queryMsgTraceById"),
            *("-i", msg_id, "-n", namesrv),
        ],
        capture_output=True,
        text=True,
        timeout=QUERY_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout


def until_traced(query: Callable[[], str]) -> list[str]:
    """`query`'s normalised answer once it shows a Pub and a Sub row, or its last answer when
    `TRACE_WAIT_S` has passed first (the assertions then say what is missing)."""
    deadline = time.monotonic() + TRACE_WAIT_S
    while True:
        lines = normalise(query())
        if complete(lines) or time.monotonic() > deadline:
            return lines


@dataclass
class Traces:
    reference: list[str]
    """The real mqadmin against Apache RocketMQ."""
    ours: list[str]
    """The real mqadmin against pocketmq."""
    pocketmq_admin: list[str]
    """`pocketmq admin` against pocketmq."""


def traced_run(classpath: str, namesrv: str, work: Path) -> str:
    """Runs the scenario; the id of the first message it sent."""
    ids = work / "msg-ids.txt"
    transcript = run_java_driver(classpath, "Traced", [namesrv, TOPIC, GROUP, str(ids)], work)
    assert len(transcript["consumed"]) == 3, transcript
    return ids.read_text().split()[0]


@pytest.fixture(scope="module")
def traces(
    apache_rocketmq: ApacheRocketMQ,
    pocketmq_twin: ServerProcess,
    java_classpath: str,
    v5_classpath: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Traces:
    work = tmp_path_factory.mktemp("message-trace")
    servers = [
        (apache_rocketmq.namesrv_addr, work / "reference"),
        (pocketmq_twin.address, work / "pocketmq"),
    ]

    def scenario(namesrv: str, where: Path) -> list[str]:
        msg_id = traced_run(java_classpath, namesrv, where)
        return until_traced(lambda: mqadmin(v5_classpath, where / "mqadmin", msg_id, namesrv))

    # Both runs mostly wait on their servers, so they overlap well even on two cores.
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(scenario, *server) for server in servers]
        reference, ours = (run.result() for run in runs)
    msg_id = (work / "pocketmq" / "msg-ids.txt").read_text().split()[0]
    # The real mqadmin has already seen the whole trace (or given up), so one try is enough.
    own = normalise(pocketmq_admin(msg_id, pocketmq_twin.address))
    return Traces(reference, ours, own)


def test_the_reference_traces_the_send_and_the_consumption(traces: Traces) -> None:
    found = rows(traces.reference)
    assert ["Pub", PRODUCER_GROUP, "<host>", "<time>", "<cost>", "success"] in found, (
        traces.reference
    )
    assert ["Sub", GROUP, "<host>", "<time>", "<cost>", "success"] in found, traces.reference


def test_mqadmin_shows_the_same_trace_on_pocketmq(traces: Traces) -> None:
    assert traces.ours == traces.reference


def test_pocketmq_admin_shows_the_same_trace_as_mqadmin(traces: Traces) -> None:
    assert traces.pocketmq_admin == traces.reference
