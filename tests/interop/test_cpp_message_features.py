"""RocketMQ's message features driven by the unmodified C++ client (PyPI `rocketmq==0.4.4`)
against `pocketmq up`: ordered sends and orderly consumption, tag filters, delay levels, and
retries ending in the dead-letter queue. (That client has no transactional producer, no SQL92
subscription and no timer messages.)
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.interop.test_cpp_client import ServerFactory, admin, create_topic, wait_until

pytestmark = pytest.mark.interop

# Retries come back after 1 s instead of RocketMQ's 10 s, 30 s, ... (send-back uses level 3+).
FAST_LEVELS = "1s 1s 1s 1s 1s 1s"


def _start_up(run_server: ServerFactory, work: Path, config: str | None = None) -> Any:
    args = ["up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(work / "up")]
    if config is not None:
        properties = work / "broker.properties"
        properties.write_text(config)
        args += ["-c", str(properties)]
    return run_server(*args, name="up")


def test_ordered_sends_are_consumed_in_order_per_key_across_two_orderly_consumers(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    keys, per_key = 40, 25
    up = _start_up(run_server, tmp_path)
    create_topic(up.address, "CppOrdered", 4)
    args = ["consume", up.address, "CG_CPP_ORDERLY", "CppOrdered", "*", "--orderly"]
    first = cpp("cpp_features.py", args)
    first.wait_for("started", 60)
    producer = cpp(
        "cpp_features.py",
        ["ordered", up.address, "CppOrdered", str(keys), str(per_key), "--pause-ms", "5"],
    )
    producer.wait_for("started", 60)
    # A second consumer joins mid-run, once the first is consuming: queues move between them
    # under locks.
    wait_until(lambda: len(first.messages()) >= 100, 60, "first deliveries", first, producer)
    second = cpp("cpp_features.py", args)
    second.wait_for("started", 60)
    assert producer.finish(timeout_s=120)["sent"] == keys * per_key
    expected = {f"k{k}-{s}" for k in range(keys) for s in range(per_key)}

    def seen() -> set[str]:
        return {line["body"] for c in (first, second) for line in c.messages()}

    wait_until(lambda: seen() >= expected, 120, "every ordered message", first, second)
    first.finish()
    second.finish()
    assert second.messages(), "the consumer that joined mid-run was given no queue"
    deliveries = sorted(
        (line for c in (first, second) for line in c.messages()), key=lambda d: d["received_at"]
    )
    sequences: dict[str, list[int]] = defaultdict(list)
    queues: dict[str, set[int]] = defaultdict(set)
    for line in deliveries:
        key, seq = line["body"].split("-")
        queues[key].add(line["queue_id"])
        if int(seq) not in sequences[key]:  # a redelivery after a move repeats, never skips
            sequences[key].append(int(seq))
    for key, sequence in sequences.items():
        assert sequence == list(range(per_key)), f"{key} out of order: {sequence}"
        assert len(queues[key]) == 1, f"{key} spread over queues {queues[key]}"


def test_a_tag_expression_delivers_exactly_the_matching_messages(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = _start_up(run_server, tmp_path)
    create_topic(up.address, "CppTags", 1)
    send = ["send", up.address, "CppTags", "90", "--tags", "TagA,TagB,TagC"]
    producer = cpp("cpp_features.py", send)
    assert producer.finish(timeout_s=120)["sent"] == 90
    marker = cpp("cpp_features.py", ["send", up.address, "CppTags", "1", "--tags", "TagEnd"])
    assert marker.finish(timeout_s=60)["sent"] == 1
    consumer = cpp(
        "cpp_features.py", ["consume", up.address, "CG_CPP_TAGS", "CppTags", "TagA || TagEnd"]
    )
    consumer.wait_for("started", 60)
    # One queue: the marker, stored last, is pulled after everything before it.
    wait_until(lambda: consumer.messages_by("tags")[-1:] != [] and any(
        line["tags"] == "TagEnd" for line in consumer.messages()
    ), 60, "the marker", consumer)  # fmt: skip
    consumer.finish()
    got = sorted(line["body"] for line in consumer.messages() if line["tags"] != "TagEnd")
    assert got == sorted(f"m-{i}" for i in range(0, 90, 3))
    assert {line["tags"] for line in consumer.messages()} == {"TagA", "TagEnd"}


def test_delay_levels_hold_messages_back_for_their_delay(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = _start_up(run_server, tmp_path)
    create_topic(up.address, "CppDelayed", 2)
    consumer = cpp("cpp_features.py", ["consume", up.address, "CG_CPP_DELAY", "CppDelayed", "*"])
    consumer.wait_for("started", 60)
    producer = cpp(
        "cpp_features.py", ["send", up.address, "CppDelayed", "20", "--delay-level", "2"]
    )
    assert producer.finish(timeout_s=120)["sent"] == 20
    sent_at = {f"m-{line['index']}": line["sent_at"] for line in producer.messages_by("msg_id")}
    wait_until(lambda: len(consumer.messages()) >= 20, 60, "20 delayed messages", consumer)
    consumer.finish()
    waited = {
        line["body"]: line["received_at"] - sent_at[line["body"]] for line in consumer.messages()
    }
    assert waited.keys() == sent_at.keys()
    # Level 2 is 5 s after the broker stored it, which is after the send began.
    too_early = {body: round(w, 3) for body, w in waited.items() if w < 5.0}
    assert not too_early, f"delivered before their delay: {too_early}"


def test_failed_deliveries_are_retried_then_dead_lettered_after_the_group_maximum(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = _start_up(run_server, tmp_path, f"messageDelayLevel={FAST_LEVELS}\n")
    create_topic(up.address, "CppRetry", 2)
    for group in ("CG_CPP_RETRY_ONCE", "CG_CPP_DEAD"):
        admin(up.address, "updateSubGroup", "-c", "DefaultCluster", "-g", group, "-r", "2")
    producer = cpp("cpp_features.py", ["send", up.address, "CppRetry", "5", "--tags", "T"])
    assert producer.finish(timeout_s=120)["sent"] == 5
    bodies = {f"m-{i}" for i in range(5)}
    once = cpp(
        "cpp_features.py",
        ["consume", up.address, "CG_CPP_RETRY_ONCE", "CppRetry", "*", "--fail-times", "1"],
    )
    dead = cpp(
        "cpp_features.py",
        ["consume", up.address, "CG_CPP_DEAD", "CppRetry", "*", "--fail-times", "100"],
    )

    def counts(consumer: Any) -> dict[str, list[int]]:
        found: dict[str, list[int]] = defaultdict(list)
        for line in consumer.messages():
            found[line["body"]].append(line["reconsume_times"])
        return found

    # The C++ listener hands a pulled batch back whole when one message fails, so a message
    # may reach the retry topic without being shown to the callback: count the last tries.
    wait_until(
        lambda: all(max(counts(once)[b], default=-1) == 1 for b in bodies), 90, "retries", once
    )

    # Past retryMaxTimes=2: the third try (reconsume count 2) fails, then the dead-letter queue.
    def dead_letters() -> list[dict[str, Any]]:  # [] until the DLQ topic exists
        listing = admin(up.address, "queryDlqMessages", "-g", "CG_CPP_DEAD", "--json")
        return json.loads(listing)

    wait_until(
        lambda: {" ".join(d["keys"]) for d in dead_letters()} >= bodies, 120, "dead letters", dead
    )
    # A marker sent now takes the same way, a delay step or more behind: a fourth try, or a
    # redelivery of a message that succeeded, would come back through the group's retry queue
    # before the marker's own retries. Its third try in one group, its second in the other:
    # whatever was on its way has arrived.
    send_marker = ["send", up.address, "CppRetry", "1", "--tags", "T", "--start", "5"]
    marker = cpp("cpp_features.py", send_marker)
    assert marker.finish(timeout_s=60)["sent"] == 1
    wait_until(lambda: 2 in counts(dead)["m-5"], 90, "the marker's third try", dead)
    wait_until(lambda: 1 in counts(once)["m-5"], 90, "the marker's retry", once)
    once.finish()
    dead.finish()
    assert {b: max(counts(once)[b]) for b in bodies} == dict.fromkeys(bodies, 1)
    assert max(r for b in bodies for r in counts(dead)[b]) <= 2, counts(dead)
    letters = [d for d in dead_letters() if " ".join(d["keys"]) in bodies]
    assert len(letters) == 5
    for letter in letters:
        # Three tries failed (counts 0, 1, 2): the dead letter records the third reconsume.
        assert (letter["originTopic"], letter["tags"]) == ("CppRetry", "T")
        assert letter["reconsumeTimes"] == 3
