"""Transactional half messages as values: every conversion the transaction machinery makes.

RocketMQ's two-phase send, as records in the CommitLog:

- A send with TRAN_MSG=true is stored as a *half message* (`to_half`): in
  RMQ_SYS_TRANS_HALF_TOPIC queue 0, its real topic and queue kept in REAL_TOPIC / REAL_QID,
  its UNIQ_KEY copied to `__transactionId__`, the transaction bits of its sysFlag cleared, so
  consumers of the real topic never see it.
- Committing stores the *end message* (`end_message`): the half's body and properties in the
  real topic and queue, sysFlag of type COMMIT, the half's CommitLog offset as prepared
  transaction offset. Rolling back stores nothing in the real topic.
- Either way, an *op record* (`op_message`) in RMQ_SYS_TRANS_OP_HALF_TOPIC, queue = the half's
  queue, tag `d`, body = the half's queue offset followed by `,`, marks the half as resolved.
  Bodies listing several offsets (`1,2,3,`), as RocketMQ 5 batches them, parse too.
- The check-back puts a half that is still open back at the end of its queue
  (`renewed_half`), counting checks in TRANSACTION_CHECK_TIMES; after `transactionCheckMax`
  checks the half goes to TRANS_CHECK_MAX_TIME_TOPIC (`discarded`) and is never checked again.
  `judge_half` decides which of these a half gets.

Pure: stored messages in, messages to store and decisions out; the caller passes the time.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Container, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from pocketmq.broker.headers import parse_java_int
from pocketmq.common.constants import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.message_id import create_offset_msg_id
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import HostAddress, StoredMessage, reencode
from pocketmq.common.topic_names import (
    TRANSACTION_CHECK_GROUP,
    TRANSACTION_CHECK_MAX_TIME_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_OP_HALF_TOPIC,
)
from pocketmq.store.api import MessageToStore

log = logging.getLogger(__name__)

HALF_TOPIC: Final = TRANSACTION_HALF_TOPIC
OP_TOPIC: Final = TRANSACTION_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC: Final = TRANSACTION_CHECK_MAX_TIME_TOPIC
TRANSACTION_GROUP: Final = TRANSACTION_CHECK_GROUP
"""The system consumer group whose offsets say how far the check-back has read the half and op
queues (`MixAll.CID_SYS_RMQ_TRANS`); kept in consumerOffset.json like any group's."""
REMOVE_TAG: Final = "d"
OFFSET_SEPARATOR: Final = ","
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
HALF_QUEUE_ID: Final = 0


class HalfMessageError(ValueError):
    """A stored record that cannot be treated as a half message (no real topic, a bad queue
    id, another topic); the message says which."""


