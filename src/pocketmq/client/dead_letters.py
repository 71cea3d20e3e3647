"""Dead letters: list what a consumer group gave up on (`%DLQ%<group>`) and send it back.

RocketMQ keeps failed messages in the group's dead-letter topic and has no built-in way back.
`redrive` re-sends selected dead letters to the topic they were first sent to (RETRY_TOPIC),
with their body, tags, keys and user properties, plus `REDRIVEN_FROM` naming the dead letter,
at a bounded rate, with a dry run, and yields one result per message so an operator sees
exactly what happened. Reading does not commit anything: a second run sees the same dead
letters again (each result carries its queue offset; start after the last one with `offset`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Final

from pocketmq.client.admin import Admin, AdminError, FoundMessage
from pocketmq.client.errors import RocketMQError
from pocketmq.client.message import Message, MessageExt
from pocketmq.client.producer.producer import Producer
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import PROPERTY_RETRY_TOPIC
from pocketmq.common.topic_names import dlq_topic

PROPERTY_REDRIVEN_FROM: Final = "REDRIVEN_FROM"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message in a group's dead-letter queue."""

    message: MessageExt

    @property
    def original_topic(self) -> str:
        return self.message.properties.get(PROPERTY_RETRY_TOPIC) or self.message.topic

    def matches(self, *, key: str | None, tag: str | None, msg_id: str | None) -> bool:
        """Whether it passes every filter given (None passes all)."""
        return (
            (key is None or key in self.message.keys)
            and (tag is None or self.message.tags == tag)
            and (msg_id is None or msg_id in (self.message.msg_id, self.original_msg_id))
        )

    @property
    def original_msg_id(self) -> str:
        return self.message.properties.get("ORIGIN_MESSAGE_ID") or self.message.msg_id

    def to_resend(self) -> Message:
        """The message to send back to its original topic."""
        properties = dict(self.message.user_properties)
        properties[PROPERTY_REDRIVEN_FROM] = self.message.msg_id
        return Message(
            self.original_topic,
            self.message.body,
            tags=self.message.tags,
            keys=self.message.keys or None,
            properties=properties,
        )


@dataclass(frozen=True, slots=True)
class RedriveResult:
    """What happened to one dead letter: `resent`, `would resend` (dry run) or `failed`."""

    dead_letter: DeadLetter
    outcome: str
    new_msg_id: str | None = None
    error: str | None = None


async def list_dead_letters(
    admin: Admin, group: str, *, offset: int | None = None, count: int = 128
) -> list[DeadLetter]:
    """Up to `count` dead letters of `group`, oldest first (nothing is committed); none when
    the group has no dead-letter topic yet (nothing of it ever failed for good)."""
    try:
        found: list[FoundMessage] = await admin.consume(
            dlq_topic(group), offset=offset, count=count
        )
    except AdminError as exc:
        if exc.code == ResponseCode.TOPIC_NOT_EXIST:
            return []
        raise
    return [DeadLetter(MessageExt.from_stored(f.message, f.broker_name)) for f in found]


async def redrive(
    admin: Admin,
    producer: Producer,
    group: str,
    *,
    selected: Callable[[DeadLetter], bool] = lambda _: True,
    offset: int | None = None,
    count: int = 128,
    rate_per_s: float | None = None,
    dry_run: bool = False,
) -> AsyncIterator[RedriveResult]:
    """Sends selected dead letters back to their original topics, one result each.

    Args:
        admin: Reads the dead-letter topic.
        producer: A started producer that re-sends.
        group: The consumer group whose dead letters these are.
        selected: Which dead letters to re-send (the others are skipped silently).
        offset: Start at this DLQ offset (default: its oldest).
        count: Look at most at this many dead letters.
        rate_per_s: At most this many re-sends per second.
        dry_run: Report what would be re-sent, send nothing.
    """
    interval = 1 / rate_per_s if rate_per_s else 0.0
    next_at = time.monotonic()
    for dead in await list_dead_letters(admin, group, offset=offset, count=count):
        if not selected(dead):
            continue
        if dry_run:
            yield RedriveResult(dead, "would resend")
            continue
        wait = next_at - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        next_at = max(next_at, time.monotonic()) + interval
        try:
            result = await producer.send(dead.to_resend())
        except RocketMQError as exc:
            yield RedriveResult(dead, "failed", error=str(exc))
            continue
        yield RedriveResult(dead, "resent", new_msg_id=result.msg_id)
