"""The client's message model: what users send (`Message`), what they receive (`MessageExt`),
where it went (`SendResult`, `MessageQueue`) and the client-side unique id (UNIQ_KEY).

A `Message` keeps its user properties apart from the system ones (tags, keys, delay level,
wait-store-ok); `encode_properties` joins them into RocketMQ's properties string only when the
message is sent. A `MessageExt` is built from a decoded CommitLog record: bodies the producer
compressed (sysFlag bit 0, zlib) are inflated here, so listeners always see what was sent.

Pure: no I/O; the clock reading for ids is passed in.
"""

from __future__ import annotations

import enum
import os
import socket
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final

from pocketmq.common.constants import (
    COMPRESSED_FLAG,
    KEY_SEPARATOR,
    NAME_VALUE_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from pocketmq.common.message_id import create_offset_msg_id
from pocketmq.common.properties import encode_properties
from pocketmq.common.stored_message import HostAddress, StoredMessage

SYSTEM_PROPERTY_KEYS: Final = frozenset(
    {
        PROPERTY_TAGS,
        PROPERTY_KEYS,
        PROPERTY_DELAY_TIME_LEVEL,
        PROPERTY_WAIT_STORE_MSG_OK,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        PROPERTY_TIMER_DELIVER_MS,
        PROPERTY_TIMER_DELAY_MS,
    }
)
"""Keys a `Message` sets from its own fields; `properties` may not name them."""
_TAGS_FIELD: Final = PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_KEYS_FIELD: Final = PROPERTY_KEYS + NAME_VALUE_SEPARATOR
_UNIQ_KEY_FIELD: Final = PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (`MessageQueue`); sorts as Java's does."""

    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}:{self.queue_id}"


@dataclass(slots=True)
class Message:
    """A message to send.

    Attributes:
        topic: Where it goes.
        body: The payload; large ones are compressed on the wire (see the producer's
            `compress_over_bytes`) and inflated for consumers.
        tags: One tag; consumers filter on it (`TagA || TagB`).
        keys: Business keys, searchable with `queryMsgByKey`; several as a list.
        properties: User properties (string to string).
        delay_level: RocketMQ's delay level (1 = 1 s ... 18 = 2 h); 0 sends at once.
        wait_store_msg_ok: Whether the broker answers only once the message is stored as its
            flush and replication rules say (RocketMQ's `waitStoreMsgOK`).
        flag: An application flag the broker stores and returns untouched.
        deliver_time_ms: Deliver at this wall-clock time (ms since the epoch) instead of at
            once: a 5.x timer message (TIMER_DELIVER_MS), up to the broker's
            `timerMaxDelaySec` ahead (3 days by default). Its send result has a
            `recall_handle`.
        delay_ms: Deliver this many milliseconds after the broker stores it (TIMER_DELAY_MS);
            the relative form of `deliver_time_ms`. Set one of the two, not both, and no
            `delay_level` with either.
    """

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | list[str] | None = None
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    wait_store_msg_ok: bool = True
    flag: int = 0
    deliver_time_ms: int | None = None
    delay_ms: int | None = None

    @property
    def keys_text(self) -> str | None:
        """The keys as RocketMQ's KEYS property carries them (space-separated)."""
        if self.keys is None or isinstance(self.keys, str):
            return self.keys or None
        return KEY_SEPARATOR.join(self.keys) or None

    def encode_properties(self, unique_id: str | None) -> str:
        """RocketMQ's properties string of this message, with `unique_id` as UNIQ_KEY.

        Raises:
            PropertyError: a key or value is empty or holds a separator character.
            ValueError: a user property uses a system key (tags, keys, ...): set the field.
        """
        if (
            not self.properties
            and self.delay_level <= 0
            and self.wait_store_msg_ok
            and self.deliver_time_ms is None
            and self.delay_ms is None
        ):
            # The usual message (tags, keys and an id): built directly, in the order the
            # general path gives, for every message a producer sends.
            tags = self.tags
            keys = self.keys_text
            texts = (tags or "") + (keys or "") + (unique_id or "")
            if (
                unique_id != ""
                and NAME_VALUE_SEPARATOR not in texts
                and PROPERTY_SEPARATOR not in texts
            ):
                text = f"{_TAGS_FIELD}{tags}{PROPERTY_SEPARATOR}" if tags else ""
                if keys:
                    text += f"{_KEYS_FIELD}{keys}{PROPERTY_SEPARATOR}"
                if unique_id:
                    text += f"{_UNIQ_KEY_FIELD}{unique_id}{PROPERTY_SEPARATOR}"
                return text
        return self._encode_any_properties(unique_id)

    def _encode_any_properties(self, unique_id: str | None) -> str:
        clash = SYSTEM_PROPERTY_KEYS.intersection(self.properties)
        if clash:
            raise ValueError(
                f"properties may not set {', '.join(sorted(clash))}: use the Message fields "
                "(tags, keys, delay_level, wait_store_msg_ok, deliver_time_ms, delay_ms) instead"
            )
        timers = (self.delay_level > 0, self.deliver_time_ms is not None, self.delay_ms is not None)
        if sum(timers) > 1:
            raise ValueError("set one of delay_level, deliver_time_ms and delay_ms, not several")
        if self.delay_ms is not None and self.delay_ms < 0:
            raise ValueError(f"delay_ms is {self.delay_ms}: it cannot be negative")
        system: dict[str, str | None] = {
            PROPERTY_TAGS: self.tags or None,
            PROPERTY_KEYS: self.keys_text,
            PROPERTY_DELAY_TIME_LEVEL: str(self.delay_level) if self.delay_level > 0 else None,
            PROPERTY_WAIT_STORE_MSG_OK: None if self.wait_store_msg_ok else "false",
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: unique_id,
            PROPERTY_TIMER_DELIVER_MS: _optional_text(self.deliver_time_ms),
            PROPERTY_TIMER_DELAY_MS: _optional_text(self.delay_ms),
        }
        system.update(self.properties)
        return encode_properties(system)

    @property
    def delivers_later(self) -> bool:
        """Whether the broker holds it back (a delay level or a timer): never batched."""
        return self.delay_level > 0 or self.deliver_time_ms is not None or self.delay_ms is not None

    @property
    def sharding_key(self) -> str | None:
        """The ordering key of a message sent with one (`__SHARDINGKEY`)."""
        return self.properties.get(PROPERTY_SHARDING_KEY)


