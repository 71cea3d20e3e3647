"""Message-trace records as RocketMQ remoting clients write them, and mqadmin's view of them.

A client with message trace on (Java `DefaultMQProducer(group, true)`, C++, Go) sends its trace
as ordinary messages to `RMQ_SYS_TRACE_TOPIC` (or a custom trace topic). The body is a run of
records; each record is a list of fields joined by U+0001 and closed by U+0002. The field order
depends on the trace type (Java `TraceDataEncoder`):

    Pub            type ts region group topic msgId tags keys storeHost bodyLen cost msgType
                   offsetMsgId success                                   (14; 13 and 15 older)
    SubBefore      type ts region group requestId msgId retryTimes keys  (8; 9 in 4.8.0)
    SubAfter       type requestId msgId cost success keys contextCode ts group
                                                     (9; 7 from CLOUD clients / 4.9.1; 6 older)
    EndTransaction type ts region group topic msgId tags keys storeHost msgType txId txState
                   fromCheck                                             (13)
    Recall         type ts region group topic msgId success              (7, 5.3.2+)

This module owns that text codec (`encode`, `decode`), the KEYS the trace message carries so
`queryMessage` by message id finds it (`trace_keys`, `trace_message_keys`), and the text
mqadmin's `queryMsgTraceById` prints (`format_trace_view`). It is pure: no sockets, no clock
(the decode time Java substitutes for a missing SubAfter timestamp arrives as `now_ms`).

Deliberately missing: sending trace messages (batching, the 128 KB cap, queue choice) lives
with the client; `storeTime` and `regionName` exist on the Java beans but are never written.

Invariants: `decode(encode(cs))` gives back every wire-carried field of `cs`, one context per
bean; `decode` follows Java's `String.split` (trailing empty fields vanish) and its field-count
rules, and only differs where Java would throw on a missing trailing string field (we read "").
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pocketmq.common.java_hash import java_string_hash

CONTENT_SEPARATOR: Final = "\u0001"
"""Between the fields of one record (Java `TraceConstants.CONTENT_SPLITOR`)."""
FIELD_SEPARATOR: Final = "\u0002"
"""After each record (Java `TraceConstants.FIELD_SPLITOR`)."""
TRACE_TOPIC_DEFAULT: Final = "RMQ_SYS_TRACE_TOPIC"
CLOUD_TRACE_TOPIC_PREFIX: Final = "rmq_sys_TRACE_DATA_"
"""CLOUD-channel clients write to this prefix + region id (`TraceConstants.TRACE_TOPIC_PREFIX`)."""
TRACE_PRODUCER_GROUP_PREFIX: Final = "_INNER_TRACE_PRODUCER"
DEFAULT_REGION_ID: Final = "DefaultRegion"
KEY_SEPARATOR: Final = " "
JAVA_NULL: Final = "null"
"""What Java's `StringBuilder.append` writes for a null String (tags, keys, transaction id)."""

_INT_PATTERN: Final = re.compile(r"[+-]?[0-9]+")
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1


class TraceType(enum.Enum):
    """Java `TraceType`; the value is the name written as a record's first field.

    4.x has Pub, SubBefore, SubAfter, EndTransaction; 5.3.2 added Recall.
    """

    PUB = "Pub"
    RECALL = "Recall"
    SUB_BEFORE = "SubBefore"
    SUB_AFTER = "SubAfter"
    END_TRANSACTION = "EndTransaction"


class MessageType(enum.IntEnum):
    """Java `MessageType`, written by ordinal. `ORDER` exists only in 5.x."""

    NORMAL = 0  # Normal_Msg
    TRANS_HALF = 1  # Trans_Msg_Half
    TRANS_COMMIT = 2  # Trans_msg_Commit (EndTransaction records always carry this)
    DELAY = 3  # Delay_Msg
    ORDER = 4  # Order_Msg


