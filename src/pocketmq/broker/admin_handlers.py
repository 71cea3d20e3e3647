"""Admin and lookup handlers of the broker: topics, message queries, runtime info.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_BROKER_RUNTIME_INFO (28), QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33), with RocketMQ's
header names (`CreateTopicRequestHeader`, `QueryMessageRequestHeader`, ...). A bad header
answers INVALID_PARAMETER. Numbers without a Java type check (queue counts, `perm`, query
bounds) are read as Python's int() reads them, as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final

from pocketmq.broker.headers import (
    HeaderError,
    answers_header_errors,
    error_response,
    optional_bool,
    required_long,
    required_text,
)
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicConfig, TopicFilterType, TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.topic_attributes import apply_attributes
from pocketmq.common.topic_names import TopicError, is_system_topic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler
from pocketmq.runtime.clock import Clock
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

DEFAULT_QUERY_MAX_NUM: Final = 32
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


def _int_field(ext_fields: Mapping[str, str], name: str, default: str) -> int:
    try:
        return int(ext_fields.get(name, default))
    except ValueError as exc:
        raise HeaderError(str(exc)) from None


def _forced(ext_fields: Mapping[str, str]) -> bool:
    return ext_fields.get("force", "").strip().lower() == "true"


@dataclass(frozen=True, slots=True)
class CreateTopicHeader:
    """`CreateTopicRequestHeader`, as the topic config it asks for."""

    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: TopicFilterType
    topic_sys_flag: int
    order: bool
    attributes: str = ""
    """`+key=value,-key` changes of the topic's attributes."""

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> CreateTopicHeader:
        """Raises `HeaderError` for a missing or bad field."""
        topic = required_text(ext_fields, "topic")
        read_queue_nums = _int_field(ext_fields, "readQueueNums", "16")
        write_queue_nums = _int_field(ext_fields, "writeQueueNums", "16")
        perm = _int_field(ext_fields, "perm", "6")
        try:
            filter_type = TopicFilterType(ext_fields.get("topicFilterType", "SINGLE_TAG"))
        except ValueError as exc:
            raise HeaderError(str(exc)) from None
        return cls(
            topic,
            read_queue_nums,
            write_queue_nums,
            perm,
            filter_type,
            _int_field(ext_fields, "topicSysFlag", "0"),
            optional_bool(ext_fields, "order") or False,
            ext_fields.get("attributes") or "",
        )

    def topic_config(self, current: TopicConfig | None = None) -> TopicConfig:
        """The config asked for, not yet validated (`TopicTable.update` does that); its
        attributes are `current`'s changed as the header says.

        Raises:
            TopicAttributeError: attribute text that does not parse or is unknown.
        """
        attributes = apply_attributes(
            current.attributes if current is not None else {}, self.attributes
        )
        return TopicConfig(
            topic_name=self.topic,
            read_queue_nums=self.read_queue_nums,
            write_queue_nums=self.write_queue_nums,
            perm=self.perm,
            topic_filter_type=self.topic_filter_type,
            topic_sys_flag=self.topic_sys_flag,
            order=self.order,
            attributes=attributes,
        )


@dataclass(frozen=True, slots=True)
class QueryMessageHeader:
    """`QueryMessageRequestHeader`."""

    topic: str
    key: str
    max_num: int
    begin_timestamp_ms: int
    end_timestamp_ms: int
    unique_key_query: bool

    @classmethod
    def decode(cls, ext_fields: Mapping[str, str]) -> QueryMessageHeader:
        """Raises `HeaderError` for a missing or bad field."""
        return cls(
            required_text(ext_fields, "topic"),
            required_text(ext_fields, "key"),
            _int_field(ext_fields, "maxNum", str(DEFAULT_QUERY_MAX_NUM)),
            _int_field(ext_fields, "beginTimestamp", "0"),
            _int_field(ext_fields, "endTimestamp", str(1 << 62)),
            ext_fields.get(UNIQUE_KEY_QUERY) == "true",
        )


class AdminHandlers:
    """Topic administration and message lookups."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        on_topics_changed: Callable[[], None],
        topics_updated: Callable[[list[str]], Awaitable[None]],
        runtime_info: Callable[[], dict[str, str]],
    ) -> None:
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clock = clock
        self._on_topics_changed = on_topics_changed
        self._topics_updated = topics_updated
        self._runtime_info = runtime_info

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
        }

    @answers_header_errors(ResponseCode.INVALID_PARAMETER)
    async def update_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        header = CreateTopicHeader.decode(request.ext_fields)
        if is_system_topic(header.topic) and not _forced(request.ext_fields):
            # Apache RocketMQ 5's answer, code and remark alike; `force=true` is pocketmq's
            # way out for an operator who means it (mqadmin has none).
            return error_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The topic[{header.topic}] is conflict with system topic.",
            )
        try:
            config = header.topic_config(self._topics.get(header.topic))
            self._topics.update(config, self._clock.now_ms())
        except (TopicError, ValueError) as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        # As RocketMQ: answered once the NameServers know the topic, so that the route is
        # there for whoever asks next (a producer, `topicRoute`, another broker's creation).
        await self._topics_updated([header.topic])
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    @answers_header_errors(ResponseCode.INVALID_PARAMETER)
    async def delete_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        name = required_text(request.ext_fields, "topic")
        if self._topics.delete(name, self._clock.now_ms()):
            self._offsets.remove_topic(name)
            self._on_topics_changed()  # the NameServers hear of it with the next whole table
            await self._topics_updated([name])  # saved before the answer, as RocketMQ's is
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def all_topic_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = json.dumps(self._topics.snapshot(), separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def runtime_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = json.dumps({"table": self._runtime_info()}, separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    @answers_header_errors(ResponseCode.INVALID_PARAMETER)
    async def query_message(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        header = QueryMessageHeader.decode(request.ext_fields)
        topic, key = header.topic, header.key
        max_num = DEFAULT_QUERY_MAX_NUM if header.unique_key_query else header.max_num
        found = self._store.query_message(
            topic, key, max_num, header.begin_timestamp_ms, header.end_timestamp_ms
        )
        records = [self._store.select_one_message_by_offset(m.physical_offset) for m in found]
        body = b"".join(r for r in records if r)
        if not body:
            return error_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"can not find message with key {key!r} in topic {topic!r}, maybe time range "
                "not correct",
            )
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={
                "indexLastUpdateTimestamp": str(self._store.index.files[-1].end_timestamp)
                if self._store.index.files
                else "0",
                "indexLastUpdatePhyoffset": str(self._store.index.max_phy_offset),
            },
            body=body,
        )

    @answers_header_errors(ResponseCode.INVALID_PARAMETER)
    async def view_message_by_id(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        offset = required_long(request.ext_fields, "offset")
        record = self._store.select_one_message_by_offset(offset)
        if record is None:
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=record)