# Not frozen: one is built per consumed message, and a frozen dataclass's `__init__` sets each
# of its 13 fields through `object.__setattr__` (about 1 us a message more, measured).
@dataclass(slots=True)
class MessageExt:
    """A message as consumers receive it: what was sent plus where and when it was stored.

    Attributes:
        topic: The topic it was sent to (for a retried message, its original topic).
        body: The payload, inflated if the producer compressed it.
        properties: Every property, system ones (TAGS, KEYS, UNIQ_KEY ...) included.
        queue: The queue it was read from.
        queue_offset: Its position in that queue.
        commit_log_offset: Its position in the broker's CommitLog.
        born_timestamp_ms: When the producer made it.
        store_timestamp_ms: When the broker stored it.
        born_host: The producer's address.
        store_host: The broker's address.
        reconsume_times: How often it was redelivered after a failed consumption.
        flag: The application flag.
        sys_flag: RocketMQ's system flags as stored.
    """

    topic: str
    body: bytes
    properties: Mapping[str, str]
    queue: MessageQueue
    queue_offset: int
    commit_log_offset: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: HostAddress
    store_host: HostAddress
    reconsume_times: int
    flag: int
    sys_flag: int

    @property
    def offset_msg_id(self) -> str:
        """The broker's id: store host and CommitLog offset (`queryMsgById`)."""
        return create_offset_msg_id(self.store_host, self.commit_log_offset)

    @property
    def msg_id(self) -> str:
        """The producer's unique id (UNIQ_KEY), or the offset id when there is none."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        text = self.properties.get(PROPERTY_KEYS)
        return text.split(KEY_SEPARATOR) if text else []

    @property
    def user_properties(self) -> dict[str, str]:
        """The properties the producer set itself (no system keys)."""
        return {k: v for k, v in self.properties.items() if not _is_system_key(k)}

    @classmethod
    def from_stored(
        cls, stored: StoredMessage, broker_name: str, *, pulled_from: MessageQueue | None = None
    ) -> MessageExt:
        """The consumer's view of a decoded record read from `broker_name` (from the queue
        `pulled_from`, shared by every message of a pull, when given).

        A message redelivered through `%RETRY%<group>` carries its original topic in
        RETRY_TOPIC; listeners see that topic, as with RocketMQ's clients.

        Raises:
            zlib.error: the COMPRESSED flag is set but the body is not zlib data.
        """
        body = stored.body
        if stored.sys_flag & COMPRESSED_FLAG:
            body = zlib.decompress(body)
        properties = stored.properties
        topic = properties.get(PROPERTY_RETRY_TOPIC) or stored.topic
        return cls(
            topic=topic,
            body=body,
            properties=properties,
            queue=(
                pulled_from
                if pulled_from is not None
                and pulled_from.queue_id == stored.queue_id
                and pulled_from.topic == stored.topic
                and pulled_from.broker_name == broker_name
                else MessageQueue(stored.topic, broker_name, stored.queue_id)
            ),
            queue_offset=stored.queue_offset,
            commit_log_offset=stored.physical_offset,
            born_timestamp_ms=stored.born_timestamp,
            store_timestamp_ms=stored.store_timestamp,
            born_host=stored.born_host,
            store_host=stored.store_host,
            reconsume_times=stored.reconsume_times,
            flag=stored.flag,
            sys_flag=stored.sys_flag,
        )


def _optional_text(value: int | None) -> str | None:
    return None if value is None else str(value)


def _is_system_key(key: str) -> bool:
    return key in SYSTEM_PROPERTY_KEYS or key in _OTHER_SYSTEM_KEYS or key.startswith("__")


_OTHER_SYSTEM_KEYS: Final = frozenset(
    {
        "MIN_OFFSET",
        "MAX_OFFSET",
        PROPERTY_RECONSUME_TIME,
        PROPERTY_RETRY_TOPIC,
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "MSG_REGION",
        "TRACE_ON",
        "CONSUME_START_TIME",
        "ORIGIN_MESSAGE_ID",
        "MAX_RECONSUME_TIMES",
        "CORRECTION_FLAG",
        "TRANSACTION_CHECK_TIMES",
        "TRAN_PREPARED_QUEUE_OFFSET",
        "TIMER_DELAY_SEC",
        "TIMER_OUT_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_DEL_UNIQKEY",
    }
)


class SendStatus(enum.Enum):
    """How a send ended (`SendStatus`): only SEND_OK means every rule was met."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    """Stored, but the SYNC_FLUSH fsync did not finish in time."""
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    """Stored on the master, but no slave confirmed it in time."""
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    """Stored on the master; a SYNC_MASTER had no slave to copy it to."""


# Not frozen, as `MessageExt`: the automatic batcher builds one per message it sends, and the
# frozen `__init__` cost more than a microsecond of each (measured against 10 fields).
@dataclass(slots=True)
class SendResult:
    """What became of a sent message.

    Attributes:
        status: See `SendStatus`.
        msg_id: The unique id the producer gave it (UNIQ_KEY); for a batch, the ids joined
            by commas, as Java's `SendResult` does.
        offset_msg_id: The broker's id (store host + CommitLog offset).
        queue: Where it was stored.
        queue_offset: Its offset in that queue (the first one for a batch).
        region_id: The broker's region (MSG_REGION).
        transaction_id: Set for transactional half messages.
        recall_handle: Set for timer messages: pass it to `Producer.recall` to cancel the
            message before its time.
        durability: What "stored" meant, from a pocketmq broker: "IN_MEMORY" (written, in
            the page cache: survives a broker crash, not a power loss) or "FLUSHED" (fsynced
            on the master). None from brokers that do not say.
        replicas: How many copies held the message when the broker answered: 1 for the
            master alone, 2 with one slave's acknowledgement, ... None when not said.
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    queue: MessageQueue
    queue_offset: int
    region_id: str = "DefaultRegion"
    transaction_id: str | None = None
    recall_handle: str | None = None
    durability: str | None = None
    replicas: int | None = None


