"""Timer messages: a timer wheel and timer log on disk, delivering messages at any time up to
`timerMaxDelaySec` ahead (RocketMQ 5's `TimerMessageStore`). See `timer_store.py`."""

from pocketmq.common.topic_names import TIMER_TOPIC
from pocketmq.store.timer.messages import TIMER_QUEUE_ID, delete_key
from pocketmq.store.timer.timer_store import (
    TimerHandover,
    TimerLoadResult,
    TimerMessageStore,
    wheel_slot_count,
)

__all__ = [
    "TIMER_QUEUE_ID",
    "TIMER_TOPIC",
    "TimerHandover",
    "TimerLoadResult",
    "TimerMessageStore",
    "delete_key",
    "wheel_slot_count",
]
