"""The client's behaviour, run once through the asyncio API and once through the blocking one.

Each scenario is written once against a thin driver: `AioApi` awaits the asyncio clients,
`BlockingApi` runs the blocking clients' calls on worker threads (as a threaded program
would). Both talk to a real NameServer and broker on loopback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import inspect
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pocketmq.client as blocking
import pocketmq.client.aio as aio
from pocketmq.client import (
    ClientConfigError,
    ConnectionFailedError,
    Message,
    MessageError,
    MessageExt,
    MessageModel,
    SendStatus,
)
from pocketmq.client.admin import TopicSettings
from pocketmq.testing import MessageRecorder, async_wait_until, started, wait_until
from pocketmq.testing.cluster import InProcessCluster, start_cluster

MARKER = b"marker"


class _Proxy:
    """Every method of the wrapped client becomes a coroutine, whatever the API."""

    def __init__(self, target: Any, run: Callable[..., Any]) -> None:
        self.target = target
        self._run = run

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.target, name)
        if not callable(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._run(attribute, *args, **kwargs)

        return call


async def _await_if_needed(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    result = function(*args, **kwargs)
    return await result if inspect.iscoroutine(result) else result


class AioApi:
    name = "aio"

    def producer(self, **options: Any) -> _Proxy:
        return _Proxy(aio.Producer(**options), _await_if_needed)

    def push_consumer(self, group: str, **options: Any) -> _Proxy:
        return _Proxy(aio.PushConsumer(group, **options), _await_if_needed)

    def lite_pull_consumer(self, group: str, **options: Any) -> _Proxy:
        return _Proxy(aio.LitePullConsumer(group, **options), _await_if_needed)

    def admin(self, namesrv: str) -> _Proxy:
        return _Proxy(aio.Admin([namesrv]), _await_if_needed)


class BlockingApi:
    name = "blocking"

    def producer(self, **options: Any) -> _Proxy:
        return _Proxy(blocking.Producer(**options), asyncio.to_thread)

    def push_consumer(self, group: str, **options: Any) -> _Proxy:
        return _Proxy(blocking.PushConsumer(group, **options), asyncio.to_thread)

    def lite_pull_consumer(self, group: str, **options: Any) -> _Proxy:
        return _Proxy(blocking.LitePullConsumer(group, **options), asyncio.to_thread)

    def admin(self, namesrv: str) -> _Proxy:
        return _Proxy(blocking.Admin([namesrv]), asyncio.to_thread)


@pytest.fixture(params=[AioApi, BlockingApi], ids=["aio", "blocking"])
def api(request: pytest.FixtureRequest) -> Any:
    return request.param()


def without_markers(recorder: MessageRecorder) -> list[MessageExt]:
    return [m for m in recorder.messages if m.body != MARKER]


async def send_markers(producer: Any, topic: str, tags: str | None = None) -> set[str]:
    """Sends a marker to every queue of `topic`; returns their message ids.

    A queue is delivered in order: once a consumer has every marker, it has been handed
    whatever it would get of the messages stored before them. Waiting for the markers is the
    positive signal before checking that something did not arrive.
    """
    return {
        (await producer.send(Message(topic, MARKER, tags=tags), queue=queue)).msg_id
        for queue in await producer.publish_queues(topic)
    }


async def _consumer(
    api: Any,
    namesrv: str,
    group: str,
    topic: str,
    listener: MessageRecorder,
    expression: str = "*",
    **options: Any,
) -> _Proxy:
    consumer = api.push_consumer(group, namesrv=namesrv, **options)
    await consumer.subscribe(topic, expression)
    await consumer.register_listener(listener)
    await consumer.start()
    return consumer


async def _result(outcome: Any) -> Any:
    """The result of a send_async future of either API."""
    if isinstance(outcome, concurrent.futures.Future):
        return await asyncio.wrap_future(outcome)
    return await outcome


def _run(scenario: Any) -> None:
    asyncio.run(asyncio.wait_for(scenario, 60))


def test_messages_arrive_with_keys_tags_properties_and_bodies_intact(
    api: Any, pocketmq_cluster: InProcessCluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        sent = {}
        async with started(producer):
            await producer.send(Message("Intact", b"warm-up creates the topic"))
            collector = MessageRecorder()
            consumer = await _consumer(api, namesrv, "g-intact", "Intact", collector)
            try:
                for i in range(20):
                    body = bytes([i]) * (10_000 if i % 5 == 0 else 100 + i)  # some compressed
                    message = Message(
                        "Intact",
                        body,
                        tags=f"tag{i % 3}",
                        keys=[f"k{i}", f"order-{i}"],
                        properties={"n": str(i), "utf": "é✓"},
                    )
                    result = await producer.send(message)
                    assert result.status is SendStatus.SEND_OK
                    sent[result.msg_id] = message
                await collector.wait_for(len(sent) + 1)
            finally:
                await consumer.close()
        got = {m.msg_id: m for m in collector.messages}
        for msg_id, message in sent.items():
            received = got[msg_id]
            assert received.body == message.body
            assert received.tags == message.tags
            assert received.keys == message.keys
            assert received.user_properties == message.properties
            assert received.topic == "Intact"

    _run(scenario())


def test_tag_expression_selects_messages(api: Any, pocketmq_cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        async with started(producer):
            await producer.send(Message("Tags", b"x", tags="warm"))
            collector = MessageRecorder()
            consumer = await _consumer(api, namesrv, "g-tags", "Tags", collector, "a || b")
            try:
                for tag in ["a", "b", "c", "a", None, "bb"]:
                    await producer.send(Message("Tags", tag.encode() if tag else b"-", tags=tag))
                await collector.wait_for_ids(await send_markers(producer, "Tags", tags="a"))
            finally:
                await consumer.close()
        assert sorted(m.tags or "" for m in without_markers(collector)) == ["a", "a", "b"]

    _run(scenario())


def test_batch_ordered_async_and_oneway_sends_are_all_consumed(
    api: Any, pocketmq_cluster: InProcessCluster
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        async with started(producer):
            await producer.send(Message("Mixed", b"warm"))
            collector = MessageRecorder()
            consumer = await _consumer(api, namesrv, "g-mixed", "Mixed", collector)
            try:
                batch = await producer.send_batch([Message("Mixed", b"b%d" % i) for i in range(5)])
                assert len(batch.msg_id.split(",")) == 5
                queues = {
                    (await producer.send_orderly(Message("Mixed", b"o%d" % i), "key-7")).queue
                    for i in range(5)
                }
                assert len(queues) == 1, "one sharding key, one queue"
                futures = [
                    await producer.send_async(Message("Mixed", b"a%d" % i)) for i in range(5)
                ]
                for future in futures:
                    result = await _result(future)
                    assert result.status is SendStatus.SEND_OK
                await producer.send_oneway(Message("Mixed", b"oneway"))
                await collector.wait_for(1 + 5 + 5 + 5 + 1)
            finally:
                await consumer.close()
        bodies = sorted(m.body for m in collector.messages)
        assert b"oneway" in bodies
        assert [m.queue_offset for m in collector.messages if m.body.startswith(b"b")] == sorted(
            m.queue_offset for m in collector.messages if m.body.startswith(b"b")
        )

    _run(scenario())


def test_failed_listener_gets_the_message_again_through_the_retry_topic(
    api: Any, tmp_path: Path
) -> None:
    # Short delay levels: the retries wait 300 and 400 ms instead of 10 and 30 s.
    cluster = start_cluster(
        tmp_path / "store", message_delay_level=" ".join(f"{100 * n}ms" for n in range(1, 19))
    )

    async def scenario() -> None:
        namesrv = cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        async with started(producer):
            await producer.send(Message("Redeliver", b"warm"))
            collector = MessageRecorder(fail_first=2)
            consumer = await _consumer(api, namesrv, "g-redeliver", "Redeliver", collector)
            try:
                await collector.wait_for(1)
            finally:
                await consumer.close()
        assert collector.calls == 3
        assert collector.messages[0].reconsume_times == 2
        assert collector.messages[0].topic == "Redeliver"

    try:
        _run(scenario())
    finally:
        cluster.stop()


def test_broadcasting_consumers_each_get_every_message(
    api: Any, pocketmq_cluster: InProcessCluster, tmp_path: Path
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        collectors = [MessageRecorder(), MessageRecorder()]
        async with started(producer):
            await producer.send(Message("Broadcast", b"warm"))
            consumers = [
                await _consumer(
                    api,
                    namesrv,
                    "g-broadcast",
                    "Broadcast",
                    collector,
                    message_model=MessageModel.BROADCASTING,
                    offset_store_dir=tmp_path / f"offsets-{i}",
                    consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                )
                for i, collector in enumerate(collectors)
            ]
            try:
                for i in range(10):
                    await producer.send(Message("Broadcast", b"m%d" % i))
                for collector in collectors:
                    await collector.wait_for(11)
            finally:
                for consumer in consumers:
                    await consumer.close()
        assert collectors[0].ids() == collectors[1].ids()
        assert len(list((tmp_path / "offsets-0").rglob("offsets.json"))) == 1

    _run(scenario())


def test_offsets_committed_at_close_are_where_the_next_consumer_starts(
    api: Any, pocketmq_cluster: InProcessCluster
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        async with started(producer):
            await producer.send(Message("Resume", b"first"))
            first = MessageRecorder()
            consumer = await _consumer(api, namesrv, "g-resume", "Resume", first)
            await first.wait_for(1)
            await consumer.close()
            for i in range(5):
                await producer.send(Message("Resume", b"later%d" % i))
            second = MessageRecorder()
            consumer = await _consumer(api, namesrv, "g-resume", "Resume", second)
            try:
                await second.wait_for_ids(await send_markers(producer, "Resume"))
            finally:
                await consumer.close()
        assert sorted(m.body for m in without_markers(second)) == [b"later%d" % i for i in range(5)]

    _run(scenario())


def test_auto_batching_gives_each_message_its_own_result(
    api: Any, pocketmq_cluster: InProcessCluster
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv, auto_batch=True, batch_linger_ms=20)
        async with started(producer):
            futures = [
                await producer.send_async(Message("AutoBatch", b"m%d" % i)) for i in range(50)
            ]
            results = [await _result(f) for f in futures]
        assert len({r.msg_id for r in results}) == 50
        offsets = sorted((r.queue.queue_id, r.queue_offset) for r in results)
        assert len(set(offsets)) == 50, "each message has its own queue offset"

    _run(scenario())


def test_auto_batching_without_a_linger_sends_one_turns_sends_as_one_batch(
    pocketmq_cluster: InProcessCluster,
) -> None:
    """`batch_linger_ms=0` adds no wait, and still batches: the sends made in one turn of the
    event loop go as one request (one queue, consecutive offsets)."""

    async def scenario() -> None:
        producer = aio.Producer(
            "p", namesrv=pocketmq_cluster.namesrv_addr, auto_batch=True, batch_linger_ms=0
        )
        async with started(producer):
            await producer.send(Message("NoLinger", b"route"))
            results = await asyncio.gather(
                *[producer.send_async(Message("NoLinger", b"m%d" % i)) for i in range(20)]
            )
        assert len({r.queue.queue_id for r in results}) == 1
        offsets = [r.queue_offset for r in results]
        assert offsets == list(range(offsets[0], offsets[0] + 20))

    _run(scenario())


def test_closing_the_producer_sends_and_settles_what_its_batcher_holds(
    pocketmq_cluster: InProcessCluster,
) -> None:
    """`close` sends what the batcher still buffers and waits for the answers: every future it
    handed out is settled with its own result, though none was awaited before."""

    async def scenario() -> None:
        producer = aio.Producer(
            "p", namesrv=pocketmq_cluster.namesrv_addr, auto_batch=True, batch_linger_ms=600_000
        )
        async with started(producer):
            futures = [producer.send_async(Message("CloseFlush", b"m%d" % i)) for i in range(20)]
            assert not any(future.done() for future in futures)
        assert all(future.done() for future in futures)
        results = [future.result() for future in futures]
        assert len({(r.queue.queue_id, r.queue_offset) for r in results}) == 20

    _run(scenario())


def test_bad_input_fails_before_the_network_with_a_clear_error(
    api: Any, pocketmq_cluster: InProcessCluster
) -> None:
    async def scenario() -> None:
        producer = api.producer(
            group="p", namesrv=pocketmq_cluster.namesrv_addr, max_message_bytes=1024
        )
        async with started(producer):
            with pytest.raises(MessageError, match="over the 1024-byte limit"):
                await producer.send(Message("Fine", b"x" * 2000))
            with pytest.raises(MessageError, match="illegal characters"):
                await producer.send(Message("bad topic!", b"x"))
            with pytest.raises(MessageError, match="body is empty"):
                await producer.send(Message("Fine", b""))
            with pytest.raises(MessageError, match="use the Message fields"):
                await producer.send(Message("Fine", b"x", properties={"TAGS": "t"}))

    _run(scenario())


def test_no_nameserver_is_a_clear_error(api: Any) -> None:
    async def scenario() -> None:
        producer = api.producer(group="p", namesrv="127.0.0.1:1", send_timeout_s=1.0)
        async with started(producer):
            with pytest.raises(ConnectionFailedError, match="no NameServer answers"):
                await producer.send(Message("Nowhere", b"x"))
        with pytest.raises(ClientConfigError, match="no NameServer"):
            api.producer(group="p")

    _run(scenario())


def test_consume_from_timestamp_starts_at_that_time(
    api: Any, pocketmq_cluster: InProcessCluster
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        async with started(producer):
            for i in range(4):
                await producer.send(Message("Since", b"old%d" % i))
            await asyncio.sleep(0.05)  # store timestamps have millisecond resolution
            since_ms = time.time_ns() // 1_000_000
            await asyncio.sleep(0.05)
            for i in range(4):
                await producer.send(Message("Since", b"new%d" % i))
            collector = MessageRecorder()
            consumer = await _consumer(
                api,
                namesrv,
                "g-since",
                "Since",
                collector,
                consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_TIMESTAMP,
                consume_timestamp_ms=since_ms,
            )
            try:
                await collector.wait_for_ids(await send_markers(producer, "Since"))
            finally:
                await consumer.close()
        assert sorted(m.body for m in without_markers(collector)) == [
            b"new%d" % i for i in range(4)
        ]

    _run(scenario())


def test_lite_pull_polls_seeks_and_commits(api: Any, pocketmq_cluster: InProcessCluster) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        producer = api.producer(group="p", namesrv=namesrv)
        async with started(producer):
            sent = [
                (await producer.send(Message("Polled", b"m%d" % i, keys=f"k{i}"))).msg_id
                for i in range(12)
            ]
        consumer = api.lite_pull_consumer(
            "g-polled",
            namesrv=namesrv,
            auto_commit=False,
            consume_from_where=aio.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        await consumer.subscribe("Polled")
        async with started(consumer):
            got: list[MessageExt] = []

            async def polled_all() -> bool:
                got.extend(await consumer.poll(0.5))
                return len(got) >= len(sent)

            await async_wait_until(polled_all, f"{len(sent)} messages polled")
            assert sorted(m.msg_id for m in got) == sorted(sent)
            queue = got[0].queue
            first = min(m.queue_offset for m in got if m.queue == queue)
            await consumer.seek(queue, first)
            again = await consumer.poll(5.0)
            assert [(m.queue, m.queue_offset) for m in again[:1]] == [(queue, first)]
            await consumer.commit({queue: first + 1})
            assert await consumer.committed(queue) == first + 1

    _run(scenario())


def test_admin_creates_a_topic_and_reports_progress(
    api: Any, pocketmq_cluster: InProcessCluster
) -> None:
    async def scenario() -> None:
        namesrv = pocketmq_cluster.namesrv_addr
        admin = api.admin(namesrv)
        try:
            await admin.create_topic(TopicSettings("Managed", 3, 3), cluster="DefaultCluster")
            assert await admin.wait_for_route("Managed")
            route = await admin.topic_route("Managed")
            assert [q.write_queue_nums for q in route.queue_datas] == [3]
            assert "Managed" in await admin.topic_list()
            producer = api.producer(group="p", namesrv=namesrv)
            async with started(producer):
                for i in range(6):
                    await producer.send(Message("Managed", b"m%d" % i))
            stats = await admin.topic_stats("Managed")
            assert sum(q.max_offset for q in stats.queues) == 6
        finally:
            await admin.close()

    _run(scenario())


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
def test_blocking_clients_give_their_descriptors_back_when_closed(
    pocketmq_cluster: InProcessCluster,
) -> None:
    """A program that makes and closes a blocking client per job (a web handler, a cron task)
    must not run out of descriptors: each client's event loop (selector, wake-up pipe, with
    uvloop io_uring and eventfd) and connections go with `close()`, not with the collector,
    and a client that could not be made or started leaves none behind."""
    namesrv = pocketmq_cluster.namesrv_addr

    def one_round(sends: int = 1) -> None:
        with blocking.Producer("fd-producer", namesrv=namesrv) as producer:
            for _ in range(sends):
                producer.send(Message("FdTopic", b"x"))
        with blocking.Admin([namesrv]) as admin:
            admin.topic_route("FdTopic")
        # Nor when making or starting one fails.
        with pytest.raises(ClientConfigError, match="no NameServer"):
            blocking.Producer("fd-producer")
        with (
            pytest.raises(ClientConfigError, match="register_listener"),
            blocking.PushConsumer("fd-consumer", namesrv=namesrv),
        ):
            pass

    gc.disable()  # what is released must be released by `close()`, not collected meanwhile
    try:
        one_round(sends=16)  # every queue gets its file in the broker (this process) now
        before = _open_descriptors()
        for _ in range(5):
            one_round()
        # The in-process broker closes its side of each connection once it reads the close.
        wait_until(
            lambda: _open_descriptors() <= before,
            "the closed clients' descriptors released",
            timeout_s=5,
            describe=lambda: f"{_open_descriptors() - before} more open than before them",
        )
    finally:
        gc.enable()
