"""How a consumer consumes, as its heartbeat tells the broker (`ConsumeType`, `MessageModel`,
`ConsumeFromWhere` in apache/rocketmq).

Java clients send these by name, the C++ client by ordinal; the values are the ordinals.
"""

from __future__ import annotations

import enum


class ConsumeType(enum.Enum):
    CONSUME_ACTIVELY = 0
    """Pull consumers: the application asks for messages."""
    CONSUME_PASSIVELY = 1
    """Push consumers: the client pulls and calls a listener."""
    CONSUME_POP = 2


class MessageModel(enum.Enum):
    BROADCASTING = 0
    """Every consumer of the group gets every message; offsets stay with each consumer."""
    CLUSTERING = 1
    """The group's consumers share the queues; offsets are kept by the broker."""


class ConsumeFromWhere(enum.Enum):
    """Where a group starts in a queue it has no committed offset for."""

    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5
