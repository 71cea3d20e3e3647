"""SQL92 and tag subscriptions deliver exactly the matching messages (`enablePropertyFilter`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pocketmq.client.aio import ConsumeFromWhere, Message, Producer, PushConsumer
from pocketmq.client.errors import SubscriptionError
from pocketmq.testing import MessageRecorder
from pocketmq.testing.cluster import start_cluster

TOPIC = "Filtered"
EXPRESSION = "amount > 5 AND region IN ('eu', 'us') AND NOT note IS NULL"


def _matches(i: int) -> bool:
    region = ("eu", "us", "apac")[i % 3]
    return i > 5 and region in ("eu", "us") and i % 4 != 0


# Matches both subscriptions; one goes to every queue after the messages under test.
MARKER = Message(
    TOPIC,
    b"marker",
    tags="odd",
    properties={"amount": "1000", "region": "eu", "note": "x", "marker": "yes"},
)


async def _consume(namesrv: str, group: str, expression: str, kind: str) -> list[int]:
    """The amounts a new group with this subscription is delivered, markers left out."""
    recorder = MessageRecorder()
    consumer = PushConsumer(
        group, namesrv=namesrv, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    )
    consumer.subscribe(TOPIC, expression, expression_type=kind)
    consumer.register_listener(recorder)
    async with consumer:
        async with Producer(f"{group}-markers", namesrv=namesrv) as producer:
            sent = {
                (await producer.send(MARKER, queue=queue)).msg_id
                for queue in await producer.publish_queues(TOPIC)
            }
        # Each queue is delivered in order: with its marker, the consumer has been handed
        # whatever it would get of the messages before it, wrongly matched ones too.
        await recorder.wait_for_ids(sent)
    return sorted(
        int(m.properties["amount"]) for m in recorder.messages if "marker" not in m.properties
    )


def test_sql92_and_tag_subscriptions_deliver_exactly_the_matches(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "store", enable_property_filter=True)
    try:

        async def scenario() -> None:
            namesrv = cluster.namesrv_addr
            async with Producer("filter-producer", namesrv=namesrv) as producer:
                for i in range(40):
                    properties = {"amount": str(i), "region": ("eu", "us", "apac")[i % 3]}
                    if i % 4:
                        properties["note"] = "x"
                    tags = "even" if i % 2 == 0 else "odd"
                    await producer.send(Message(TOPIC, b"m", tags=tags, properties=properties))
            expected = [i for i in range(40) if _matches(i)]
            assert await _consume(namesrv, "sql-group", EXPRESSION, "SQL92") == expected
            odd = [i for i in range(40) if i % 2]
            assert await _consume(namesrv, "tag-group", "odd", "TAG") == odd

        asyncio.run(scenario())
    finally:
        cluster.stop()


def test_a_bad_expression_is_refused_at_subscribe() -> None:
    consumer = PushConsumer("g", namesrv="127.0.0.1:1")
    with pytest.raises(SubscriptionError, match="position"):
        consumer.subscribe(TOPIC, "amount >", expression_type="SQL92")
