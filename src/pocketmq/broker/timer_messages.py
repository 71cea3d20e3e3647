"""Timer messages on the send path: which messages wait in the timer wheel, the limit on their
delivery time, and the recall handle a send answers with (RocketMQ's `HookUtils` timer checks
and `SendMessageProcessor.attachRecallHandle`, as decisions without I/O).

A single message (not a batch, whose entries RocketMQ stores as they are) with
TIMER_DELAY_SEC, TIMER_DELAY_MS or TIMER_DELIVER_MS (checked in that order), no DELAY level and
no TIMER_OUT_MS yet, is a timer message. When its delivery time is in the future it is stored in
`rmq_sys_wheel_timer` queue 0 with TIMER_OUT_MS (the time rounded down to `timerPrecisionMs`;
a time on the precision boundary goes one step lower, so the wheel delivers it exactly then),
REAL_TOPIC and REAL_QID. A delivery time that has passed sends the message as a normal one. A
time further ahead than `timerMaxDelaySec` is refused with MESSAGE_ILLEGAL naming the limit;
with `timerWheelEnable=false` a timer message is refused with SYSTEM_ERROR.

A message with a DELAY level loses its timer properties: the delay level wins, as in RocketMQ.
Transactional half messages (and prepared or rolled-back ones) are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from pocketmq.broker.headers import JAVA_INT_TEXT
from pocketmq.common.codes import ResponseCode
from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.recall_handle import RecallHandle
from pocketmq.common.topic_names import (
    RETRY_GROUP_TOPIC_PREFIX,
    TRANSACTION_RECORD_TOPICS,
)
from pocketmq.store.api import MessageToStore
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.timer import TIMER_QUEUE_ID, TIMER_TOPIC

_NOT_REDIRECTED_TOPICS: Final = {TIMER_TOPIC} | TRANSACTION_RECORD_TOPICS
_TIMER_REQUESTS: Final = (
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELIVER_MS,
)
_JAVA_LONG_MAX: Final = (1 << 63) - 1


class TimerRefusal(Exception):
    """A timer message the broker does not store; answer with `code` and `remark`."""

    def __init__(self, code: ResponseCode, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True, slots=True)
class TimerSettings:
    """The settings behind the decisions (`timerWheelEnable`, `timerPrecisionMs`,
    `timerMaxDelaySec`) and the broker's name, which recall handles carry."""

    enabled: bool
    precision_ms: int
    max_delay_sec: int
    broker_name: str

    @property
    def max_delay_ms(self) -> int:
        return self.max_delay_sec * 1000

    @classmethod
    def from_config(cls, store_config: MessageStoreConfig, broker_name: str) -> TimerSettings:
        return cls(
            enabled=store_config.timer_wheel_enable,
            precision_ms=store_config.timer_precision_ms,
            max_delay_sec=store_config.timer_max_delay_sec,
            broker_name=broker_name,
        )


def round_timer_out_ms(deliver_ms: int, precision_ms: int) -> int:
    """TIMER_OUT_MS of a delivery time: the start of the precision step before it, so that
    `deliver_ms <= result + precision_ms` and the wheel delivers it at that step's end."""
    if deliver_ms % precision_ms == 0:
        return deliver_ms - precision_ms
    return deliver_ms - deliver_ms % precision_ms


