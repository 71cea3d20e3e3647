"""The hand-off of a queue between two consumers of a group, and the order of offset commits.

A fake broker keeps queue locks and committed offsets: the new owner takes a queue only once
the old one committed and unlocked it (or after the wait, when the old one never does), and a
consumer's commits reach the broker in the order it made them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

import pytest

from pocketmq.client.consumer.offset_store import RemoteOffsetStore
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.queue_locks import QueueHandoff
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import RequestCode, ResponseCode

GROUP = "handoff-group"
QUEUE = MessageQueue("TopicTest", "broker-a", 0)
OTHER = MessageQueue("TopicTest", "broker-a", 1)


@dataclass
class FakeBroker:
    """Queue locks by (topic, queue id), and committed offsets, as one broker keeps them."""

    locks: dict[tuple[str, int], str] = field(default_factory=dict)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    commits: list[int] = field(default_factory=list)
    commit_gate: asyncio.Event | None = None
    """When set, the first commit waits for it before it lands (a slow connection)."""
    _held_one: bool = False

    async def handle(
        self, client_id: str, code: int, ext: Mapping[str, str] | None, body: bytes
    ) -> Any:
        if code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
            request = json.loads(body)
            assert request["clientId"] == client_id
            assert request["consumerGroup"] == GROUP
            granted = []
            for item in request["mqSet"]:
                key = (item["topic"], item["queueId"])
                if code == RequestCode.UNLOCK_BATCH_MQ:
                    if self.locks.get(key) == client_id:
                        del self.locks[key]
                elif self.locks.setdefault(key, client_id) == client_id:
                    granted.append(item)
            answer = json.dumps({"lockOKMQSet": granted}).encode()
            return SimpleNamespace(code=ResponseCode.SUCCESS, body=answer, remark="")
        assert ext is not None
        key = (ext["topic"], int(ext["queueId"]))
        if code == RequestCode.UPDATE_CONSUMER_OFFSET:
            if self.commit_gate is not None and not self._held_one:
                self._held_one = True
                await self.commit_gate.wait()
            self.offsets[key] = int(ext["commitOffset"])
            self.commits.append(int(ext["commitOffset"]))
            return SimpleNamespace(code=ResponseCode.SUCCESS, ext_fields={}, remark="")
        assert code == RequestCode.QUERY_CONSUMER_OFFSET
        if key not in self.offsets:
            return SimpleNamespace(code=ResponseCode.QUERY_NOT_FOUND, ext_fields={}, remark="")
        offset = str(self.offsets[key])
        return SimpleNamespace(code=ResponseCode.SUCCESS, ext_fields={"offset": offset}, remark="")


class FakeInstance:
    """What the hand-off and the offset store use of a `ClientInstance`."""

    def __init__(self, client_id: str, broker: FakeBroker) -> None:
        self.client_id = client_id
        self._broker = broker
        self.routes = SimpleNamespace(
            master_address=lambda name: "127.0.0.1:10911",
            any_address=lambda name: "127.0.0.1:10911",
        )

    async def invoke(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        **_: Any,
    ) -> Any:
        await asyncio.sleep(0)  # a round trip: other tasks run meanwhile
        return await self._broker.handle(self.client_id, code, ext_fields, body)


def _client(client_id: str, broker: FakeBroker) -> ClientInstance:
    return cast(ClientInstance, FakeInstance(client_id, broker))


def _handoff(instance: ClientInstance, wait_s: float = 5.0) -> QueueHandoff:
    return QueueHandoff(instance, GROUP, renew_interval_s=20.0, wait_s=wait_s)


def test_the_next_owner_starts_where_the_previous_one_committed() -> None:
    async def scenario() -> tuple[int, float]:
        broker = FakeBroker()
        old, new = _client("10.0.0.1@old", broker), _client("10.0.0.2@new", broker)
        old_offsets = RemoteOffsetStore(old, GROUP)
        old_locks = _handoff(old)
        await old_locks.take([QUEUE, OTHER])
        await old_offsets.persist([QUEUE])  # nothing in memory yet: nothing is sent
        assert broker.offsets == {}

        async def old_gives_up() -> None:
            await asyncio.sleep(0.1)  # still consuming when the new owner asks
            process_queue = ProcessQueue(0)
            process_queue.next_offset = 640  # consumed up to here
            old_offsets.update(QUEUE, process_queue.commit_offset())
            await old_offsets.persist([QUEUE])
            await old_locks.release([QUEUE])

        loop = asyncio.get_running_loop()
        started = loop.time()
        giving_up = loop.create_task(old_gives_up())
        await _handoff(new).take([QUEUE])
        waited = loop.time() - started
        start = await RemoteOffsetStore(new, GROUP).read(QUEUE)
        await giving_up
        return start, waited

    start, waited = asyncio.run(scenario())
    assert start == 640
    assert 0.1 <= waited < 1.0


def test_a_queue_whose_owner_never_unlocks_is_taken_after_the_wait(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> float:
        broker = FakeBroker()
        await _handoff(_client("10.0.0.1@gone", broker)).take([QUEUE])
        loop = asyncio.get_running_loop()
        started = loop.time()
        await _handoff(_client("10.0.0.2@new", broker), wait_s=0.2).take([QUEUE, OTHER])
        return loop.time() - started

    waited = asyncio.run(scenario())
    assert 0.2 <= waited < 1.0
    assert "taken anyway" in caplog.text


def test_commits_reach_the_broker_in_the_order_they_were_made() -> None:
    async def scenario() -> tuple[list[int], dict[tuple[str, int], int]]:
        broker = FakeBroker(commit_gate=asyncio.Event())
        assert broker.commit_gate is not None
        offsets = RemoteOffsetStore(_client("10.0.0.1@c1", broker), GROUP)
        offsets.update(QUEUE, 100)
        periodic = asyncio.get_running_loop().create_task(offsets.persist([QUEUE]))
        await asyncio.sleep(0.01)  # the periodic round is on its way with 100
        offsets.update(QUEUE, 250)  # the queue is given up: its final offset
        final = asyncio.get_running_loop().create_task(offsets.persist([QUEUE]))
        await asyncio.sleep(0.01)
        broker.commit_gate.set()
        await asyncio.gather(periodic, final)
        return broker.commits, broker.offsets

    commits, offsets = asyncio.run(scenario())
    assert commits == [100, 250]
    assert offsets[(QUEUE.topic, QUEUE.queue_id)] == 250