def with_transaction_type(sys_flag: int, kind: int) -> int:
    """`sys_flag` with its transaction bits set to `kind` (`resetTransactionValue`)."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | kind


def _java_boolean(text: str | None) -> bool:
    # `Boolean.parseBoolean`: "true" in any case, everything else is false.
    return text is not None and text.lower() == "true"


def is_transaction_send(properties: str, reconsume_times: int) -> bool:
    """Whether a send is a transactional half message (SendMessageProcessor's rule).

    TRAN_MSG must say true. Clients before RocketMQ 4.6.1 kept TRAN_MSG on messages they sent
    back for redelivery; a message with reconsume times and a delay level is such a retry, not
    a half message.

    Args:
        properties: The send header's encoded properties string.
        reconsume_times: The send header's reconsume times.
    """
    if PROPERTY_TRANSACTION_PREPARED not in properties:
        return False  # the common case: no decoding
    decoded = decode_properties(properties)
    if not _java_boolean(decoded.get(PROPERTY_TRANSACTION_PREPARED)):
        return False
    delay_level = parse_java_int(decoded.get(PROPERTY_DELAY_TIME_LEVEL)) or 0
    return not (reconsume_times > 0 and delay_level > 0)


def to_half(message: MessageToStore) -> MessageToStore:
    """The half message a transactional send is stored as (`parseHalfMessageInner`).

    A DELAY level or timer stays on the half, which the put path never delays: the committed
    message is delayed after its commit, as in RocketMQ 5 (Java producers drop DELAY before a
    transactional send; other clients may not).
    """
    properties = decode_properties(message.properties)
    uniq_key = properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq_key:
        properties[PROPERTY_TRANSACTION_ID] = uniq_key
    properties[PROPERTY_REAL_TOPIC] = message.topic
    properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
    return replace(
        message,
        topic=HALF_TOPIC,
        queue_id=HALF_QUEUE_ID,
        sys_flag=with_transaction_type(message.sys_flag, TRANSACTION_NOT_TYPE),
        properties=encode_properties(properties),
    )


def real_destination(half: StoredMessage) -> tuple[str, int]:
    """The topic and queue a half message was sent to.

    Raises:
        HalfMessageError: REAL_TOPIC is missing or REAL_QID is not a queue id.
    """
    topic = half.properties.get(PROPERTY_REAL_TOPIC)
    queue_id = parse_java_int(half.properties.get(PROPERTY_REAL_QUEUE_ID))
    if not topic:
        raise HalfMessageError("the half message has no REAL_TOPIC")
    if queue_id is None or queue_id < 0:
        raise HalfMessageError(
            f"the half message's REAL_QID {half.properties.get(PROPERTY_REAL_QUEUE_ID)!r} "
            "is not a queue id"
        )
    return topic, queue_id


def end_message(half: StoredMessage) -> MessageToStore:
    """The message a commit stores in the real topic (`endMessageTransaction`).

    Body, flag, born time and host, reconsume times and properties are the half's; REAL_TOPIC,
    REAL_QID and TRAN_MSG go; the sysFlag's transaction type becomes COMMIT and the half's
    CommitLog offset is kept as prepared transaction offset.

    Raises:
        HalfMessageError: not a half message (see `real_destination`).
    """
    if half.topic != HALF_TOPIC:
        raise HalfMessageError(f"the message at {half.physical_offset} is in {half.topic}")
    topic, queue_id = real_destination(half)
    properties = dict(half.properties)
    for name in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED):
        properties.pop(name, None)
    return MessageToStore(
        topic=topic,
        body=half.body,
        properties=encode_properties(properties),
        queue_id=queue_id,
        flag=half.flag,
        sys_flag=with_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE),
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.physical_offset,
    )


def op_message(
    half_queue_id: int, half_queue_offset: int, store_host: HostAddress, now_ms: int
) -> MessageToStore:
    """The op record saying the half at `half_queue_offset` is committed or rolled back."""
    return MessageToStore(
        topic=OP_TOPIC,
        body=f"{half_queue_offset}{OFFSET_SEPARATOR}".encode(),
        properties=encode_properties(
            {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "false"}
        ),
        queue_id=half_queue_id,
        born_timestamp=now_ms,
        born_host=store_host,
    )


def parse_op_offsets(body: bytes) -> list[int]:
    """The half queue offsets an op record's body lists; unreadable parts are skipped."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return []
    offsets = []
    for part in text.split(OFFSET_SEPARATOR):
        value = parse_java_int(part)
        if value is not None:
            offsets.append(value)
        elif part.strip():
            log.warning("op record lists %r, which is not a queue offset; ignored", part)
    return offsets


def renewed_half(half: StoredMessage, properties: Mapping[str, str]) -> MessageToStore:
    """A copy of an open half for the end of its queue, with `properties` (`renewHalfMessageInner`).

    Unlike RocketMQ's copy, this one keeps the flag and reconsume times, so a message
    committed after a check-back carries them as sent.
    """
    return MessageToStore(
        topic=half.topic,
        body=half.body,
        properties=encode_properties(properties),
        queue_id=half.queue_id,
        flag=half.flag,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
    )


def discarded(half: StoredMessage) -> MessageToStore:
    """A half checked too often, as kept in TRANS_CHECK_MAX_TIME_TOPIC queue 0."""
    return MessageToStore(
        topic=CHECK_MAX_TIME_TOPIC,
        body=half.body,
        properties=encode_properties(half.properties),
        queue_id=0,
        flag=half.flag,
        sys_flag=half.sys_flag,
        born_timestamp=half.born_timestamp,
        born_host=half.born_host,
        reconsume_times=half.reconsume_times,
    )


# -- the check-back's decision for one half ------------------------------------------------


class HalfVerdict(enum.Enum):
    """What the check-back does with one open half message."""

    CHECK = "CHECK"
    """Old enough and not resolved: copy it forward with one more check, ask its producer."""
    WAIT = "WAIT"
    """Too young, checked too recently, or stored during this pass: stop this queue's pass
    here; what was stored after it is younger still."""
    DISCARD = "DISCARD"
    """Checked `transactionCheckMax` times, or older than the CommitLog's retention."""
    MOVE_ON_IMMUNE = "MOVE_ON_IMMUNE"
    """Inside its own CHECK_IMMUNITY_TIME_IN_SECONDS: copy it forward unchecked (remembering
    its first queue offset), so it does not hold up the halves behind it."""
    RESOLVED = "RESOLVED"
    """A forwarded copy whose first queue offset has an op record: nothing left to do."""


@dataclass(frozen=True, slots=True)
class CheckSettings:
    """The check-back's settings (RocketMQ's `BrokerConfig` keys)."""

    interval_ms: int = 30_000
    """`transactionCheckInterval`: time between two passes."""
    timeout_ms: int = 6_000
    """`transactionTimeOut`: a half younger than this is not checked."""
    check_max: int = 15
    """`transactionCheckMax`: checks before a half is discarded."""
    file_reserved_ms: int = 72 * 3_600_000
    """`fileReservedTime`: a half born longer ago than this is discarded unchecked."""
    pass_time_limit_ms: int = 60_000
    """One queue's pass ends after this long, whatever is left (RocketMQ's limit)."""


def check_times(half: StoredMessage) -> int | None:
    """TRANSACTION_CHECK_TIMES of a half; None when it was never checked."""
    text = half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)
    if text is None:
        return None
    value = parse_java_int(text)
    return -1 if value is None else value


