"""RocketMQ's Java producer (rocketmq-client 4.9.8, unmodified) against a pocketmq DLedger
group whose master is killed under it: the producer follows the new master the NameServer
names, and every send it saw acknowledged is at its queue offset on the new master."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pocketmq.testing import wait_until
from tests.conformance.reference import run_java_driver
from tests.integration.dledger import DLedgerGroup, running_group

log = logging.getLogger(__name__)

TOPIC = "JavaFailover"
RUN_S = 14


@pytest.fixture
def group(tmp_path: Path) -> Iterator[DLedgerGroup]:
    with running_group(tmp_path) as dledger:
        yield dledger


def test_the_java_producer_follows_a_new_master(
    group: DLedgerGroup, java_classpath: str, tmp_path: Path
) -> None:
    master = group.wait_master()
    start_index = (group.status(master) or {})["commitIndex"]
    transcript: dict[str, Any] = {}

    def drive() -> None:
        transcript.update(
            run_java_driver(
                java_classpath,
                "DLedgerFailover",
                [group.namesrv_addr, TOPIC, str(RUN_S)],
                tmp_path / "java",
                timeout_s=RUN_S + 120,
            )
        )

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    wait_until(
        lambda: (group.status(master) or {}).get("commitIndex", 0) > start_index + 50,
        "the Java producer's sends committing",
        timeout_s=60,
    )
    group.kill(master)
    new_master = group.wait_master(other_than=master)
    driver.join(timeout=RUN_S + 150)
    assert transcript, "the driver printed no transcript"
    acked = transcript["acked"]
    gaps = [b["ms"] - a["ms"] for a, b in itertools.pairwise(acked)]
    log.warning(
        "Java producer: %d acknowledged, %d failed, longest gap %d ms",
        len(acked), transcript["failed"], max(gaps),
    )  # fmt: skip
    assert max(gaps) < 10_000, "the producer did not follow the new master in time"
    assert acked[-1]["ms"] > RUN_S * 1000 - 3_000, "sends stopped after the failover"
    address = group.replicas[new_master].address
    seen: set[tuple[int, int]] = set()
    for row in acked:
        position = (row["queueId"], row["offset"])
        assert position not in seen, f"two acknowledgements for {position}"
        seen.add(position)
        batch = group.admin.pull(address, TOPIC, row["queueId"], row["offset"], 1)
        assert batch.messages, position
        assert batch.messages[0].body == row["body"].encode()
