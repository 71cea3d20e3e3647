"""A push listener that returns something other than None or a `ConsumeResult` is told so once
per consumer, and its messages come back later, as docs/consuming.md says."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest

from pocketmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from pocketmq.testing import wait_until
from pocketmq.testing.cluster import InProcessCluster, start_cluster

LISTENER_LOGGER = "pocketmq.client.consumer.listener"
# Retries (delay level 3 on) wait 1 s instead of 10 s, so a redelivery is seen quickly.
FAST_LEVELS = " ".join(["1s"] * 18)
MESSAGE_COUNT = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessCluster]:
    started = start_cluster(tmp_path_factory.mktemp("store"), message_delay_level=FAST_LEVELS)
    try:
        yield started
    finally:
        started.stop()


class WrongAnswers:
    """A listener that answers `answer` and records what it was given."""

    def __init__(self, answer: object) -> None:
        self.answer = answer
        self._lock = threading.Lock()
        self.deliveries: list[tuple[bytes, int]] = []

    def __call__(self, messages: list[MessageExt]) -> object:
        with self._lock:
            self.deliveries.extend((m.body, m.reconsume_times) for m in messages)
        return self.answer

    def redelivered(self) -> set[bytes]:
        with self._lock:
            return {body for body, times in self.deliveries if times >= 1}


@pytest.mark.parametrize(
    ("answer", "type_name"), [(("ok", 1), "tuple"), (True, "bool")], ids=["tuple", "true"]
)
def test_a_wrong_listener_answer_warns_once_and_redelivers(
    cluster: InProcessCluster,
    caplog: pytest.LogCaptureFixture,
    answer: object,
    type_name: str,
) -> None:
    caplog.set_level(logging.WARNING, logger=LISTENER_LOGGER)
    topic = group = f"WrongAnswer-{type_name}"
    bodies = {f"m{i}".encode() for i in range(MESSAGE_COUNT)}
    listener = WrongAnswers(answer)
    consumer = PushConsumer(
        group,
        namesrv=cluster.namesrv_addr,
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    )
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    with Producer("wrong-answer-producer", namesrv=cluster.namesrv_addr) as producer:
        for body in sorted(bodies):
            producer.send(Message(topic, body))
    with consumer:
        # Each message is delivered, answered wrongly, and delivered again: at least six calls.
        wait_until(lambda: listener.redelivered() >= bodies, "every message is redelivered")

    warnings = [r for r in caplog.records if r.name == LISTENER_LOGGER]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    [warning] = warnings
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    assert f"returned {type_name}" in text
    assert "WrongAnswers" in text  # the listener, by name
    assert group in text
    assert "ConsumeResult.SUCCESS" in text
    assert "RECONSUME_LATER" in text