def redirect_timer(message: MessageToStore, settings: TimerSettings, now_ms: int) -> MessageToStore:
    """The message as the store takes it: through the timer topic when it is a timer message.

    Returns:
        `message` itself when nothing changes (the common case), else a changed copy.

    Raises:
        TimerRefusal: a timer message the wheel is off for, whose time does not parse, or whose
            time lies beyond `timerMaxDelaySec`; also a delete marker whose time has passed.
    """
    if "TIMER_" not in message.properties or message.topic in _NOT_REDIRECTED_TOPICS:
        return message
    if message.sys_flag & TRANSACTION_TYPE_MASK not in (
        TRANSACTION_NOT_TYPE,
        TRANSACTION_COMMIT_TYPE,
    ):
        return message
    properties = decode_properties(message.properties)
    if _delay_level(properties) > 0:
        dropped = [properties.pop(name) for name in _TIMER_REQUESTS if name in properties]
        if not dropped:
            return message
        return replace(message, properties=encode_properties(properties))
    if PROPERTY_TIMER_OUT_MS in properties:
        return message
    if not any(name in properties for name in _TIMER_REQUESTS):
        return message
    if not settings.enabled:
        raise TimerRefusal(
            ResponseCode.SYSTEM_ERROR,
            "timer messages are off on this broker (timerWheelEnable=false)",
        )
    deliver_ms = _deliver_ms(properties, now_ms, settings)
    if deliver_ms <= now_ms:
        if PROPERTY_TIMER_DEL_UNIQKEY in properties:
            raise TimerRefusal(
                ResponseCode.MESSAGE_ILLEGAL,
                "timer message illegal: the message to recall is due already",
            )
        return message
    if deliver_ms - now_ms > settings.max_delay_ms:
        raise TimerRefusal(
            ResponseCode.MESSAGE_ILLEGAL,
            f"timer message illegal: its delivery time is {deliver_ms - now_ms} ms ahead, beyond "
            f"the broker's limit of {settings.max_delay_ms} ms "
            f"(timerMaxDelaySec={settings.max_delay_sec})",
        )
    properties[PROPERTY_TIMER_OUT_MS] = str(round_timer_out_ms(deliver_ms, settings.precision_ms))
    properties[PROPERTY_REAL_TOPIC] = message.topic
    properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
    return replace(
        message,
        topic=TIMER_TOPIC,
        queue_id=TIMER_QUEUE_ID,
        properties=encode_properties(properties),
    )


def _delay_level(properties: dict[str, str]) -> int:
    try:
        return int(properties.get(PROPERTY_DELAY_TIME_LEVEL, "0"))
    except ValueError:
        return 0


def _deliver_ms(properties: dict[str, str], now_ms: int, settings: TimerSettings) -> int:
    for name in _TIMER_REQUESTS:
        text = properties.get(name)
        if text is None:
            continue
        if not JAVA_INT_TEXT.fullmatch(text) or len(text.lstrip("+-")) > 19:  # Long.parseLong
            raise TimerRefusal(
                ResponseCode.MESSAGE_ILLEGAL,
                f"timer message illegal: {name}={text!r} is not a whole number",
            )
        value = int(text)
        if name == PROPERTY_TIMER_DELAY_SEC:
            value = now_ms + value * 1000
        elif name == PROPERTY_TIMER_DELAY_MS:
            value = now_ms + value
        if value > _JAVA_LONG_MAX:  # Java's long would overflow: far beyond any limit anyway
            value = now_ms + settings.max_delay_ms + 1
        return value
    raise AssertionError("called only for timer messages")


def recall_handle(message: MessageToStore, broker_name: str) -> str | None:
    """The `recallHandle` a send of `message` (as stored) answers with, or None.

    Only timer messages get one, and not those for a retry topic or without a UNIQ_KEY.
    """
    if message.topic != TIMER_TOPIC:
        return None
    properties = decode_properties(message.properties)
    out_text = properties.get(PROPERTY_TIMER_OUT_MS)
    real_topic = properties.get(PROPERTY_REAL_TOPIC)
    uniq_key = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if not out_text or not real_topic or not uniq_key:
        return None
    if real_topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or PROPERTY_TIMER_DEL_UNIQKEY in properties:
        return None
    try:
        # One past TIMER_OUT_MS: a marker sent with it rounds down into the same slot.
        timestamp = str(int(out_text) + 1)
    except ValueError:
        return None
    return RecallHandle(real_topic, broker_name, timestamp, uniq_key).encode()
