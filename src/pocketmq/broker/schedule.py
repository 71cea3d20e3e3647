"""Delay levels: the rules of delayed messages, without I/O (RocketMQ's `ScheduleMessageService`
and the store's delay hook, as decisions).

A message sent with the DELAY property (level 1..N of `messageDelayLevel`, by default
`1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`) is stored in SCHEDULE_TOPIC_XXXX,
queue level-1, with its real topic and queue in REAL_TOPIC / REAL_QID (`redirect_delayed`).
Levels above the last are clamped to it, as RocketMQ does. The dispatcher gives each such entry
its delivery time (store time + the level's delay) as tag code; since one level has one delay,
a level's queue is in delivery order. When an entry is due, `restore_due` builds the message as
it is stored again into its real topic and queue: DELAY removed; body, keys, tags, UNIQ_KEY,
flags and reconsume times kept; REAL_TOPIC / REAL_QID stay, as in RocketMQ.

`DelayOffsets` is each level's next queue offset, in `delayOffset.json`'s shape
(`{"offsetTable": {"1": n, ...}}`). The delivery loop itself lives in `broker/delay_delivery.py`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any, Final

from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import StoredMessage
from pocketmq.common.topic_names import (
    SCHEDULE_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_RECORD_TOPICS,
)
from pocketmq.store.api import MessageToStore
from pocketmq.store.dispatch import deliver_timestamp_ms

__all__ = [
    "DELAY_LEVELS_DEFAULT",
    "SCHEDULE_TOPIC",
    "DelayLevelError",
    "DelayLevels",
    "DelayOffsets",
    "UndeliverableError",
    "correct_deliver_timestamp",
    "parse_delay_levels",
    "redirect_delayed",
    "restore_due",
]

log = logging.getLogger(__name__)

DELAY_LEVELS_DEFAULT: Final = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
# RocketMQ takes s, m, h and d; ms is ours, for tests and short local delays.
_UNITS_MS: Final = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL: Final = re.compile(r"(\d+)(ms|s|m|h|d)")
_NOT_DELAYED_TOPICS: Final = {SCHEDULE_TOPIC} | TRANSACTION_RECORD_TOPICS


class DelayLevelError(ValueError):
    """A `messageDelayLevel` that is not a list of durations like `1s 5s 1m 2h`."""


class UndeliverableError(ValueError):
    """A due schedule record that cannot go back to a real topic (it is skipped)."""


def parse_delay_levels(text: str) -> list[int]:
    """The delay of each level in milliseconds (level 1 first).

    Args:
        text: `messageDelayLevel`: durations separated by spaces, each a whole number with a
            unit: s, m, h or d as RocketMQ takes them, or ms.

    Raises:
        DelayLevelError: empty, or an item that is not a number with one of those units; the
            message names the item. The broker refuses to start with it, as RocketMQ's does.
    """
    levels = []
    for item in text.split():
        match = _LEVEL.fullmatch(item.strip().lower())
        if match is None:
            raise DelayLevelError(
                f"messageDelayLevel item {item!r} is not a number with a unit (ms, s, m, h, d)"
            )
        levels.append(int(match.group(1)) * _UNITS_MS[match.group(2)])
    if not levels:
        raise DelayLevelError("messageDelayLevel is empty")
    return levels


@dataclass(frozen=True, slots=True)
class DelayLevels:
    """The level table: `delays_ms[n - 1]` is the delay of level n."""

    delays_ms: tuple[int, ...]

    def __post_init__(self) -> None:
        assert self.delays_ms, "at least one delay level"

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def delay_ms(self, level: int) -> int:
        """The delay of `level` (1..max_level)."""
        return self.delays_ms[level - 1]

    def deliver_timestamp_ms(self, level: int, store_timestamp: int) -> int:
        """When a record stored at `store_timestamp` at `level` is due."""
        return deliver_timestamp_ms(self.delays_ms, level, store_timestamp)


def correct_deliver_timestamp(now_ms: int, deliver_ms: int, level_delay_ms: int) -> int:
    """The due time to act on: a due time further away than the level's whole delay cannot be
    right (the clock went back, or the level was shortened), so it counts as due now, as
    RocketMQ's `correctDeliverTimestamp` has it."""
    if deliver_ms > now_ms + level_delay_ms:
        return now_ms
    return deliver_ms


