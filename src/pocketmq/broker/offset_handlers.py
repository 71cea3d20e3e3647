"""Offset requests: consumers' committed offsets and the bounds of queues.

RocketMQ answers these in `ConsumerManageProcessor` and `AdminBrokerProcessor`:

    code                              request ext                             answer ext
    QUERY_CONSUMER_OFFSET (14)        consumerGroup, topic, queueId,          offset
                                      setZeroIfNotFound (optional)
    UPDATE_CONSUMER_OFFSET (15)       consumerGroup, topic, queueId,          -
                                      commitOffset
    SEARCH_OFFSET_BY_TIMESTAMP (29)   topic, queueId, timestamp,              offset
                                      boundaryType (optional)
    GET_MAX_OFFSET (30)               topic, queueId, committed (optional)    offset
    GET_MIN_OFFSET (31)               topic, queueId                          offset
    GET_EARLIEST_MSG_STORETIME (32)   topic, queueId                          timestamp

QUERY_CONSUMER_OFFSET for a group that never committed answers QUERY_NOT_FOUND (the client
then applies its consumeFromWhere), except RocketMQ's "offset 0" rule: when the queue still
starts at 0 and its first message is still in memory (not far behind the CommitLog head), or
the queue is empty, it answers offset 0, so a new group reads a young queue from its start.
The C++ client depends on it: on QUERY_NOT_FOUND it jumps to the max offset and skips every
message already there. `setZeroIfNotFound=false` turns the rule off.

UPDATE_CONSUMER_OFFSET is sent as oneway by some clients and without the oneway bit by the C++
client; the handler always returns a response and the transport drops it for oneway requests.
Unlike RocketMQ, which saves offsets only every `flushConsumerOffsetInterval`, a commit that
waits for its answer is answered once the offsets file is saved (commits arriving together
share one save): an acknowledged commit (the Spark sink's positions, an admin's reset)
survives a broker crash. Oneway commits, the Java clients' periodic ones, are saved on the
interval as before. A header error answers SYSTEM_ERROR, as Java does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pocketmq.broker.headers import (
    answers_header_errors,
    error_response,
    optional_bool,
    required_int,
    required_long,
    required_text,
)
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.store.api import GetStatus
from pocketmq.store.message_store import MessageStore

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel

BOUNDARY_LOWER = "LOWER"
BOUNDARY_UPPER = "UPPER"

OffsetHandler = Callable[[RemotingCommand, "Channel | None"], Awaitable[RemotingCommand]]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class QueueHeader:
    """A queue's name: `GetMaxOffsetRequestHeader`, `GetMinOffsetRequestHeader`,
    `GetEarliestMsgStoretimeRequestHeader`."""

    topic: str
    queue_id: int

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> QueueHeader:
        """Raises `HeaderError` for a missing or bad field."""
        return cls(required_text(ext_fields, "topic"), required_int(ext_fields, "queueId"))


@dataclass(frozen=True, slots=True)
class SearchOffsetHeader:
    """`SearchOffsetRequestHeader`."""

    topic: str
    queue_id: int
    timestamp_ms: int
    boundary_type: str

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> SearchOffsetHeader:
        """Raises `HeaderError` for a missing or bad field."""
        queue = QueueHeader.decode(ext_fields)
        return cls(
            queue.topic,
            queue.queue_id,
            required_long(ext_fields, "timestamp"),
            ext_fields.get("boundaryType", BOUNDARY_LOWER),
        )


@dataclass(frozen=True, slots=True)
class QueryConsumerOffsetHeader:
    """`QueryConsumerOffsetRequestHeader`."""

    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> QueryConsumerOffsetHeader:
        """Raises `HeaderError` for a missing or bad field."""
        return cls(
            required_text(ext_fields, "consumerGroup"),
            required_text(ext_fields, "topic"),
            required_int(ext_fields, "queueId"),
            optional_bool(ext_fields, "setZeroIfNotFound"),
        )


@dataclass(frozen=True, slots=True)
class UpdateConsumerOffsetHeader:
    """`UpdateConsumerOffsetRequestHeader`."""

    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> UpdateConsumerOffsetHeader:
        """Raises `HeaderError` for a missing or bad field."""
        return cls(
            required_text(ext_fields, "consumerGroup"),
            required_text(ext_fields, "topic"),
            required_int(ext_fields, "queueId"),
            required_long(ext_fields, "commitOffset"),
        )


class OffsetHandlers:
    """Answers the offset requests from one store and one consumer offset table."""

    def __init__(
        self,
        store: MessageStore,
        offsets: ConsumerOffsetTable,
        topics: TopicTable,
        *,
        persist: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._store = store
        self._offsets = offsets
        self._topics = topics
        self._persist = persist

    def routes(self) -> dict[int, OffsetHandler]:
        """The request codes these handlers answer, for the server's dispatch table."""
        return {
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
        }

    @answers_header_errors()
    async def query_consumer_offset(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """QUERY_CONSUMER_OFFSET: the group's committed offset, or the "offset 0" rule."""
        header = QueryConsumerOffsetHeader.decode(request.ext_fields)
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        offset = self._offsets.query(group, topic, queue_id)
        log.debug("offset query %s %s/%d: %s", group, topic, queue_id, offset)
        if offset is not None and offset >= 0:
            return _offset_response(request, offset)
        if header.set_zero_if_not_found is False:
            return error_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                "Not found, do not set to zero, maybe this group boot first",
            )
        if first_message_in_memory(self._store, topic, queue_id):
            return _offset_response(request, 0)
        return error_response(
            request, ResponseCode.QUERY_NOT_FOUND, "Not found, maybe this group consumer boot first"
        )

    @answers_header_errors()
    async def update_consumer_offset(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """UPDATE_CONSUMER_OFFSET: commits the group's offset of one queue."""
        header = UpdateConsumerOffsetHeader.decode(request.ext_fields)
        group, topic, queue_id = header.consumer_group, header.topic, header.queue_id
        offset = header.commit_offset
        if self._topics.get(topic) is None:
            return error_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!"
            )
        log.debug("commit %s %s/%d at %d", group, topic, queue_id, offset)
        known = self._offsets.query(group, topic, queue_id)
        if known is not None and offset < known:
            # Taken, as RocketMQ takes it (a consumer correcting an offset the queue no longer
            # holds, a reset), and logged like its "[NOTIFYME]update consumer offset less than
            # store": a stale owner committing late shows up here.
            log.info(
                "offset of %s %s/%d moves back from %d to %d (from %s)",
                group,
                topic,
                queue_id,
                known,
                offset,
                channel.remote_address if channel is not None else "-",
            )
        self._offsets.commit(group, topic, queue_id, offset)
        if self._persist is not None and not request.is_oneway:
            try:
                await self._persist()
            except OSError as exc:
                log.error("consumer offsets could not be saved: %s", exc)
                return error_response(
                    request,
                    ResponseCode.SYSTEM_ERROR,
                    f"the offset is committed in memory but could not be saved ({exc}); "
                    "check the broker's disk",
                )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    @answers_header_errors()
    async def get_max_offset(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """GET_MAX_OFFSET: one past the queue's newest entry (0 for an unknown queue).

        `committed` is accepted and ignored: with one replica everything stored counts.
        """
        queue = QueueHeader.decode(request.ext_fields)
        return _offset_response(
            request, self._store.get_max_offset_in_queue(queue.topic, queue.queue_id)
        )

    @answers_header_errors()
    async def get_min_offset(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """GET_MIN_OFFSET: the queue's oldest entry still readable (0 for an unknown queue)."""
        queue = QueueHeader.decode(request.ext_fields)
        return _offset_response(
            request, self._store.get_min_offset_in_queue(queue.topic, queue.queue_id)
        )

    @answers_header_errors()
    async def search_offset_by_timestamp(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP: the queue offset at a store time.

        `boundaryType` LOWER (the default; also for unknown values) gives the first message
        stored at or after `timestamp` (the max offset when there is none); UPPER gives the
        last message stored at or before it (the min offset when there is none).
        """
        header = SearchOffsetHeader.decode(request.ext_fields)
        topic, queue_id, timestamp_ms = header.topic, header.queue_id, header.timestamp_ms
        store = self._store
        if header.boundary_type.upper() == BOUNDARY_UPPER:
            after = store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms + 1)
            offset = max(after - 1, store.get_min_offset_in_queue(topic, queue_id))
        else:
            offset = store.get_offset_in_queue_by_time(topic, queue_id, timestamp_ms)
        return _offset_response(request, offset)

    @answers_header_errors()
    async def get_earliest_msg_storetime(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: store time of the queue's oldest message, or -1."""
        queue = QueueHeader.decode(request.ext_fields)
        timestamp_ms = self._store.get_earliest_message_time(queue.topic, queue.queue_id)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={"timestamp": str(timestamp_ms)}
        )


def _offset_response(request: RemotingCommand, offset: int) -> RemotingCommand:
    return RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, ext_fields={"offset": str(offset)}
    )


def first_message_in_memory(store: MessageStore, topic: str, queue_id: int) -> bool:
    """Whether the queue starts at 0 and reading it from 0 stays in memory: where a new group
    starts at 0 rather than at the end (RocketMQ's "offset 0" rule, also for a new POP group).

    Reads entry 0 the way a pull would: the store's `suggest_slave` is RocketMQ's
    "far behind the head, in disk" test (`checkInDiskByConsumeOffset`). An empty or
    missing queue counts as in memory (RocketMQ 4.x: a new group starts at 0).
    """
    if store.get_min_offset_in_queue(topic, queue_id) > 0:
        return False
    result = store.get_message(topic, queue_id, 0, 1)
    if result.status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
        return True
    return result.status is GetStatus.FOUND and not result.suggest_slave