class UniqueIdGenerator:
    """Client message ids (UNIQ_KEY) shaped as RocketMQ's `MessageClientIDSetter` makes them.

    16 bytes as 32 upper-case hex characters: the client's IPv4 address, its pid (2 bytes),
    a random class-loader hash (4 bytes), milliseconds since the start of the month (4 bytes)
    and a 2-byte counter. The broker indexes them, so `queryMsgById` finds a message by it.
    """

    __slots__ = ("_counter", "_month_start_ms", "_next_month_start_ms", "_prefix")

    def __init__(self, ip: str, random_bits: int) -> None:
        try:
            ip_bytes = socket.inet_aton(ip)
        except OSError:
            ip_bytes = socket.inet_aton("127.0.0.1")
        self._prefix = (
            (ip_bytes + struct.pack(">HI", os.getpid() & 0xFFFF, random_bits & 0xFFFFFFFF))
            .hex()
            .upper()
        )
        self._counter = 0
        self._month_start_ms = 0
        self._next_month_start_ms = 0

    def next(self, now_ms: int) -> str:
        """A new id for a message made at `now_ms`."""
        if now_ms >= self._next_month_start_ms or now_ms < self._month_start_ms:
            self._set_month(now_ms)
        self._counter = (self._counter + 1) & 0xFFFF
        since = (now_ms - self._month_start_ms) & 0xFFFFFFFF
        return f"{self._prefix}{since:08X}{self._counter:04X}"

    def next_many(self, now_ms: int, count: int) -> list[str]:
        """`count` new ids for messages made at `now_ms`: what `count` calls of `next` give."""
        if now_ms >= self._next_month_start_ms or now_ms < self._month_start_ms:
            self._set_month(now_ms)
        since = (now_ms - self._month_start_ms) & 0xFFFFFFFF
        head = f"{self._prefix}{since:08X}"
        first = self._counter + 1
        self._counter = (self._counter + count) & 0xFFFF
        # The counter's hex from a table of bytes: a third of formatting it an id.
        return [head + _HEX[(n >> 8) & 0xFF] + _HEX[n & 0xFF] for n in range(first, first + count)]

    def _set_month(self, now_ms: int) -> None:
        local = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone()
        start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        following = (start.replace(day=28) + _FOUR_DAYS).replace(day=1)
        self._month_start_ms = int(start.timestamp() * 1000)
        self._next_month_start_ms = int(following.timestamp() * 1000)


_FOUR_DAYS: Final = timedelta(days=4)
_HEX: Final = [f"{byte:02X}" for byte in range(256)]


def batch_msg_ids(ids: Iterable[str]) -> str:
    """The msg_id of a batch result: the members' ids joined by commas (Java's format)."""
    return ",".join(ids)