def _delay_level(properties: dict[str, str]) -> int:
    try:
        return int(properties.get(PROPERTY_DELAY_TIME_LEVEL, "0"))
    except ValueError:
        return 0


def redirect_delayed(message: MessageToStore, level_count: int) -> MessageToStore:
    """The message as the store takes it: through SCHEDULE_TOPIC_XXXX when it asks for a delay.

    A message with DELAY > 0, not a transactional half (by topic or transaction type) or
    rollback message, goes to queue
    level-1 of SCHEDULE_TOPIC_XXXX with REAL_TOPIC / REAL_QID set and DELAY clamped to
    `level_count`. Every other message comes back as it is (the same object).

    Args:
        message: As the send path built it.
        level_count: How many levels `messageDelayLevel` has; 0 turns delays off.
    """
    if level_count <= 0 or message.topic in _NOT_DELAYED_TOPICS:
        return message
    if PROPERTY_DELAY_TIME_LEVEL not in message.properties:
        return message  # the common case: no decoding
    transaction = message.sys_flag & TRANSACTION_TYPE_MASK
    if transaction not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return message
    properties = decode_properties(message.properties)
    level = _delay_level(properties)
    if level <= 0:
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


def restore_due(stored: StoredMessage) -> MessageToStore:
    """The message a due schedule record becomes: its real topic and queue, DELAY removed
    (RocketMQ's `messageTimeUp`).

    Raises:
        UndeliverableError: no REAL_TOPIC, a REAL_QID that is not a queue id, or a transactional
            half topic as the real one; the caller logs and skips the record.
    """
    properties = dict(stored.properties)
    topic = properties.get(PROPERTY_REAL_TOPIC)
    queue_text = properties.get(PROPERTY_REAL_QUEUE_ID, "")
    if not topic:
        raise UndeliverableError("the delayed message has no REAL_TOPIC")
    if topic == TRANSACTION_HALF_TOPIC:
        raise UndeliverableError(f"the real topic of a delayed message is {topic}")
    if not queue_text.isascii() or not queue_text.isdigit():
        raise UndeliverableError(f"REAL_QID {queue_text!r} is not a queue id")
    for name in (PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC):
        properties.pop(name, None)
    return MessageToStore(
        topic=topic,
        body=stored.body,
        properties=encode_properties(properties),
        queue_id=int(queue_text),
        flag=stored.flag,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        reconsume_times=stored.reconsume_times,
    )


class DelayOffsets:
    """Each level's next queue offset in SCHEDULE_TOPIC_XXXX (`offsetTable`), with a
    `changed` flag for persistence."""

    def __init__(self) -> None:
        self.offsets: dict[int, int] = {}
        self.changed = False

    def load(self, document: Any) -> None:
        """Takes the offsets of a `delayOffset.json` document (or None); bad entries are
        skipped with a warning and their level starts at 0."""
        table = document.get("offsetTable") if isinstance(document, dict) else None
        if not isinstance(table, dict):
            return
        for key, value in table.items():
            try:
                level = int(key)
                offset = int(value)
            except (TypeError, ValueError):
                log.warning("delayOffset.json: ignoring entry %r: %r", key, value)
                continue
            if level > 0 and offset >= 0:
                self.offsets[level] = offset
            else:
                log.warning("delayOffset.json: ignoring entry %r: %r", key, value)

    def snapshot(self) -> dict[str, Any]:
        """The `delayOffset.json` document."""
        return {"offsetTable": {str(level): n for level, n in sorted(self.offsets.items())}}

    def get(self, level: int) -> int:
        return self.offsets.get(level, 0)

    def set(self, level: int, offset: int) -> None:
        if self.offsets.get(level) != offset:
            self.offsets[level] = offset
            self.changed = True

    def correct(self, level: int, min_offset: int, max_offset: int) -> int | None:
        """Brings a level's offset into its queue's bounds (RocketMQ's `correctDelayOffset`):
        below the min (retention removed entries) it moves up, past the max (the store lost
        its tail in a crash) it moves back. Returns the old offset when it moved, else None."""
        offset = self.get(level)
        corrected = min(max(offset, min_offset), max_offset)
        if corrected == offset:
            return None
        self.set(level, corrected)
        return offset