def immunity_ms(text: str, timeout_ms: int) -> int:
    """The first-check delay a CHECK_IMMUNITY_TIME_IN_SECONDS value asks for: never shorter
    than `transactionTimeOut`, which also stands for a value that is not a number."""
    seconds = parse_java_int(text)
    if seconds is None:
        return timeout_ms
    return max(seconds * 1000, timeout_ms)


def judge_half(
    half: StoredMessage,
    *,
    now_ms: int,
    pass_started_ms: int,
    settings: CheckSettings,
    resolved: Container[int],
) -> HalfVerdict:
    """Decides what the check-back does with an open half (`TransactionalMessageServiceImpl.check`).

    Args:
        half: The half as read from its queue; it has no op record.
        now_ms: Wall time now.
        pass_started_ms: When this pass began; halves stored since are left for the next.
        settings: The check-back's settings.
        resolved: Half queue offsets with an op record, to match a forwarded copy's first
            queue offset against.
    """
    times = check_times(half)
    if half.store_timestamp >= pass_started_ms:
        return HalfVerdict.WAIT
    if times is not None and 0 <= now_ms - half.store_timestamp <= settings.timeout_ms:
        # A copy stored by a check: its producer gets `transactionTimeOut` to answer before it
        # is asked again (or, after the last check, discarded), where RocketMQ goes on at the
        # next pass and may see two commits of one half. What is stored after it is younger.
        return HalfVerdict.WAIT
    if times is not None and times >= settings.check_max:
        return HalfVerdict.DISCARD
    if now_ms - half.born_timestamp > settings.file_reserved_ms:
        return HalfVerdict.DISCARD
    age_ms = now_ms - half.born_timestamp
    threshold_ms = settings.timeout_ms
    immunity_text = half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
    if immunity_text is not None:
        threshold_ms = immunity_ms(immunity_text, settings.timeout_ms)
        if age_ms <= threshold_ms:
            first_text = half.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
            if first_text is None:
                return HalfVerdict.MOVE_ON_IMMUNE
            first = parse_java_int(first_text)
            if first is None or first < 0:
                return HalfVerdict.WAIT
            return HalfVerdict.RESOLVED if first in resolved else HalfVerdict.MOVE_ON_IMMUNE
    elif 0 <= age_ms <= threshold_ms:
        return HalfVerdict.WAIT
    # A born time in the future means a producer clock ahead of ours: check rather than wait
    # for a time that may never come, as RocketMQ does.
    if age_ms > threshold_ms or age_ms < 0:
        return HalfVerdict.CHECK
    return HalfVerdict.WAIT


