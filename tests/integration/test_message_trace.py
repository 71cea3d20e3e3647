"""Message trace end to end: a traced producer and push consumer write trace records to
`RMQ_SYS_TRACE_TOPIC`, and `pocketmq admin queryMsgTraceById` (a subprocess, as a user runs
it) finds and prints them as mqadmin does: one Pub row with the producer group, one Sub row
(a SubAfter record) with the consumer group.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pocketmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from pocketmq.testing import ServerProcess, wait_until

ServerFactory = Callable[..., ServerProcess]
CLI_TIMEOUT_S = 30
TRACE_WAIT_S = 30.0
PRODUCER_GROUP = "TraceProducerGroup"
CONSUMER_GROUP = "TraceConsumerGroup"
TOPIC = "TracedOrders"


def trace_view(namesrv: str, msg_id: str) -> str:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pocketmq.cli.main",
            "admin",
            "queryMsgTraceById",
            "-i",
            msg_id,
            "-n",
            namesrv,
        ],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def rows(text: str, kind: str) -> list[list[str]]:
    """The data rows of one kind ("Pub" or "Sub"), split into mqadmin's six columns."""
    found = []
    for line in text.splitlines():
        if not line.startswith(kind + " "):
            continue
        # The time column holds a space: "yyyy-MM-dd HH:mm:ss".
        match = re.fullmatch(
            r"(\S+)\s+(\S+)\s+(\S+)\s+(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\s+(\S+)\s+(\S+)\s*", line
        )
        assert match is not None, f"not a trace row: {line!r}"
        found.append(list(match.groups()))
    return found


class Recorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ids: set[str] = set()

    def __call__(self, messages: list[MessageExt]) -> None:
        with self._lock:
            self.ids.update(m.msg_id for m in messages)

    def has(self, msg_id: str) -> bool:
        with self._lock:
            return msg_id in self.ids


@pytest.fixture
def namesrv(run_server: ServerFactory, tmp_path: Path) -> str:
    """A NameServer and a broker from `pocketmq up`; the NameServer address."""
    up = run_server(
        "up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(tmp_path / "up")
    )
    return up.address


def test_traced_send_and_consume_show_in_query_msg_trace_by_id(namesrv: str) -> None:
    recorder = Recorder()
    consumer = PushConsumer(
        CONSUMER_GROUP,
        namesrv=namesrv,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        enable_msg_trace=True,
    )
    consumer.subscribe(TOPIC)
    consumer.register_listener(recorder)
    with Producer(PRODUCER_GROUP, namesrv=namesrv, enable_msg_trace=True) as producer:
        result = producer.send(Message(TOPIC, b"traced", tags="created", keys="order-1"))
    msg_id = result.msg_id
    with consumer:
        wait_until(lambda: recorder.has(msg_id), "the traced message is consumed")
    # Both clients are closed: their trace records were flushed to the trace topic.

    def both_rows() -> str | None:
        text = trace_view(namesrv, msg_id)
        return text if rows(text, "Pub") and rows(text, "Sub") else None

    text = wait_until(
        both_rows,
        f"queryMsgTraceById shows a Pub and a Sub row for {msg_id}",
        timeout_s=TRACE_WAIT_S,
        poll_s=0.5,
        describe=lambda: trace_view(namesrv, msg_id),
    )
    [pub] = rows(text, "Pub")
    [sub] = rows(text, "Sub")
    assert pub[1] == PRODUCER_GROUP
    assert sub[1] == CONSUMER_GROUP
    for row in (pub, sub):
        assert re.fullmatch(r"\d+ms", row[4]), row
        assert row[5] == "success", row
        assert re.fullmatch(r"\d+\.\d+\.\d+\.\d+", row[2]), row  # the client's IP
    assert "#ProducerGroup" in text
    assert "#ConsumerGroup" in text


def test_untraced_message_has_no_trace(namesrv: str) -> None:
    with Producer(PRODUCER_GROUP, namesrv=namesrv, enable_msg_trace=True) as traced:
        marker = traced.send(Message(TOPIC, b"traced marker"))
    with Producer("UntracedProducerGroup", namesrv=namesrv) as untraced:
        quiet = untraced.send(Message(TOPIC, b"not traced", keys="order-2"))
    # Once the traced send's record is findable, the trace topic has been written and indexed.
    wait_until(
        lambda: rows(trace_view(namesrv, marker.msg_id), "Pub"),
        "the traced send's Pub row",
        timeout_s=TRACE_WAIT_S,
        poll_s=0.5,
    )
    assert trace_view(namesrv, quiet.msg_id) == ""
