"""Differential conformance with the official Java client (`rocketmq-client` 4.9.8, and 5.5.0 for
timers): each
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


Servers = tuple[ApacheRocketMQ, ServerProcess]


@pytest.fixture
def servers(apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess) -> Servers:
    return apache_rocketmq, pocketmq_twin


def run_both(
    main: str, args: list[str], servers: Servers, classpath: str, tmp_path: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One driver against each server, at the same time (they mostly wait on their servers)."""
    apache_rocketmq, pocketmq_twin = servers
    with ThreadPoolExecutor(2) as pool:
        runs = [
            pool.submit(run_java_driver, classpath, main, [namesrv, *args], tmp_path / name)
            for namesrv, name in (
                (apache_rocketmq.namesrv_addr, "reference"),
                (pocketmq_twin.address, "pocketmq"),
            )
        ]
        reference, ours = (run.result() for run in runs)
    return reference, ours


def test_sync_sends_then_a_tag_filtered_push_consumer(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    args = ["SendThenConsumeTopic", "send-then-consume", str(SCENARIO_MESSAGES)]
    reference, ours = run_both("SendThenConsume", args, servers, java_classpath, tmp_path)
    # The scenario itself worked on the reference: every TagA/TagB message, once.
    assert reference["sendStatuses"] == {"SEND_OK": SCENARIO_MESSAGES}
    assert len(reference["consumed"]) == SCENARIO_MESSAGES * 2 // 3
    assert ours == reference


def test_sends_by_selector_a_batch_and_an_orderly_push_consumer(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    args = ["OrderedTopic", "ordered-and-batch", str(SCENARIO_MESSAGES)]
    reference, ours = run_both("OrderedAndBatch", args, servers, java_classpath, tmp_path)
    # On the reference: each order on one queue, consumed there in the order sent, once.
    per_queue = reference["orderlyConsumedPerQueue"]
    assert sum(len(seqs) for seqs in per_queue.values()) == SCENARIO_MESSAGES
    assert all(seqs == sorted(seqs) for seqs in per_queue.values())
    assert reference["batchStatus"] == "SEND_OK"
    assert ours == reference


def test_every_way_to_send_and_a_sql92_selector(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    args = ["SendKindsTopic", "send-kinds"]
    reference, ours = run_both("SendKinds", args, servers, java_classpath, tmp_path)
    assert reference["sync"] == ["SEND_OK"] * 3
    assert reference["async"] == ["SEND_OK"] * 3
    assert len(reference["consumed"]) == 11
    large = next(entry for entry in reference["consumed"] if entry["tags"] == "large")
    assert large["bodyLength"] == 64 * 1024
    assert [entry["properties"]["seq"] for entry in reference["selected"]] == ["2", "3", "4", "10"]
    assert ours == reference


def test_delay_levels_then_retries_then_the_dead_letter_queue(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    args = ["DelayTopic", "delay-retry-dlq"]
    reference, ours = run_both("DelayRetryDlq", args, servers, java_classpath, tmp_path)
    assert reference["waitedASecond"] == {"0": True, "2": True}
    # maxReconsumeTimes 2: the first try and two retries, then the dead-letter queue.
    assert set(map(tuple, reference["tries"].values())) == {(0, 1, 2)}
    assert {entry["topic"] for entry in reference["deadLetters"]} == {"%DLQ%delay-retry-dlq"}
    assert ours == reference


def test_transactions_commit_roll_back_and_are_checked_back(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    reference, ours = run_both(
        "Transactions", ["TransactionTopic", "transactions"], servers, java_classpath, tmp_path
    )
    assert reference["checkedBack"] == ["2", "5"]
    seqs = [entry["properties"]["seq"] for entry in reference["consumed"]]
    assert seqs == ["0", "2", "3", "5"]
    assert ours == reference


def test_where_a_new_group_starts_broadcasting_and_rebalancing(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    args = ["ConsumeModesTopic", "consume-modes"]
    reference, ours = run_both("ConsumeModes", args, servers, java_classpath, tmp_path)
    every = [str(seq) for seq in range(8)]
    assert reference["broadcast"] == [every, every]
    # Apache RocketMQ starts a new group at offset 0 of a queue whose first message is still
    # in memory, whatever its ConsumeFromWhere says; pocketmq must do the same.
    assert reference["fromLast"] == [*every, *["marker"] * 4]
    assert reference["rebalance"] == [
        {"A": [0, 1, 2, 3]},
        {"A": [0, 1], "B": [2, 3]},
        {"A": [0, 1, 2, 3]},
    ]
    assert ours == reference


def test_lite_pull_pull_by_queue_and_queries(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    args = ["PullQueryTopic", "pull-and-query"]
    reference, ours = run_both("PullAndQuery", args, servers, java_classpath, tmp_path)
    assert len(reference["subscribedPoll"]) == 8
    assert {answers["beyondEnd"]["status"] for answers in reference["pulls"].values()} == {
        "OFFSET_ILLEGAL"
    }
    assert len(reference["queries"]["byKey"]) == 1
    assert ours == reference


def test_timer_messages_with_the_5x_client(
    servers: Servers, v5_classpath: str, tmp_path: Path
) -> None:
    reference, ours = run_both("Timers", ["TimerTopic", "timers"], servers, v5_classpath, tmp_path)
    assert reference["arrivals"] == {"0": 1, "1": 1, "2": 1}
    assert set(reference["notEarly"].values()) == {True}
    assert ours == reference


def test_message_trace_on_breaks_nothing(
    servers: Servers, java_classpath: str, tmp_path: Path
) -> None:
    """Trace records are sent but not served yet (observability issue); the messages flow."""
    reference, ours = run_both(
        "Traced", ["TracedTopic", "traced"], servers, java_classpath, tmp_path
    )
    assert len(reference["consumed"]) == 3
    assert ours == reference