def checked_properties(half: StoredMessage) -> dict[str, str]:
    """The half's properties for its copy after one more check (`needDiscard`'s count)."""
    times = check_times(half)
    properties = dict(half.properties)
    properties[PROPERTY_TRANSACTION_CHECK_TIMES] = str(1 if times is None else times + 1)
    return properties


def immune_properties(half: StoredMessage) -> dict[str, str]:
    """The half's properties for its forwarded copy inside its immunity time: the first
    queue offset stays the one it had (`renewImmunityHalfMessageInner`)."""
    properties = dict(half.properties)
    properties.setdefault(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(half.queue_offset))
    return properties


# -- op records of one pass ----------------------------------------------------------------


@dataclass(slots=True)
class OpLedger:
    """The op records of one half queue read during one pass, and which of them are done.

    An op record is done once every half offset it lists was passed over (or lies before the
    pass's first half offset); the op queue's offset moves over the leading done records only,
    so a record naming a half the pass did not reach is read again next time. A record naming
    only offsets before the pass is read once: a forwarded copy (immunity) is matched against
    it only in the pass that reads it.

    Attributes:
        half_offset: Where this pass starts in the half queue.
        op_offset: Where this pass starts in the op queue.
    """

    half_offset: int
    op_offset: int
    _removed: dict[int, int] = field(default_factory=dict)  # half offset -> op offset
    _pending: dict[int, set[int]] = field(default_factory=dict)  # op offset -> half offsets
    _done: set[int] = field(default_factory=set)
    _named: set[int] = field(default_factory=set)  # every half offset an op record named

    def add(self, op_queue_offset: int, tags: str | None, body: bytes) -> None:
        """Takes one op record read from the op queue."""
        if tags != REMOVE_TAG:
            log.warning(
                "op record %d has tag %r, not %r; ignored", op_queue_offset, tags, REMOVE_TAG
            )
            self._done.add(op_queue_offset)
            return
        named = parse_op_offsets(body)
        self._named.update(named)
        live = {o for o in named if o >= self.half_offset}
        for half_offset in live:
            self._removed[half_offset] = op_queue_offset
        if live:
            self._pending[op_queue_offset] = live
        else:
            self._done.add(op_queue_offset)

    def __contains__(self, half_offset: object) -> bool:
        """Whether an op record read in this pass names `half_offset`, even one before the
        pass's start: a forwarded copy is resolved by an op naming its first offset."""
        return half_offset in self._named

    def take(self, half_offset: int) -> bool:
        """Passes over `half_offset`: True (and its op record counts it) when it is resolved."""
        op_offset = self._removed.pop(half_offset, None)
        if op_offset is None:
            return False
        waiting = self._pending.get(op_offset)
        if waiting is not None:
            waiting.discard(half_offset)
            if not waiting:
                del self._pending[op_offset]
                self._done.add(op_offset)
        return True

    def next_op_offset(self) -> int:
        """The op queue offset the next pass starts from (`calculateOpOffset`)."""
        offset = self.op_offset
        while offset in self._done:
            offset += 1
        return offset


# -- the check-back request ----------------------------------------------------------------


def check_request(half: StoredMessage, broker_name: str) -> tuple[dict[str, str], bytes]:
    """The CHECK_TRANSACTION_STATE (39) header and body asking a producer about a half.

    The header names the half as stored (its topic, queue offset and CommitLog offset, which
    END_TRANSACTION must quote back); the body is the message as a stored record with its real
    topic and queue, which clients decode with their stored-message codec.

    Raises:
        HalfMessageError: see `real_destination`.
    """
    topic, queue_id = real_destination(half)
    uniq_key = half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    fields = {
        "topic": half.topic,
        "tranStateTableOffset": str(half.queue_offset),
        "commitLogOffset": str(half.physical_offset),
        "offsetMsgId": create_offset_msg_id(half.store_host, half.physical_offset),
        "bname": broker_name,
    }
    if uniq_key:
        fields["msgId"] = uniq_key
        fields["transactionId"] = uniq_key
    body = reencode(half, topic=topic, queue_id=queue_id)
    return fields, body


def producer_group(half: StoredMessage) -> str | None:
    """The producer group a half names in PGROUP (who is asked about it)."""
    return half.properties.get(PROPERTY_PRODUCER_GROUP) or None