class LocalTransactionState(enum.Enum):
    """Java `LocalTransactionState`, written by name (the misspelt UNKNOW is the wire name)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"


class ConsumeReturnType(enum.IntEnum):
    """Java `ConsumeReturnType`; its ordinal is a SubAfter record's `contextCode`."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


class AccessChannel(enum.Enum):
    """Java `AccessChannel`; CLOUD clients omit SubAfter's timestamp and group."""

    LOCAL = "LOCAL"
    CLOUD = "CLOUD"


class TraceEncodeError(ValueError):
    """Our caller asked to encode a context the text format cannot carry."""


class TraceDecodeError(ValueError):
    """A trace message body is not valid trace text (Java's decoder would throw too)."""


@dataclass(frozen=True, slots=True)
class TraceBean:
    """One traced message (Java `TraceBean`). Fields a type does not write stay at defaults.

    `None` for `tags`, `keys` or `transaction_id` is Java's null: written as the text "null"
    and left out of the trace message's KEYS. Decoding never yields None (Java neither).
    """

    topic: str = ""  # topic
    msg_id: str = ""  # msgId: the client-side unique id (UNIQ_KEY)
    offset_msg_id: str = ""  # offsetMsgId: broker address + commit-log offset id
    tags: str | None = ""  # tags
    keys: str | None = ""  # keys, space-separated
    store_host: str = ""  # storeHost: the broker address the message went to
    client_host: str = ""  # clientHost: only Pub records of 4.8.0 carry it on the wire
    retry_times: int = 0  # retryTimes (reconsume times)
    body_length: int = 0  # bodyLength
    msg_type: MessageType = MessageType.NORMAL  # msgType
    transaction_id: str | None = ""  # transactionId
    transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW  # transactionState
    from_transaction_check: bool = False  # fromTransactionCheck


@dataclass(frozen=True, slots=True)
class TraceContext:
    """One traced event (Java `TraceContext`): a send, a consume start or end, a commit, a recall.

    SubBefore and SubAfter contexts may hold several beans (a consumed batch); they are written
    as one record per bean. Pub, EndTransaction and Recall write only the first bean.
    """

    trace_type: TraceType  # traceType
    timestamp_ms: int = 0  # timeStamp
    region_id: str = ""  # regionId
    group_name: str = ""  # groupName: producer or consumer group, without namespace
    cost_time_ms: int = 0  # costTime
    success: bool = True  # isSuccess
    request_id: str = ""  # requestId: pairs a SubBefore with its SubAfter
    context_code: int = 0  # contextCode: a ConsumeReturnType ordinal
    access_channel: AccessChannel = AccessChannel.LOCAL  # accessChannel (not on the wire)
    beans: tuple[TraceBean, ...] = field(default_factory=tuple)  # traceBeans


# --- encoding -----------------------------------------------------------------------------------


def _text(value: str | None) -> str:
    if value is None:
        return JAVA_NULL
    if CONTENT_SEPARATOR in value or FIELD_SEPARATOR in value:
        raise TraceEncodeError(f"trace field contains a record separator: {value!r}")
    return value


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _record(fields: Sequence[str]) -> str:
    return CONTENT_SEPARATOR.join(fields) + FIELD_SEPARATOR


def _first_bean(context: TraceContext) -> TraceBean:
    if not context.beans:
        raise TraceEncodeError(f"a {context.trace_type.value} trace context needs a bean")
    return context.beans[0]


