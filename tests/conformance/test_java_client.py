"""Differential conformance with the official Java client (`rocketmq-client` 4.9.8): each
scenario's driver runs against Apache RocketMQ and against pocketmq, and the two normalised
transcripts must be equal. A difference is a pocketmq bug unless `docs/compatibility.md` lists
it with its reason."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pocketmq.testing import ServerProcess
from tests.conformance.reference import ApacheRocketMQ, run_java_driver

pytestmark = pytest.mark.conformance

SCENARIO_MESSAGES = 30


def test_sync_sends_then_a_tag_filtered_push_consumer(
    apache_rocketmq: ApacheRocketMQ,
    pocketmq_twin: ServerProcess,
    java_classpath: str,
    tmp_path: Path,
) -> None:
    args = ["SendThenConsumeTopic", "send-then-consume", str(SCENARIO_MESSAGES)]
    reference = run_java_driver(
        java_classpath,
        "SendThenConsume",
        [apache_rocketmq.namesrv_addr, *args],
        tmp_path / "reference-logs",
    )
    ours = run_java_driver(
        java_classpath, "SendThenConsume", [pocketmq_twin.address, *args], tmp_path / "logs"
    )
    # The scenario itself worked on the reference: every TagA/TagB message, once.
    assert reference["sendStatuses"] == {"SEND_OK": SCENARIO_MESSAGES}
    assert len(reference["consumed"]) == SCENARIO_MESSAGES * 2 // 3
    assert ours == reference


def test_sends_by_selector_a_batch_and_an_orderly_push_consumer(
    apache_rocketmq: ApacheRocketMQ,
    pocketmq_twin: ServerProcess,
    java_classpath: str,
    tmp_path: Path,
) -> None:
    args = ["OrderedTopic", "ordered-and-batch", str(SCENARIO_MESSAGES)]
    reference = run_java_driver(
        java_classpath,
        "OrderedAndBatch",
        [apache_rocketmq.namesrv_addr, *args],
        tmp_path / "reference-logs",
    )
    ours = run_java_driver(
        java_classpath, "OrderedAndBatch", [pocketmq_twin.address, *args], tmp_path / "logs"
    )
    # On the reference: each order on one queue, consumed there in the order sent, once.
    per_queue = reference["orderlyConsumedPerQueue"]
    assert sum(len(seqs) for seqs in per_queue.values()) == SCENARIO_MESSAGES
    assert all(seqs == sorted(seqs) for seqs in per_queue.values())
    assert reference["batchStatus"] == "SEND_OK"
    assert ours == reference


def run_both(
    main: str,
    args: list[str],
    apache_rocketmq: ApacheRocketMQ,
    pocketmq_twin: ServerProcess,
    java_classpath: str,
    tmp_path: Path,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One driver against each server, at the same time (they mostly wait on their servers)."""
    with ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(run_java_driver, java_classpath, main, [namesrv, *args], tmp_path / name)
            for namesrv, name in (
                (apache_rocketmq.namesrv_addr, "reference"),
                (pocketmq_twin.address, "pocketmq"),
            )
        ]
        reference, ours = (run.result() for run in runs)
    return reference, ours


def test_every_way_to_send_and_a_sql92_selector(
    apache_rocketmq: ApacheRocketMQ,
    pocketmq_twin: ServerProcess,
    java_classpath: str,
    tmp_path: Path,
) -> None:
    reference, ours = run_both(
        "SendKinds",
        ["SendKindsTopic", "send-kinds"],
        apache_rocketmq,
        pocketmq_twin,
        java_classpath,
        tmp_path,
    )
    assert reference["sync"] == ["SEND_OK"] * 3
    assert reference["async"] == ["SEND_OK"] * 3
    assert len(reference["consumed"]) == 11
    large = next(entry for entry in reference["consumed"] if entry["tags"] == "large")
    assert large["bodyLength"] == 64 * 1024
    assert [entry["properties"]["seq"] for entry in reference["selected"]] == ["2", "3", "4", "10"]
    assert ours == reference
