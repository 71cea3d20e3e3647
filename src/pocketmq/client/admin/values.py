"""What admin operations return and take: queue statistics, consume progress, topic and
subscription group settings, and messages as read back from a broker.

Plain frozen values; queues are the client's `MessageQueue`, so results feed producers and
consumers directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pocketmq.client.message import MessageQueue
from pocketmq.common.constants import (
    PERM_READ,
    PERM_WRITE,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from pocketmq.common.message_id import create_offset_msg_id
from pocketmq.common.stored_message import StoredMessage


@dataclass(frozen=True, slots=True)
class QueueStats:
    """A queue's bounds (`TopicOffset`); `last_update_timestamp_ms` 0 when it is empty."""

    queue: MessageQueue
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class TopicStats:
    """`TopicStatsTable`: every queue of a topic, on every broker serving it."""

    queues: list[QueueStats]
    put_tps: float = 0.0


@dataclass(frozen=True, slots=True)
class QueueProgress:
    """A consumer group's position in one queue (`OffsetWrapper`)."""

    queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp_ms: int

    @property
    def diff(self) -> int:
        """Messages stored but not yet consumed."""
        return self.broker_offset - self.consumer_offset

    @property
    def inflight(self) -> int:
        """Messages pulled but not yet committed."""
        return self.pull_offset - self.consumer_offset


@dataclass(frozen=True, slots=True)
class ConsumeProgress:
    """`ConsumeStats` of a group over the brokers asked."""

    queues: list[QueueProgress]
    consume_tps: float = 0.0


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """What `updateTopic` sets; defaults are mqadmin's (8 queues, read-write)."""

    topic: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ | PERM_WRITE
    order: bool = False
    topic_sys_flag: int = 0
    attributes: str = ""
    """Changes of the topic's attributes, `+message.type=FIFO` (mqadmin's `-a`)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes,
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": "SINGLE_TAG",
            "topicName": self.topic,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }


@dataclass(frozen=True, slots=True)
class SubscriptionGroupSettings:
    """What `updateSubGroup` sets (`SubscriptionGroupConfig`); defaults are mqadmin's."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = False
    consume_broadcast_enable: bool = False
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }


@dataclass(frozen=True, slots=True)
class FoundMessage:
    """A stored message and the broker it was read from."""

    broker_name: str
    message: StoredMessage

    @property
    def offset_msg_id(self) -> str:
        return create_offset_msg_id(self.message.store_host, self.message.physical_offset)

    @property
    def msg_id(self) -> str:
        """The client message id (UNIQ_KEY), or the offset message id when there is none."""
        unique = self.message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        return unique or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.message.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.message.properties.get(PROPERTY_KEYS)


@dataclass(frozen=True, slots=True)
class RawPull:
    """One pull's outcome with its records undecoded, back to back as the CommitLog holds
    them."""

    records: bytes
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclass(frozen=True, slots=True)
class PullBatch:
    """One pull's outcome: messages (maybe none) and where to go on."""

    messages: list[StoredMessage]
    next_begin_offset: int
    min_offset: int
    max_offset: int
