"""pocketmq's client and the unmodified RocketMQ C++ client (PyPI `rocketmq==0.4.4`), both ways:
what one produces the other consumes, with keys, tags, properties and bodies intact.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from pocketmq.client.aio import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from tests.interop.cpp_harness import MessagesMissingError
from tests.interop.test_cpp_client import ServerFactory, create_topic

pytestmark = pytest.mark.interop

PROPERTIES = ("index", "origin", "note")


def _start_up(run_server: ServerFactory, work: Path) -> Any:
    return run_server(
        "up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(work / "up"),
        name="up",
    )  # fmt: skip


def _our_messages(count: int) -> list[Message]:
    messages = []
    for i in range(count):
        # Every 50th body is large and repetitive: our producer sends it zlib-compressed.
        body = (f"large-{i}-" * 1000).encode() if i % 50 == 0 else f"body-{i}-é✓".encode()
        messages.append(
            Message(
                "FromPocketmq",
                body,
                tags=f"Tag{i % 3}",
                keys=[f"key-{i}", f"order-{i // 10}"],
                properties={"index": str(i), "origin": "pocketmq", "note": f"n{i % 7}"},
            )
        )
    return messages


def test_cpp_push_consumer_gets_what_pocketmq_produces(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = _start_up(run_server, tmp_path)
    create_topic(up.address, "FromPocketmq", 4)
    messages = _our_messages(300)
    batch = [
        Message("FromPocketmq", f"batch-{i}".encode(), tags="TagBatch", keys=f"b{i}")
        for i in range(20)
    ]

    async def produce() -> dict[str, Message]:
        sent = {}
        async with Producer("PID_OURS", namesrv=up.address) as producer:
            for message in messages:
                sent[(await producer.send(message)).msg_id] = message
            result = await producer.send_batch(batch)
            sent.update(zip(result.msg_id.split(","), batch, strict=True))
        return sent

    sent = asyncio.run(produce())
    consumer = cpp(
        "cpp_peer.py",
        [
            "consume",
            up.address,
            "CG_CPP_READS_OURS",
            "FromPocketmq",
            str(len(sent)),
            "120",
            *PROPERTIES,
        ],
    )
    consumer.wait_for("started", 60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if {line["msg_id"] for line in consumer.messages_by("msg_id")} >= sent.keys():
            break
        time.sleep(0.2)
    got = {line["msg_id"]: line for line in consumer.messages_by("msg_id")}
    missing = sent.keys() - got.keys()
    if missing:
        raise MessagesMissingError(f"{len(missing)} of {len(sent)} not delivered to C++")
    consumer.finish()
    for msg_id, message in sent.items():
        line = got[msg_id]
        assert bytes.fromhex(line["body_hex"]) == message.body, msg_id
        assert line["tags"] == message.tags
        assert line["keys"] == (message.keys_text or "")
        for name in PROPERTIES:
            assert line["properties"][name] == message.properties.get(name, ""), name


class _Received:
    def __init__(self, expected: int) -> None:
        self.messages: dict[str, MessageExt] = {}
        self.expected = expected
        self.complete = asyncio.Event()

    async def __call__(self, messages: list[MessageExt]) -> None:
        for message in messages:
            self.messages[message.msg_id] = message
        if len(self.messages) >= self.expected:
            self.complete.set()


def test_pocketmq_push_consumer_gets_what_cpp_produces_singly_and_in_a_batch(
    run_server: ServerFactory, cpp: Any, tmp_path: Path
) -> None:
    up = _start_up(run_server, tmp_path)
    create_topic(up.address, "FromCpp", 4)
    producer = cpp("cpp_produce.py", [up.address, "FromCpp", "300", "--size", "700"])
    summary = producer.finish(timeout_s=120)
    assert (summary["sent"], summary["failed"]) == (300, 0)
    singles = {line["msg_id"]: line["index"] for line in producer.lines if "msg_id" in line}
    batcher = cpp("cpp_peer.py", ["batch", up.address, "FromCpp", "25"])
    assert batcher.finish(timeout_s=60)["status"] == 0

    async def consume() -> _Received:
        received = _Received(325)
        consumer = PushConsumer(
            "CG_OURS_READS_CPP",
            namesrv=up.address,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
        )
        consumer.subscribe("FromCpp")
        consumer.register_listener(received)
        async with consumer:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(received.complete.wait(), 60)
        return received

    received = asyncio.run(consume()).messages
    assert len(received) == 325
    by_index = {m.properties["index"]: m for m in received.values() if m.tags != "TagBatch"}
    for msg_id, index in singles.items():
        message = received[msg_id]  # the id the C++ send result reported
        assert message is by_index[str(index)]
        assert message.body == f"body-{index}".ljust(700, "x").encode()
        assert message.keys == [f"key-{index}"]
        assert message.tags == ("TagA" if index % 2 else "TagB")
    batch = sorted(
        (m for m in received.values() if m.tags == "TagBatch"), key=lambda m: m.queue_offset
    )
    assert [m.body for m in batch] == [f"batch-body-{i}".encode() for i in range(25)]
    assert [m.keys for m in batch] == [[f"batch-{i}"] for i in range(25)]
    assert len({m.queue for m in batch}) == 1, "a batch lands in one queue"
