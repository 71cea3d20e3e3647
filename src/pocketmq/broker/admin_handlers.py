"""Admin and lookup handlers of the broker: topics, message queries, runtime info.

UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215), GET_ALL_TOPIC_CONFIG (21),
GET_BROKER_RUNTIME_INFO (28), QUERY_MESSAGE (12) and VIEW_MESSAGE_BY_ID (33), with RocketMQ's
header names (`CreateTopicRequestHeader`, `QueryMessageRequestHeader`, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

from pocketmq.broker.headers import (
    HeaderError,
    error_response,
    optional_bool,
    required_long,
    required_text,
)
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicConfig, TopicFilterType, TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.topic_names import TopicError
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler
from pocketmq.runtime.clock import Clock
from pocketmq.store.message_store import MessageStore

DEFAULT_QUERY_MAX_NUM: Final = 32
UNIQUE_KEY_QUERY: Final = "_UNIQUE_KEY_QUERY"


class AdminHandlers:
    """Topic administration and message lookups."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        on_topics_changed: Callable[[], None],
        runtime_info: Callable[[], dict[str, str]],
    ) -> None:
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clock = clock
        self._on_topics_changed = on_topics_changed
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

    async def update_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        ext = request.ext_fields
        try:
            name = required_text(ext, "topic")
            config = TopicConfig(
                topic_name=name,
                read_queue_nums=int(ext.get("readQueueNums", "16")),
                write_queue_nums=int(ext.get("writeQueueNums", "16")),
                perm=int(ext.get("perm", "6")),
                topic_filter_type=TopicFilterType(ext.get("topicFilterType", "SINGLE_TAG")),
                topic_sys_flag=int(ext.get("topicSysFlag", "0")),
                order=optional_bool(ext, "order") or False,
            )
            self._topics.update(config, self._clock.now_ms())
        except (HeaderError, TopicError, ValueError) as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        self._on_topics_changed()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def delete_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            name = required_text(request.ext_fields, "topic")
        except HeaderError as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        if self._topics.delete(name, self._clock.now_ms()):
            self._offsets.remove_topic(name)
            self._on_topics_changed()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def all_topic_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = json.dumps(self._topics.snapshot(), separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def runtime_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = json.dumps({"table": self._runtime_info()}, separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def query_message(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        ext = request.ext_fields
        try:
            topic = required_text(ext, "topic")
            key = required_text(ext, "key")
            max_num = int(ext.get("maxNum", str(DEFAULT_QUERY_MAX_NUM)))
            begin = int(ext.get("beginTimestamp", "0"))
            end = int(ext.get("endTimestamp", str(1 << 62)))
        except (HeaderError, ValueError) as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        if ext.get(UNIQUE_KEY_QUERY) == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        found = self._store.query_message(topic, key, max_num, begin, end)
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

    async def view_message_by_id(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        try:
            offset = required_long(request.ext_fields, "offset")
        except HeaderError as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        record = self._store.select_one_message_by_offset(offset)
        if record is None:
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}"
            )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=record)
