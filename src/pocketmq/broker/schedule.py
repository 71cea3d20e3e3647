"""Delayed messages by level (RocketMQ's `ScheduleMessageService`).

A message sent with the DELAY property (level 1..N of `messageDelayLevel`, by default
`1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`) is stored in SCHEDULE_TOPIC_XXXX,
queue level-1, with its real topic and queue in REAL_TOPIC / REAL_QID (`redirect_delayed`).
Levels above the last are clamped to it, as RocketMQ does. Each level's queue holds messages in
store order, so their delivery times only grow: the service reads each level from its offset,
and once a message's time (store time + the level's delay) has come it stores the message again
into its real topic and queue (DELAY removed; body, keys, tags, UNIQ_KEY and reconsume count
kept), then moves that level's offset on.

Offsets persist in `config/delayOffset.json` (`{"offsetTable": {"1": n, ...}}`) every second
when they moved and at stop, so a restart goes on where delivery stopped: a message delivered
just before a crash may be delivered again (at least once), none is lost.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
)
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import MessageDecodeError, decode_record
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import MessageToStore
from pocketmq.store.message_store import MessageStore, StoreNotRunningError

log = logging.getLogger(__name__)

SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
DELAY_LEVELS_DEFAULT: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
POLL_INTERVAL_S: Final = 0.1
PERSIST_INTERVAL_S: Final = 1.0
_UNITS_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL: Final = re.compile(r"^(\d+)(ms|s|m|h|d)$")


class DelayLevelError(ValueError):
    """A `messageDelayLevel` that is not a list of durations like `1s 5s 1m 2h`."""


def parse_delay_levels(text: str) -> list[int]:
    """The delay of each level in milliseconds (level 1 first).

    Raises:
        DelayLevelError: empty, or an item that is not a number with a unit (ms, s, m, h, d).
    """
    levels = []
    for item in text.split():
        match = _LEVEL.match(item.strip().lower())
        if match is None:
            raise DelayLevelError(
                f"messageDelayLevel item {item!r} is not a number with a unit (ms, s, m, h, d)"
            )
        levels.append(int(match.group(1)) * _UNITS_MS[match.group(2)])
    if not levels:
        raise DelayLevelError("messageDelayLevel is empty")
    return levels


def redirect_delayed(message: MessageToStore, level_count: int) -> MessageToStore:
    """The message as it is stored when it asks for a delay level; others come back as sent."""
    properties = decode_properties(message.properties) if message.properties else {}
    try:
        level = int(properties.get(PROPERTY_DELAY_TIME_LEVEL, "0"))
    except ValueError:
        level = 0
    if level <= 0 or message.topic == SCHEDULE_TOPIC:
        return message
    level = min(level, level_count)
    properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)
    properties[PROPERTY_REAL_TOPIC] = message.topic
    properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
    return replace(
        message,
        topic=SCHEDULE_TOPIC,
        queue_id=level - 1,
        properties=encode_properties(properties),
    )


class ScheduleService:
    """Delivers delayed messages when their time comes; one asyncio task on the broker."""

    def __init__(self, store: MessageStore, delays_ms: Sequence[int], clock: Clock) -> None:
        self._store = store
        self.delays_ms = list(delays_ms)
        self._clock = clock
        self.offsets: dict[int, int] = {}
        self._persisted: dict[int, int] = {}
        self._task: asyncio.Task[None] | None = None

    def load(self, document: Any) -> None:
        """Takes the offsets of `delayOffset.json` (absent or malformed entries start at 0)."""
        table = document.get("offsetTable") if isinstance(document, dict) else None
        for key, value in (table or {}).items():
            try:
                self.offsets[int(key)] = int(value)
            except (TypeError, ValueError):
                log.warning("delayOffset.json: ignoring entry %r: %r", key, value)
        self._persisted = dict(self.offsets)

    def snapshot(self) -> dict[str, Any]:
        return {"offsetTable": {str(level): n for level, n in sorted(self.offsets.items())}}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="schedule")

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait(self._task)
            self._task = None
        await self.persist()

    async def persist(self) -> None:
        if self.offsets == self._persisted:
            return
        snapshot = self.snapshot()
        await asyncio.to_thread(self._store.metadata.delay_offsets.save, snapshot)
        self._persisted = dict(self.offsets)

    async def _run(self) -> None:
        since_persist = 0.0
        while True:
            try:
                delivered = await self.deliver_due()
            except StoreNotRunningError:
                return
            except Exception:  # a task boundary: log and go on with the next round
                log.exception("delivering delayed messages failed; retrying")
                delivered = 0
            if not delivered:
                await asyncio.sleep(POLL_INTERVAL_S)
                since_persist += POLL_INTERVAL_S
            if since_persist >= PERSIST_INTERVAL_S or delivered:
                await self.persist()
                since_persist = 0.0

    async def deliver_due(self, batch: int = 32) -> int:
        """Delivers every message whose time has come, up to `batch` per level; returns how
        many were delivered."""
        delivered = 0
        now_ms = self._clock.now_ms()
        for level, delay_ms in enumerate(self.delays_ms, start=1):
            offset = self.offsets.get(level, 0)
            result = self._store.get_message(SCHEDULE_TOPIC, level - 1, offset, batch)
            if not result.buffers:
                if result.next_begin_offset > offset:
                    self.offsets[level] = result.next_begin_offset  # trimmed by retention
                continue
            for buffer, queue_offset in zip(result.buffers, result.queue_offsets, strict=True):
                try:
                    stored = decode_record(buffer, check_crc=False)
                except MessageDecodeError:
                    log.warning(
                        "skipping an undecodable delayed message at offset %d", queue_offset
                    )
                    self.offsets[level] = queue_offset + 1
                    continue
                if stored.store_timestamp + delay_ms > now_ms:
                    break
                await self._deliver(stored)
                self.offsets[level] = queue_offset + 1
                delivered += 1
        return delivered

    async def _deliver(self, stored: Any) -> None:
        properties = dict(stored.properties)
        topic = properties.pop(PROPERTY_REAL_TOPIC, None)
        queue_id = properties.pop(PROPERTY_REAL_QUEUE_ID, "0")
        properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        if topic is None:
            log.warning("delayed message without REAL_TOPIC dropped: %s", stored.properties)
            return
        message = MessageToStore(
            topic=topic,
            body=stored.body,
            properties=encode_properties(properties),
            queue_id=int(queue_id) if queue_id.isdigit() else 0,
            flag=stored.flag,
            sys_flag=stored.sys_flag,
            born_timestamp=stored.born_timestamp,
            born_host=stored.born_host,
            reconsume_times=stored.reconsume_times,
        )
        result = await self._store.put_messages([message])
        if not result.ok:
            raise RuntimeError(f"storing a due delayed message into {topic} failed: {result}")
