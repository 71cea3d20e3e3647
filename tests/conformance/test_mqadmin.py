"""The real mqadmin against Apache RocketMQ and against pocketmq: every command line of
`tests/conformance/mqadmin.py`, run with a producer and a push consumer online, must answer the
same on both (`transcript`), but for the differences `docs/compatibility.md` lists."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from pocketmq.testing import ServerProcess
from tests.conformance.mqadmin import COMMANDS, run_mqadmin, transcript
from tests.conformance.reference import ApacheRocketMQ

pytestmark = pytest.mark.conformance

LISTED: dict[str, str] = {
    "brokerStatus -n {ns} -b {broker}": "pocketmq reports fewer runtime figures (no thread pools, "
    "no put/get rates yet)",
    "getBrokerConfig -n {ns} -b {broker}": "pocketmq has fewer settings",
    "getNamesrvConfig -n {ns}": "pocketmq's NameServer has fewer settings",
    "statsAll -n {ns} -t {topic}": "pocketmq does not count messages in and out per topic and "
    "group yet: its 24-hour columns are 0",
}
"""Commands whose output is compared only by outcome (ok or the response code), and why."""


def broker_address(server: ServerProcess) -> str:
    """The broker's address, from the line its log starts serving with."""
    found = re.search(r"serving at (\S+), NameServers", server.log())
    assert found, server.log()
    return found.group(1)


@pytest.fixture(scope="module")
def answers(
    apache_rocketmq: ApacheRocketMQ,
    pocketmq_twin: ServerProcess,
    v5_classpath: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], dict[str, Any]]:
    work = tmp_path_factory.mktemp("mqadmin")
    servers = [
        (apache_rocketmq.namesrv_addr, apache_rocketmq.broker_addr, work / "reference"),
        (pocketmq_twin.address, broker_address(pocketmq_twin), work / "pocketmq"),
    ]
    # The two runs mostly wait on their servers, so they overlap well even on two cores.
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(run_mqadmin, v5_classpath, *server) for server in servers]
        reference, ours = (transcript(run.result()) for run in runs)
    return reference, ours


@pytest.mark.parametrize("command", [command for command, _ in COMMANDS])
def test_mqadmin_answers_as_apache_rocketmq_does(
    command: str, answers: tuple[dict[str, Any], dict[str, Any]]
) -> None:
    reference, ours = answers
    if command in LISTED:
        assert ours[command]["outcome"] == reference[command]["outcome"]
    else:
        assert ours[command] == reference[command]


def test_the_scenario_worked_on_the_reference(
    answers: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """Most commands succeed there; a transcript of failures on both sides proves nothing."""
    reference, _ = answers
    failed = [command for command, answer in reference.items() if answer["outcome"] != "ok"]
    assert failed == ["noSuchCommand -n {ns}"] or failed == [], failed
