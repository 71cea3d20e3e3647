"""Timer messages as the store sees them: the timer topic, delete keys, and the messages a due
timer becomes (pure, no I/O).

The broker's send path stores a message with a future TIMER_DELIVER_MS / TIMER_DELAY_SEC /
TIMER_DELAY_MS in `rmq_sys_wheel_timer` queue 0, with TIMER_OUT_MS (its delivery time rounded
down to the precision), REAL_TOPIC and REAL_QID. A recall stores a delete marker the same way,
with TIMER_DEL_UNIQKEY = `<topic>+<UNIQ_KEY>` of the message it cancels (`delete_key`).

When a timer is due, `restore_due` builds the message stored into its real topic and queue, as
RocketMQ's `convertMessage` does: body, flags, born time and host, reconsume times and every
property kept, REAL_TOPIC / REAL_QID removed, TIMER_DEQUEUE_MS added. TIMER_OUT_MS stays, which
marks it as already timed if it is ever sent again. `restore_rolled` builds the copy that goes
round the timer topic once more when its time lies beyond the wheel (TIMER_ROLL_TIMES + 1).
"""

from __future__ import annotations

import zlib
from typing import Final

from pocketmq.common.constants import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import StoredMessage
from pocketmq.common.topic_names import TIMER_TOPIC
from pocketmq.store.api import MessageToStore

"""Where timer messages wait (`TimerMessageStore.TIMER_TOPIC`); one queue, 0."""
TIMER_QUEUE_ID: Final = 0


class UndeliverableTimerError(ValueError):
    """A timer topic record that cannot become a message (no real topic, bad numbers)."""


def delete_key(real_topic: str, uniq_key: str) -> str:
    """The key a delete marker names (`TimerMessageStore.buildDeleteKey`)."""
    return f"{real_topic}+{uniq_key}"


def key_hash(key: str) -> int:
    """The 32-bit hash of a delete key kept in timer log entries (a hit is confirmed by
    reading both messages, so collisions cost a read, never a wrong delete)."""
    return zlib.crc32(key.encode())


def timer_out_ms(stored: StoredMessage) -> int:
    """The TIMER_OUT_MS of a timer topic record.

    Raises:
        UndeliverableTimerError: missing or not a number.
    """
    text = stored.properties.get(PROPERTY_TIMER_OUT_MS, "")
    try:
        return int(text)
    except ValueError:
        raise UndeliverableTimerError(f"TIMER_OUT_MS {text!r} is not a time") from None


def entry_key(stored: StoredMessage) -> str | None:
    """The delete key of a timer topic record: the one a marker names, or the one a marker of
    this message would name. None without a real topic or unique key."""
    marker = stored.properties.get(PROPERTY_TIMER_DEL_UNIQKEY)
    if marker:
        return marker
    topic = stored.properties.get(PROPERTY_REAL_TOPIC)
    uniq_key = stored.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not topic or not uniq_key:
        return None
    return delete_key(topic, uniq_key)


def is_delete_marker(stored: StoredMessage) -> bool:
    return bool(stored.properties.get(PROPERTY_TIMER_DEL_UNIQKEY))


def restore_due(stored: StoredMessage, now_ms: int) -> MessageToStore:
    """The message a due timer record becomes in its real topic and queue.

    Raises:
        UndeliverableTimerError: no REAL_TOPIC, or a REAL_QID that is not a queue id; the
            caller logs and skips the record.
    """
    properties = dict(stored.properties)
    topic = properties.pop(PROPERTY_REAL_TOPIC, "")
    queue_text = properties.pop(PROPERTY_REAL_QUEUE_ID, "")
    if not topic:
        raise UndeliverableTimerError("the timer message has no REAL_TOPIC")
    if not queue_text.isascii() or not queue_text.isdigit():
        raise UndeliverableTimerError(f"REAL_QID {queue_text!r} is not a queue id")
    properties[PROPERTY_TIMER_DEQUEUE_MS] = str(now_ms)
    return _copy(stored, topic, int(queue_text), properties)


def restore_rolled(stored: StoredMessage, now_ms: int) -> MessageToStore:
    """The copy of a timer record that goes round the timer topic again (its time lies
    beyond the wheel when it was enqueued)."""
    properties = dict(stored.properties)
    try:
        rolls = int(properties.get(PROPERTY_TIMER_ROLL_TIMES, "0"))
    except ValueError:
        rolls = 0
    properties[PROPERTY_TIMER_ROLL_TIMES] = str(rolls + 1)
    properties[PROPERTY_TIMER_DEQUEUE_MS] = str(now_ms)
    return _copy(stored, TIMER_TOPIC, TIMER_QUEUE_ID, properties)


def _copy(
    stored: StoredMessage, topic: str, queue_id: int, properties: dict[str, str]
) -> MessageToStore:
    return MessageToStore(
        topic=topic,
        body=stored.body,
        properties=encode_properties(properties),
        queue_id=queue_id,
        flag=stored.flag,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        reconsume_times=stored.reconsume_times,
    )
