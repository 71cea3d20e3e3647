"""The values that cross the store's boundary: what to put, what came of it, what a read found.

Outcomes are values, not exceptions (`PutResult.status`, `GetResult.status`), with RocketMQ's
status names (`PutMessageStatus`, `GetMessageStatus`) so the broker can map them to response
codes one to one.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, Protocol

from pocketmq.common.batch import BatchSpan
from pocketmq.common.stored_message import HostAddress


@dataclass(slots=True)
class MessageToStore:
    """One message as the broker hands it to the store (Java's `MessageExtBrokerInner`).

    `properties` is the encoded properties string as it came off the wire: the store copies it
    into the record without decoding it.
    """

    topic: str
    body: bytes
    properties: str = ""
    queue_id: int = 0
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # Messages of a batch are written to consecutive queue offsets of one queue; queue_offset
    # is assigned by the store, and is only read back by callers (e.g. transactional replays).
    queue_offset: int = field(default=-1)


@dataclass(frozen=True, slots=True)
class BatchToStore:
    """A batch send as it came off the wire: its body of entries (`common/batch.py`) and what
    its messages share from the request header. The store writes each entry's record straight
    from the body, with no object per message; `messages()` gives the same messages one by one
    for a writer without that path."""

    topic: str
    queue_id: int
    body: bytes
    spans: list[BatchSpan]
    """Where each entry is (`scan_batch_body`)."""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = ("127.0.0.1", 0)
    reconsume_times: int = 0

    def messages(self) -> list[MessageToStore]:
        body = self.body
        return [
            MessageToStore(
                topic=self.topic,
                body=body[start:stop],
                properties=properties,
                queue_id=self.queue_id,
                flag=flag,
                sys_flag=self.sys_flag,
                born_timestamp=self.born_timestamp,
                born_host=self.born_host,
                reconsume_times=self.reconsume_times,
            )
            for flag, start, stop, properties in self.spans
        ]


class PutStatus(enum.Enum):
    """RocketMQ's `PutMessageStatus`."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


STORED_STATUSES: Final = frozenset(
    {
        PutStatus.PUT_OK,
        PutStatus.FLUSH_DISK_TIMEOUT,
        PutStatus.FLUSH_SLAVE_TIMEOUT,
        PutStatus.SLAVE_NOT_AVAILABLE,
    }
)
"""Put outcomes after which the messages are in the CommitLog (the rest: nothing stored)."""


class Durability(enum.Enum):
    """What had happened to a message when its put was acknowledged."""

    IN_MEMORY = "IN_MEMORY"  # in the page cache: survives a process crash, not a power loss
    FLUSHED = "FLUSHED"  # fdatasync returned for its bytes


@dataclass(slots=True)
class PutResult:
    """What came of a put; offsets are those of the first message of a batch."""

    status: PutStatus
    physical_offsets: list[int] = field(default_factory=list)
    queue_offset: int = -1
    wrote_bytes: int = 0
    store_timestamp: int = 0
    durability: Durability = Durability.IN_MEMORY
    replicas: int = 1
    """Copies known to hold the bytes when the put returned: this store plus acknowledging
    slaves (Master/Slave replication)."""
    remark: str = ""

    @property
    def end_offset(self) -> int:
        """The CommitLog offset just past what this put wrote."""
        return self.physical_offsets[0] + self.wrote_bytes if self.physical_offsets else 0

    @property
    def ok(self) -> bool:
        return self.status is PutStatus.PUT_OK

    @property
    def message_count(self) -> int:
        return len(self.physical_offsets)


NEVER_STORABLE: Final = frozenset({PutStatus.MESSAGE_ILLEGAL, PutStatus.PROPERTIES_SIZE_EXCEEDED})
"""Put outcomes that storing the same message again cannot change; every other failure may pass
(a full or failed disk, a slow flush, a missing slave, a store being stopped)."""


class Delivery(enum.Enum):
    """What came of storing a message the broker moves itself (a due delayed or timer message)."""

    STORED = "stored"
    SKIPPED = "skipped"
    """Never storable (refused on the way in, or illegal for the store): move past it."""
    RETRY = "retry"
    """Not stored for a reason that may pass: try the same message again later."""


Deliver = Callable[[MessageToStore], Awaitable[tuple[Delivery, str]]]
"""Stores one due message the way every message is stored (the broker's put path); returns
what came of it and, when it was not stored, why."""


def classify_put(result: PutResult) -> tuple[Delivery, str]:
    """The `Delivery` a put result means, and why for a message not stored."""
    if result.status in STORED_STATUSES:
        return Delivery.STORED, ""
    why = f"{result.status.value} {result.remark}".rstrip()
    return (Delivery.SKIPPED if result.status in NEVER_STORABLE else Delivery.RETRY), why


class Replication(Protocol):
    """How a master's puts wait for slaves (`broker/ha`); the store calls it after each put."""

    def notify_appended(self) -> None:
        """New bytes are in the CommitLog: stream them."""

    async def settle(self, result: PutResult) -> None:
        """Sets `result.replicas`, and on a synchronous master waits for a slave: the status
        becomes FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE when none confirms in time."""


class GetStatus(enum.Enum):
    """RocketMQ's `GetMessageStatus`."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetResult:
    """What a read by queue found: stored records back to back, and where to go on from.

    `buffers` are copies of whole stored records, so they stay valid after files are deleted.
    """

    status: GetStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[bytes] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    total_bytes: int = 0
    # True when the reader is far behind the head (RocketMQ suggests reading from a slave then).
    suggest_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.buffers)
