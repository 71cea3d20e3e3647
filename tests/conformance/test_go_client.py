"""Differential conformance with the official Go client (`rocketmq-client-go/v2`): each
scenario of the Go driver (`tests/interop/go`) runs against Apache RocketMQ and against
pocketmq, and the two normalised transcripts must be equal. A difference is a pocketmq bug
unless `docs/compatibility.md` lists it with its reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.testing import ServerProcess
from tests.conformance.go_driver import run_go_driver
from tests.conformance.reference import ApacheRocketMQ

pytestmark = pytest.mark.conformance

SCENARIO_MESSAGES = 30
BATCH_MESSAGES = 10  # the driver's batch size
RETRY_MESSAGES = 8


def run_both(
    go_driver: Path, apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess, *args: str
) -> tuple[dict[str, object], dict[str, object]]:
    """The scenario's transcript from the reference, then from pocketmq."""
    scenario, *rest = args
    reference = run_go_driver(go_driver, [scenario, apache_rocketmq.namesrv_addr, *rest])
    ours = run_go_driver(go_driver, [scenario, pocketmq_twin.address, *rest])
    return reference, ours


def test_sends_of_every_kind_then_a_tag_filtered_and_an_orderly_push_consumer(
    apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess, go_driver: Path
) -> None:
    reference, ours = run_both(
        go_driver,
        apache_rocketmq,
        pocketmq_twin,
        "produce-consume",
        "GoProduceConsumeTopic",
        "go-produce-consume",
        str(SCENARIO_MESSAGES),
    )
    # The scenario itself worked on the reference: every TagA/TagB message, the async one and
    # the batch, once; each order on one queue, consumed there in the order sent.
    assert reference["sendStatuses"] == {"SEND_OK": SCENARIO_MESSAGES}
    assert reference["asyncStatus"] == reference["batchStatus"] == "SEND_OK"
    consumed = reference["consumed"]
    assert isinstance(consumed, list)
    assert len(consumed) == SCENARIO_MESSAGES * 2 // 3 + 1 + BATCH_MESSAGES
    per_queue = reference["orderlyConsumedPerQueue"]
    assert isinstance(per_queue, dict)
    assert sum(len(seqs) for seqs in per_queue.values()) == SCENARIO_MESSAGES
    assert all(seqs == sorted(seqs) for seqs in per_queue.values())
    assert ours == reference


def test_retry_later_is_redelivered_once_and_broadcasting_reaches_every_consumer(
    apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess, go_driver: Path
) -> None:
    reference, ours = run_both(
        go_driver,
        apache_rocketmq,
        pocketmq_twin,
        "retry",
        "GoRetryTopic",
        "go-retry",
        str(RETRY_MESSAGES),
    )
    # On the reference: each message seen first as delivery 0, then once more as retry 1; both
    # broadcasting consumers saw every message once.
    assert reference["reconsumeTimesSeen"] == {str(seq): [0, 1] for seq in range(RETRY_MESSAGES)}
    every = list(range(RETRY_MESSAGES))
    assert reference["broadcastConsumed"] == {"consumer-1": every, "consumer-2": every}
    assert ours == reference


def test_a_pull_consumer_reads_every_queue_from_offset_zero(
    apache_rocketmq: ApacheRocketMQ, pocketmq_twin: ServerProcess, go_driver: Path
) -> None:
    reference, ours = run_both(
        go_driver,
        apache_rocketmq,
        pocketmq_twin,
        "pull",
        "GoPullTopic",
        "go-pull",
        str(SCENARIO_MESSAGES),
    )
    # On the reference: every message pulled once, at consecutive offsets in its queue.
    per_queue = reference["pulledPerQueue"]
    assert isinstance(per_queue, dict)
    pulled = [message for queue in per_queue.values() for message in queue["messages"]]
    assert sorted(int(message["seq"]) for message in pulled) == list(range(SCENARIO_MESSAGES))
    for queue in per_queue.values():
        offsets = [message["queueOffset"] for message in queue["messages"]]
        assert offsets == list(range(queue["maxOffset"]))
    assert ours == reference
