"""POP's state rebuilt from the revive log after a crash, on a real store in tmp_path.

The broker is abandoned without any shutdown step (as SIGKILL leaves it: what was appended is
in the files, the consumer offsets on disk are stale) and a new one recovers from the same
files. Then: nothing acked is handed out again, from the queue or by revive; every message not
acked comes back through the retry topic exactly once, also those revived before the crash.
Each mutant breaks one piece of the recovery and must be caught.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.pop import service as pop_service
from pocketmq.broker.pop.checkpoints import Checkpoint, MessageRef
from pocketmq.broker.pop.service import Popped, PopService, PopSettings
from pocketmq.broker.pull import MessageFilter
from pocketmq.broker.put_path import PutPath, PutSettings
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import decode_record
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import MessageToStore
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import small_config

TOPIC = "PopRecovery"
GROUP = "pop-recovery"
NOW = 1_700_000_000_000
INVISIBLE_MS = 10_000
T = TypeVar("T")


async def topics_updated(names: list[str]) -> None:
    """Nothing to save or register: the test's topics live in memory."""


class Broker:
    """A store and a POP service over it; `crash()` abandons it."""

    def __init__(
        self, root: Path, clock: ManualClock, offsets_on_disk: dict[str, Any] | None
    ) -> None:
        self.clock = clock
        self.store = MessageStore(small_config(root), clock=clock)
        self.store.load()
        self.topics = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
        self.topics.update(TopicConfig(TOPIC, 1, 1, 6), NOW)
        self.offsets = ConsumerOffsetTable()
        if offsets_on_disk is not None:
            self.offsets.load(offsets_on_disk)
        self.pop = PopService(
            self.store,
            PutPath(self.store, clock, PutSettings()),
            self.topics,
            self.offsets,
            clock,
            PopSettings(revive_queue_num=2),
            topics_updated,
        )
        asyncio.run(self.pop.ensure_revive_topic())
        self.pop.recover()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        async def go() -> T:
            result = await coroutine
            self.store.dispatch_now()
            return result

        return asyncio.run(go())

    def send(self, count: int) -> None:
        messages = [
            MessageToStore(
                topic=TOPIC, body=b"m%d" % i, properties=encode_properties({"UNIQ_KEY": f"id{i}"})
            )
            for i in range(count)
        ]
        for message in messages:
            assert self.store.put_messages_now([message]).ok
        self.store.dispatch_now()

    def pop_from(self, topic: str, count: int = 4) -> list[Popped]:
        return self.run(
            self.pop.pop_queue(
                GROUP,
                topic,
                0,
                count,
                INVISIBLE_MS,
                MessageFilter(),
                pop_time=self.clock.now_ms(),
                revive_qid=self.pop.next_revive_qid(),
            )
        )

    def ack(self, popped: Popped) -> None:
        ref = MessageRef(popped.checkpoint.key, popped.queue_offset)
        refused, failure = self.run(self.pop.ack([ref]))
        assert not refused
        assert failure is None

    def revive_due(self) -> None:
        for checkpoint in self.pop.due(self.clock.now_ms()):
            self.run(self.pop.revive(checkpoint))

    def everything(self) -> list[str]:
        """Pops the topic and the retry topic dry, acking all; the ids handed out."""
        got: list[str] = []
        for topic in (TOPIC, self.pop.retry_topic_of(GROUP, TOPIC)):
            if self.topics.get(topic) is None:
                continue
            while batch := self.pop_from(topic, 32):
                for popped in batch:
                    got.append(decode_record(popped.record).properties["UNIQ_KEY"])
                    self.ack(popped)
        return got


def life_and_crash(root: Path) -> tuple[list[str], list[str]]:
    """Returns (ids handed out after the crash, ids that should have been)."""
    clock = ManualClock(NOW)
    before = Broker(root, clock, None)
    before.send(12)
    offsets_on_disk = before.offsets.snapshot()  # saved before any pop: stale after it
    first = before.pop_from(TOPIC)  # id0-3: 0, 1 acked; 2, 3 left to revive before the crash
    before.ack(first[0])
    before.ack(first[1])
    second = before.pop_from(TOPIC)  # id4-7: 4 acked; 5, 6, 7 in flight at the crash
    before.ack(second[0])
    clock.advance(INVISIBLE_MS / 1000 + 1)
    before.revive_due()  # copies of id2, id3, id5, id6, id7 in the retry topic
    revived = before.pop_from(before.pop.retry_topic_of(GROUP, TOPIC), 32)
    before.ack(revived[0])
    third = before.pop_from(TOPIC)  # id8-11, none acked
    del before  # the crash: no shutdown step

    after = Broker(root, clock, offsets_on_disk)
    clock.advance(INVISIBLE_MS / 1000 + 1)
    after.revive_due()
    handed_out = after.everything()
    unacked = [decode_record(p.record).properties["UNIQ_KEY"] for p in revived[1:] + third]
    return sorted(handed_out), sorted(unacked)


def test_after_a_crash_every_unacked_message_comes_back_once_and_no_acked_one(
    tmp_path: Path,
) -> None:
    handed_out, expected = life_and_crash(tmp_path)
    assert handed_out == expected


def _ignore_acks(monkeypatch: pytest.MonkeyPatch) -> None:
    original = pop_service.parse_ack_record
    monkeypatch.setattr(pop_service, "parse_ack_record", lambda body: (original(body)[0], []))


def _forget_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pop_service, "_revived_ref", lambda *args: None)


def _keep_stale_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    original = Checkpoint.from_record.__func__  # type: ignore[attr-defined]

    def no_progress(cls: type[Checkpoint], body: bytes) -> Checkpoint:
        checkpoint = original(cls, body)
        checkpoint.next_offset = checkpoint.start_offset
        return checkpoint

    monkeypatch.setattr(Checkpoint, "from_record", classmethod(no_progress))


@pytest.mark.parametrize(
    "mutant", [_ignore_acks, _forget_copies, _keep_stale_offsets], ids=lambda m: m.__name__
)
def test_each_mutant_of_the_recovery_is_caught(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mutant: Callable[[pytest.MonkeyPatch], None],
) -> None:
    mutant(monkeypatch)
    handed_out, expected = life_and_crash(tmp_path)
    assert handed_out != expected


def test_the_retry_topic_is_saved_and_registered_before_a_revive_puts_into_it(
    tmp_path: Path,
) -> None:
    """As RocketMQ's revive does: a crash after the put must not leave copies in a topic the
    broker no longer knows (`topics_updated` journals it; the topic crash test proves that)."""
    broker = Broker(tmp_path, ManualClock(NOW), None)
    retry_topic = broker.pop.retry_topic_of(GROUP, TOPIC)
    seen: list[tuple[list[str], int]] = []

    async def recording(names: list[str]) -> None:
        seen.append((names, broker.store.get_max_offset_in_queue(retry_topic, 0)))

    broker.pop._topics_updated = recording
    broker.send(2)
    broker.pop_from(TOPIC)
    broker.clock.advance(INVISIBLE_MS / 1000 + 1)
    broker.revive_due()
    assert seen == [([retry_topic], 0)]
    assert broker.store.get_max_offset_in_queue(retry_topic, 0) == 2