def encode_context(context: TraceContext) -> str:
    """Returns the trace text of one context, as Java `encoderFromContextBean` builds it.

    Raises:
        TraceEncodeError: a text field holds U+0001/U+0002, or a Pub, EndTransaction or Recall
            context has no bean.
    """
    c = context
    kind = c.trace_type.value
    if c.trace_type is TraceType.PUB:
        b = _first_bean(c)
        return _record(
            [
                kind,
                str(c.timestamp_ms),
                _text(c.region_id),
                _text(c.group_name),
                _text(b.topic),
                _text(b.msg_id),
                _text(b.tags),
                _text(b.keys),
                _text(b.store_host),
                str(b.body_length),
                str(c.cost_time_ms),
                str(int(b.msg_type)),
                _text(b.offset_msg_id),
                _bool(c.success),
            ]
        )
    if c.trace_type is TraceType.SUB_BEFORE:
        head = [kind, str(c.timestamp_ms), _text(c.region_id), _text(c.group_name)]
        return "".join(
            _record(
                [*head, _text(c.request_id), _text(b.msg_id), str(b.retry_times), _text(b.keys)]
            )
            for b in c.beans
        )
    if c.trace_type is TraceType.SUB_AFTER:
        parts = []
        for b in c.beans:
            fields = [
                kind,
                _text(c.request_id),
                _text(b.msg_id),
                str(c.cost_time_ms),
                _bool(c.success),
                _text(b.keys),
                str(c.context_code),
            ]
            if c.access_channel is AccessChannel.CLOUD:
                # Java appends a separator after contextCode and stops: the record ends "\1\2".
                parts.append(CONTENT_SEPARATOR.join(fields) + CONTENT_SEPARATOR + FIELD_SEPARATOR)
            else:
                parts.append(_record([*fields, str(c.timestamp_ms), _text(c.group_name)]))
        return "".join(parts)
    if c.trace_type is TraceType.END_TRANSACTION:
        b = _first_bean(c)
        return _record(
            [
                kind,
                str(c.timestamp_ms),
                _text(c.region_id),
                _text(c.group_name),
                _text(b.topic),
                _text(b.msg_id),
                _text(b.tags),
                _text(b.keys),
                _text(b.store_host),
                str(int(b.msg_type)),
                _text(b.transaction_id),
                b.transaction_state.value,
                _bool(b.from_transaction_check),
            ]
        )
    b = _first_bean(c)  # Recall
    return _record(
        [
            kind,
            str(c.timestamp_ms),
            _text(c.region_id),
            _text(c.group_name),
            _text(b.topic),
            _text(b.msg_id),
            _bool(c.success),
        ]
    )


def encode(contexts: Iterable[TraceContext]) -> str:
    """Returns a trace message body: the records of `contexts` back to back, as Java batches them.

    The caller encodes the result as UTF-8 and sends it to the trace topic with the KEYS from
    `trace_message_keys(contexts)`.

    Raises:
        TraceEncodeError: see `encode_context`.
    """
    return "".join(encode_context(context) for context in contexts)


# --- decoding -----------------------------------------------------------------------------------


def java_split(text: str, separator: str) -> list[str]:
    """Java `String.split` by a one-character literal: trailing empty strings are dropped."""
    if separator not in text:
        return [text]  # Java returns the input itself, even when it is empty
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _int(line: Sequence[str], index: int, low: int, high: int) -> int:
    if index >= len(line):
        raise TraceDecodeError(f"{line[0]} record has {len(line)} fields, needs field {index}")
    raw = line[index]
    if _INT_PATTERN.fullmatch(raw) is None:
        raise TraceDecodeError(f"{line[0]} field {index} is not an integer: {raw!r}")
    value = int(raw)
    if not low <= value <= high:
        raise TraceDecodeError(f"{line[0]} field {index} is out of range: {raw!r}")
    return value


def _long(line: Sequence[str], index: int) -> int:
    return _int(line, index, _INT64_MIN, _INT64_MAX)


def _int32(line: Sequence[str], index: int) -> int:
    return _int(line, index, _INT32_MIN, _INT32_MAX)


def _str(line: Sequence[str], index: int) -> str:
    # A missing trailing field was empty before Java's split dropped it; Java would throw here.
    return line[index] if index < len(line) else ""


def _boolean(line: Sequence[str], index: int) -> bool:
    return _str(line, index).lower() == "true"  # Java Boolean.parseBoolean


