"""Topic name rules (RocketMQ's `TopicValidator`), shared by brokers and clients.

A client checks a name before sending so that a typo fails at once with the rule it broke,
instead of as a broker error after a network round trip.
"""

from __future__ import annotations

import re
from typing import Final

TOPIC_NAME_MAX_LENGTH: Final = 127
_VALID_NAME: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")


class TopicError(ValueError):
    """A topic name or setting that RocketMQ would refuse; the message says which rule."""


def validate_topic_name(name: str) -> None:
    """Raises `TopicError` unless `name` is a legal topic name (`TopicValidator`)."""
    if not name or not name.strip():
        raise TopicError("the topic name is blank")
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        raise TopicError(f"the topic name is longer than {TOPIC_NAME_MAX_LENGTH} characters")
    if not _VALID_NAME.match(name):
        raise TopicError(
            f"the topic name {name!r} contains illegal characters; allowed: letters, digits, "
            "'%', '|', '_' and '-'"
        )


# -- system topics and groups (RocketMQ's `TopicValidator`, `MixAll`) --------------------------
RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"
"""The topic whose route lets producers send to topics that do not exist yet."""
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"
TIMER_TOPIC: Final = "rmq_sys_wheel_timer"
TRANSACTION_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANSACTION_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANSACTION_CHECK_MAX_TIME_TOPIC: Final = "TRANS_CHECK_MAX_TIME_TOPIC"
SELF_TEST_TOPIC: Final = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT: Final = "OFFSET_MOVED_EVENT"
TRANSACTION_RECORD_TOPICS: Final = frozenset(
    {TRANSACTION_HALF_TOPIC, TRANSACTION_OP_HALF_TOPIC, TRANSACTION_CHECK_MAX_TIME_TOPIC}
)
"""Where a transaction's own records live: a half waits for its end (its delay or timer applies
to the committed message), an op record is not a message, a discarded half is kept, not
delivered; none of them is ever delayed."""
BENCHMARK_TOPIC: Final = "BenchmarkTest"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"
CHECKPOINT_TOPIC: Final = "CHECKPOINT_TOPIC"
METADATA_TOPIC: Final = "rmq_sys_pocketmq_metadata"
"""pocketmq's own: a controller-mode master's metadata changes, replicated as records."""
SYSTEM_TOPIC_SET: Final = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        *TRANSACTION_RECORD_TOPICS,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        BENCHMARK_TOPIC,
        TRACE_TOPIC,
        CHECKPOINT_TOPIC,
    }
)
"""RocketMQ 5's `TopicValidator.SYSTEM_TOPIC_SET`: topics the broker itself depends on."""
SYSTEM_TOPIC_PREFIXES: Final = ("rmq_sys_", "RMQ_SYS_")


def is_system_topic(topic: str) -> bool:
    """`TopicValidator.isSystemTopic`, plus the upper-case `RMQ_SYS_` family pocketmq uses."""
    return topic in SYSTEM_TOPIC_SET or topic.startswith(SYSTEM_TOPIC_PREFIXES)


TRANSACTION_CHECK_GROUP: Final = "CID_RMQ_SYS_TRANS"
"""The group whose consumer offsets track the half and op queues."""


def retry_topic(group: str) -> str:
    """`%RETRY%<group>`: where a group's messages wait to be consumed again."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """`%DLQ%<group>`: where a group's messages go once their retries are used up."""
    return DLQ_GROUP_TOPIC_PREFIX + group
