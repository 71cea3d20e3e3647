"""The POP receipt handle (RocketMQ's `extraInfo`, the POP_CK property) and the response-header
strings a client builds it from.

A handle names one popped message by its checkpoint: space-separated fields

    ckStartOffset popTime invisibleTime reviveQid retryFlag brokerName queueId queueOffset

and, in the 5.x proxy's receipt handles, the message's CommitLog offset as a ninth field. The
retry flag says which topic the message was read from: 0 the topic itself, 1 the group's pop
retry topic `%RETRY%<group>_<topic>`, 2 the v2 name `%RETRY%<group>+<topic>`. A checkpoint is
found by (real topic, queue id, start offset, pop time); the broker checks the rest against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX

ORDER_REVIVE_QID: Final = 999
"""The revive queue id that marks an orderly (FIFO) pop's handle."""

RETRY_NONE: Final = "0"
RETRY_V1: Final = "1"
RETRY_V2: Final = "2"


class HandleError(ValueError):
    """A receipt handle that does not parse."""


def pop_retry_topic(group: str, topic: str, *, v2: bool = False) -> str:
    """The topic a group's unacknowledged pops of `topic` come back through."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def retry_flag(read_topic: str) -> str:
    """The handle's retry flag for a message read from `read_topic`."""
    if not read_topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_NONE
    return RETRY_V2 if "+" in read_topic else RETRY_V1


def real_topic(flag: str, topic: str, group: str) -> str:
    """The topic a handle's message was read from, given the topic the client subscribed."""
    if flag == RETRY_V1:
        return pop_retry_topic(group, topic)
    if flag == RETRY_V2:
        return pop_retry_topic(group, topic, v2=True)
    if flag == RETRY_NONE:
        return topic
    raise HandleError(f"retry flag {flag!r} is none of 0, 1, 2")


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    """One popped message's handle."""

    start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int = -1
    """Only in the proxy's handles (-1 when absent)."""

    @property
    def is_order(self) -> bool:
        return self.revive_qid == ORDER_REVIVE_QID

    @property
    def next_visible_time(self) -> int:
        return self.pop_time + self.invisible_time

    def encode(self) -> str:
        text = (
            f"{self.start_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} "
            f"{self.retry} {self.broker_name} {self.queue_id} {self.queue_offset}"
        )
        if self.commit_log_offset >= 0:
            text += f" {self.commit_log_offset}"
        return text

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Reads a handle of 8 or 9 fields.

        Raises:
            HandleError: too few fields, a number that is not one, or an unknown retry flag.
        """
        fields = text.split(" ")
        if len(fields) < 8:
            raise HandleError(f"a receipt handle has 8 or 9 fields, this one {len(fields)}")
        if fields[4] not in (RETRY_NONE, RETRY_V1, RETRY_V2):
            raise HandleError(f"retry flag {fields[4]!r} is none of 0, 1, 2")
        try:
            return cls(
                start_offset=int(fields[0]),
                pop_time=int(fields[1]),
                invisible_time=int(fields[2]),
                revive_qid=int(fields[3]),
                retry=fields[4],
                broker_name=fields[5],
                queue_id=int(fields[6]),
                queue_offset=int(fields[7]),
                commit_log_offset=int(fields[8]) if len(fields) > 8 else -1,
            )
        except ValueError:
            raise HandleError(
                f"a number field of receipt handle {text!r} is not a number"
            ) from None


def offset_info(entries: list[tuple[str, int, str]]) -> str:
    """`startOffsetInfo` / `msgOffsetInfo`: `retryFlag queueId value` entries joined by `;`."""
    return ";".join(f"{flag} {queue_id} {value}" for flag, queue_id, value in entries)


def order_count_key(queue_id: int, queue_offset: int) -> str:
    """An `orderCountInfo` entry's per-offset key (`qo<queueId>%<offset>`)."""
    return f"qo{queue_id}%{queue_offset}"