def _msg_type(line: Sequence[str], index: int) -> MessageType:
    ordinal = _int32(line, index)
    try:
        return MessageType(ordinal)
    except ValueError:
        raise TraceDecodeError(f"unknown message type ordinal {ordinal}") from None


def _decode_pub(line: Sequence[str]) -> TraceContext:
    if len(line) < 12:
        raise TraceDecodeError(f"Pub record has {len(line)} fields, needs at least 12")
    success = True
    offset_msg_id = ""
    client_host = ""
    if len(line) == 13:  # before offsetMsgId existed
        success = _boolean(line, 12)
    elif len(line) >= 14:
        offset_msg_id = line[12]
        success = _boolean(line, 13)
        if len(line) >= 15:  # 4.8.0 wrote the client host last
            client_host = line[14]
    bean = TraceBean(
        topic=line[4],
        msg_id=line[5],
        tags=line[6],
        keys=line[7],
        store_host=line[8],
        body_length=_int32(line, 9),
        msg_type=_msg_type(line, 11),
        offset_msg_id=offset_msg_id,
        client_host=client_host,
    )
    return TraceContext(
        trace_type=TraceType.PUB,
        timestamp_ms=_long(line, 1),
        region_id=line[2],
        group_name=line[3],
        cost_time_ms=_int32(line, 10),
        success=success,
        beans=(bean,),
    )


def _decode_sub_before(line: Sequence[str]) -> TraceContext:
    # A 4.8.0 record has a ninth field (client host) that Java's decoder ignores; so do we.
    bean = TraceBean(msg_id=_str(line, 5), retry_times=_int32(line, 6), keys=_str(line, 7))
    return TraceContext(
        trace_type=TraceType.SUB_BEFORE,
        timestamp_ms=_long(line, 1),
        region_id=_str(line, 2),
        group_name=_str(line, 3),
        request_id=_str(line, 4),
        beans=(bean,),
    )


def _decode_sub_after(line: Sequence[str], now_ms: int) -> TraceContext:
    bean = TraceBean(msg_id=_str(line, 2), keys=_str(line, 5))
    context_code = _int32(line, 6) if len(line) >= 7 else 0
    timestamp_ms = now_ms
    group_name = ""
    if len(line) >= 9:  # with an empty group Java sees 8 fields and keeps the decode time
        timestamp_ms = _long(line, 7)
        group_name = line[8]
    return TraceContext(
        trace_type=TraceType.SUB_AFTER,
        request_id=_str(line, 1),
        cost_time_ms=_int32(line, 3),
        success=_boolean(line, 4),
        context_code=context_code,
        timestamp_ms=timestamp_ms,
        group_name=group_name,
        beans=(bean,),
    )


def _decode_end_transaction(line: Sequence[str]) -> TraceContext:
    state_name = _str(line, 11)
    try:
        state = LocalTransactionState(state_name)
    except ValueError:
        raise TraceDecodeError(f"unknown transaction state {state_name!r}") from None
    bean = TraceBean(
        topic=_str(line, 4),
        msg_id=_str(line, 5),
        tags=_str(line, 6),
        keys=_str(line, 7),
        store_host=_str(line, 8),
        msg_type=_msg_type(line, 9),
        transaction_id=_str(line, 10),
        transaction_state=state,
        from_transaction_check=_boolean(line, 12),
    )
    return TraceContext(
        trace_type=TraceType.END_TRANSACTION,
        timestamp_ms=_long(line, 1),
        region_id=_str(line, 2),
        group_name=_str(line, 3),
        beans=(bean,),
    )


def _decode_recall(line: Sequence[str]) -> TraceContext:
    return TraceContext(
        trace_type=TraceType.RECALL,
        timestamp_ms=_long(line, 1),
        region_id=_str(line, 2),
        group_name=_str(line, 3),
        success=_boolean(line, 6),
        beans=(TraceBean(topic=_str(line, 4), msg_id=_str(line, 5)),),
    )


