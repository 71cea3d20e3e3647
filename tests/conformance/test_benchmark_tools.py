"""Apache RocketMQ's own benchmark Producer and Consumer (`rocketmq-example` 5.5.0) run briefly
against pocketmq and against Apache RocketMQ with the same flags: both must send without a
failure and consume what was sent. The figures are printed, never asserted: speed is measured
(`tests/conformance/benchmark_tools.py`), not tested.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from pocketmq.client.admin import AdminClient
from pocketmq.testing import ServerProcess
from tests.conformance.benchmark_tools import (
    BenchmarkRun,
    BenchmarkSettings,
    benchmark_classpath,
    run_benchmark,
)
from tests.conformance.reference import ApacheRocketMQ, ReferenceUnavailable

pytestmark = pytest.mark.conformance

SETTINGS = BenchmarkSettings(topic="BenchmarkToolsTopic", group="BenchmarkToolsGroup", threads=2)
RUN_TIMEOUT_S = 40.0


@pytest.fixture(scope="module")
def bench_classpath() -> str:
    try:
        return benchmark_classpath()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def _check(run: BenchmarkRun, server: str) -> None:
    sys.stdout.write(f"\n{server}: {run.summary()}\n")
    sys.stdout.writelines(f"  {' '.join(command)}\n" for command in run.commands)
    details = f"producer:\n{run.producer_output[-3000:]}\nconsumer:\n{run.consumer_output[-3000:]}"
    assert (run.send_failed, run.response_failed) == (0, 0), details
    assert run.busy_producer, details
    assert run.busy_consumer, details
    assert run.consume_failed == 0, details


async def _stored_messages(namesrv: str, topic: str) -> int:
    async with AdminClient([namesrv]) as admin:
        stats = await admin.topic_stats(topic)
    return sum(queue.max_offset - queue.min_offset for queue in stats.queues)


def test_benchmark_tools_send_and_consume_on_pocketmq(
    pocketmq_twin: ServerProcess, bench_classpath: str, tmp_path: Path
) -> None:
    run = run_benchmark(
        pocketmq_twin.address,
        tmp_path,
        SETTINGS,
        timeout_s=RUN_TIMEOUT_S,
        classpath=bench_classpath,
    )
    _check(run, "pocketmq")
    # Still serving once the tools are gone: the NameServer routes and the broker counts.
    assert asyncio.run(_stored_messages(pocketmq_twin.address, SETTINGS.topic)) > 0
    assert pocketmq_twin.process.poll() is None


def test_benchmark_tools_send_and_consume_on_apache_rocketmq(
    apache_rocketmq: ApacheRocketMQ, bench_classpath: str, tmp_path: Path
) -> None:
    run = run_benchmark(
        apache_rocketmq.namesrv_addr,
        tmp_path,
        SETTINGS,
        timeout_s=RUN_TIMEOUT_S,
        classpath=bench_classpath,
    )
    _check(run, "Apache RocketMQ 5.5.0")