def decode(text: str, *, now_ms: int = 0) -> list[TraceContext]:
    """Parses a trace message body into contexts, one per record, as Java's decoder does.

    Records of an unknown type are skipped. Each context has exactly one bean.

    Args:
        text: the body, decoded from UTF-8.
        now_ms: the timestamp given to a SubAfter record that carries none (Java uses the time
            of decoding, so mqadmin prints "now" for such records).

    Returns:
        The contexts in record order.

    Raises:
        TraceDecodeError: a number field is missing or not a number, or an enum is unknown.
    """
    contexts: list[TraceContext] = []
    if not text:
        return contexts
    for record in java_split(text, FIELD_SEPARATOR):
        line = java_split(record, CONTENT_SEPARATOR)
        kind = line[0]
        if kind == TraceType.PUB.value:
            contexts.append(_decode_pub(line))
        elif kind == TraceType.SUB_BEFORE.value:
            contexts.append(_decode_sub_before(line))
        elif kind == TraceType.SUB_AFTER.value:
            contexts.append(_decode_sub_after(line, now_ms))
        elif kind == TraceType.END_TRANSACTION.value:
            contexts.append(_decode_end_transaction(line))
        elif kind == TraceType.RECALL.value:
            contexts.append(_decode_recall(line))
    return contexts


# --- keys ---------------------------------------------------------------------------------------


def trace_keys(bean: TraceBean) -> list[str]:
    """Returns the keys one bean adds to its trace message: its msgId, then each of its keys.

    This is what lets `queryMessage(traceTopic, msgId)` find the trace. Keys are split on " "
    as Java's `String.split` does (inner empty keys stay, trailing ones go; 4.9.3+ behaviour).
    """
    result = [bean.msg_id]
    if bean.keys:
        result.extend(java_split(bean.keys, KEY_SEPARATOR))
    return result


def java_hash_order(keys: Iterable[str]) -> list[str]:
    """Returns the distinct `keys` in the iteration order of a Java 8+ `HashSet`/`HashMap`.

    Buckets come in index order ((h ^ h >>> 16) & (capacity - 1)), and insertion order holds
    within a bucket. The table starts at 16, doubles past 3/4 full, and also doubles when a
    bucket reaches 9 entries while smaller than 64. Not modelled: the order inside a bucket
    that Java turned into a tree (9+ colliding keys in a table of 64 or more).
    """
    capacity = 16
    buckets: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
    seen: set[str] = set()

    def spread(text: str) -> int:
        h = java_string_hash(text) & 0xFFFFFFFF
        return h ^ (h >> 16)

    def resize() -> None:
        nonlocal capacity, buckets
        capacity *= 2
        grown: list[list[tuple[int, str]]] = [[] for _ in range(capacity)]
        for bucket in buckets:
            for entry in bucket:
                grown[entry[0] & (capacity - 1)].append(entry)
        buckets = grown

    for key in keys:
        if key in seen:
            continue
        seen.add(key)
        h = spread(key)
        bucket = buckets[h & (capacity - 1)]
        bucket.append((h, key))
        if len(bucket) >= 9 and capacity < 64:
            resize()
        if len(seen) > capacity * 3 // 4:
            resize()
    return [key for bucket in buckets for _, key in bucket]


def trace_message_keys(contexts: Iterable[TraceContext]) -> str:
    """Returns the KEYS property of a trace message carrying `contexts`.

    Java gathers `trace_keys` of every bean into a `HashSet` and joins it with " "
    (`Message.setKeys(Collection)`), so the order is the set's iteration order.
    """
    return KEY_SEPARATOR.join(
        java_hash_order(
            key for context in contexts for bean in context.beans for key in trace_keys(bean)
        )
    )


def trace_producer_group(group: str, dispatcher_type: str, counter: int) -> str:
    """The trace producer's group: `_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`."""
    return f"{TRACE_PRODUCER_GROUP_PREFIX}-{group}-{dispatcher_type}-{counter}"
