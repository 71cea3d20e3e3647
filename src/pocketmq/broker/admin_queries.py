"""Broker lookups behind mqadmin's `topicStatus`, `producerConnection`, `brokerConsumeStats`,
`queryCq`, `exportMetadata` and friends.

Answers, with RocketMQ's headers and bodies (`AdminBrokerProcessor`):

    code                                     request ext              answer body
    GET_TOPIC_CONFIG (351)                   topic, lo?               TopicConfigAndQueueMapping
    GET_PRODUCER_CONNECTION_LIST (204)       producerGroup            ProducerConnection
    QUERY_TOPIC_CONSUME_BY_WHO (300)         topic                    GroupList
    GET_BROKER_CONSUME_STATS (317)           isOrder, timeoutMillis   ConsumeStatsList
    CLEAN_EXPIRED_CONSUMEQUEUE (306)         -                        -
    QUERY_CONSUME_QUEUE (321)                topic, queueId, index,   QueryConsumeQueueResponseBody
                                             count, consumerGroup?
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305)  -                        TopicList
    SET_MESSAGE_REQUEST_MODE (401)           body                     REQUEST_CODE_NOT_SUPPORTED

Bodies are written as fastjson writes them: fields sorted by name, null fields left out (so a
topic config has no `mappingDetail`: this broker has no static topics), `ConsumeStats` keyed by
`MessageQueue` objects (see `admin_stats.py`).

A producer connection names the client's language and version, which only the heartbeat's
request header carries; `remember_clients` wraps the HEART_BEAT handler to note them per
connection.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.broker.admin_stats import OffsetWrapper, encode_consume_stats, offset_row
from pocketmq.broker.clients import CLIENT_ANSWER_TIMEOUT_S, ClientChannel, ClientRegistry
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.groups import SubscriptionGroupTable
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
from pocketmq.common.codes import LanguageCode, RequestCode, ResponseCode
from pocketmq.common.subscription import SubscriptionData
from pocketmq.common.topic_names import SYSTEM_TOPIC_SET, is_system_topic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel, RequestHandler
from pocketmq.store.message_store import MessageStore

POP_NOT_SUPPORTED: Final = "POP consumption is not supported yet"


def _compact(document: Any) -> str:
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def subscription_json(sub: SubscriptionData) -> dict[str, Any]:
    """RocketMQ's `SubscriptionData` as fastjson writes it."""
    return {
        "classFilterMode": False,
        "codeSet": sorted(sub.code_set),
        "expressionType": sub.expression_type,
        "subString": sub.sub_string,
        "subVersion": sub.sub_version,
        "tagsSet": sorted(sub.tags_set),
        "topic": sub.topic,
    }


@dataclass(frozen=True, slots=True)
class ClientIdentity:
    """What a client's request header says about it."""

    language: str
    version: int


@dataclass(frozen=True, slots=True)
class ConsumeQueueQuery:
    """`QueryConsumeQueueRequestHeader`."""

    topic: str
    queue_id: int
    index: int
    count: int
    consumer_group: str | None

    @classmethod
    def decode(cls, ext: Mapping[str, str]) -> ConsumeQueueQuery:
        """Raises `HeaderError` for a missing or bad field."""
        return cls(
            required_text(ext, "topic"),
            required_int(ext, "queueId"),
            required_long(ext, "index"),
            required_int(ext, "count"),
            ext.get("consumerGroup"),
        )


class AdminQueryHandlers:
    """Read-only admin lookups over topics, clients, offsets and the consume queues."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        clients: ClientRegistry,
        groups: SubscriptionGroupTable,
        config: BrokerConfig,
    ) -> None:
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clients = clients
        self._groups = groups
        self._config = config
        # Keyed weakly: a closed connection's entry goes with it, as its registrations do.
        self._identities: weakref.WeakKeyDictionary[Channel, ClientIdentity] = (
            weakref.WeakKeyDictionary()
        )

    def handlers(self) -> dict[int, RequestHandler]:
        """The request codes these handlers answer, for the server's dispatch table."""
        return {
            RequestCode.GET_TOPIC_CONFIG: self.topic_config,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.consumer_running_info,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.topic_consumed_by,
            RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queues,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.system_topics,
            RequestCode.SET_MESSAGE_REQUEST_MODE: self.set_message_request_mode,
        }

    def remember_clients(self, heartbeat: RequestHandler) -> RequestHandler:
        """`heartbeat`, noting first the language and version its sender's header names."""

        async def handle(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
            language = getattr(request.language, "name", str(request.language))
            self._identities[channel] = ClientIdentity(language, int(request.version))
            return await heartbeat(request, channel)

        return handle

    @property
    def _broker_addr(self) -> str:
        ip, port = self._store.store_host
        return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"

    @answers_header_errors()
    async def topic_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_TOPIC_CONFIG: one topic's config (`lo` asks for a static-topic mapping, which
        this broker never has)."""
        topic = required_text(request.ext_fields, "topic")
        config = self._topics.get(topic)
        if config is None:
            return error_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}"
            )
        body = _compact(config.to_json()).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    @answers_header_errors()
    async def producer_connections(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: the producers of a group connected here."""
        group = required_text(request.ext_fields, "producerGroup")
        members = self._clients.producer_groups.get(group)
        if not members:
            # RocketMQ forgets a group with its last producer: an empty one does not exist.
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist"
            )
        body = _compact({"connectionSet": self._connections(members.values())}).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    @answers_header_errors()
    async def consumer_connections(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: the online members of a consumer group, and what the
        group subscribes to and how it consumes."""
        group = required_text(request.ext_fields, "consumerGroup")
        info = self._clients.consumer_groups.get(group)
        if info is None or not info.clients:
            return error_response(
                request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        document = {
            "connectionSet": self._connections(info.clients.values()),
            "consumeFromWhere": info.consume_from_where.name,
            "consumeType": info.consume_type.name,
            "messageModel": info.message_model.name,
            "subscriptionTable": {
                topic: subscription_json(sub) for topic, sub in info.subscriptions.items()
            },
        }
        body = _compact(document).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    @answers_header_errors()
    async def consumer_running_info(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """GET_CONSUMER_RUNNING_INFO: asks one online consumer how it runs (its queues,
        offsets, rates, optionally its thread stacks) and passes its answer on."""
        group = required_text(request.ext_fields, "consumerGroup")
        client_id = required_text(request.ext_fields, "clientId")
        info = self._clients.consumer_groups.get(group)
        member = info.clients.get(client_id) if info else None
        if member is None:
            return error_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"The Consumer <{group}> <{client_id}> not online",
            )
        forwarded = RemotingCommand.request(
            RequestCode.GET_CONSUMER_RUNNING_INFO, dict(request.ext_fields), request.body
        )
        try:
            answer = await member.channel.invoke(forwarded, CLIENT_ANSWER_TIMEOUT_S)
        except (RemotingError, OSError, TimeoutError) as exc:
            return error_response(
                request,
                ResponseCode.SYSTEM_ERROR,
                f"consumer <{group}> <{client_id}> did not answer: {exc}",
            )
        return RemotingCommand.response_to(request, answer.code, answer.remark, body=answer.body)

    def _connections(self, members: Iterable[ClientChannel]) -> list[dict[str, Any]]:
        """RocketMQ's `Connection` of each member: who, from where, in which language."""
        connections = []
        for member in members:
            identity = self._identities.get(member.channel)
            connections.append(
                {
                    "clientAddr": getattr(member.channel, "remote_address", ""),
                    "clientId": member.client_id,
                    "language": identity.language if identity else LanguageCode.JAVA.name,
                    "version": identity.version if identity else 0,
                }
            )
        return connections

    @answers_header_errors()
    async def topic_consumed_by(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: online groups subscribed to the topic, and every group
        with a committed offset in it."""
        topic = required_text(request.ext_fields, "topic")
        groups = {
            name
            for name, info in self._clients.consumer_groups.items()
            if topic in info.subscriptions
        }
        groups |= self._offsets.groups_of_topic(topic)
        body = _compact({"groupList": sorted(groups)}).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    @answers_header_errors()
    async def broker_consume_stats(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: GET_CONSUME_STATS for every subscription group at once."""
        only_ordered = optional_bool(request.ext_fields, "isOrder") or False
        total_diff = 0
        per_group = []
        for group in self._groups.groups:
            stats = []
            for rows in self._group_stats(group, only_ordered):
                total_diff += sum(r.broker_offset - r.consumer_offset for r in rows)
                stats.append(encode_consume_stats(self._config.broker_name, rows).decode())
            per_group.append("{" + json.dumps(group) + ":[" + ",".join(stats) + "]}")
        # The in-flight diff is pull minus committed offset: 0, as no pull offsets are kept.
        text = (
            '{"brokerAddr":'
            + json.dumps(self._broker_addr)
            + ',"consumeStatsList":['
            + ",".join(per_group)
            + f'],"totalDiff":{total_diff},"totalInflightDiff":0}}'
        )
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=text.encode())

    def _group_stats(self, group: str, only_ordered: bool) -> Iterator[list[OffsetWrapper]]:
        """One `ConsumeStats` worth of rows per topic the group has offsets in, skipping topics
        it no longer subscribes to while online (`fetchAllConsumeStatsInBroker`)."""
        store = self._store
        online = self._clients.consumer_groups.get(group)
        for topic in sorted(self._offsets.topics_of_group(group)):
            config = self._topics.get(topic)
            if config is None or (only_ordered and not config.order):
                continue
            if online is not None and online.subscriptions and topic not in online.subscriptions:
                continue
            yield [
                offset_row(store, self._offsets, group, topic, queue_id)
                for queue_id in range(config.write_queue_nums)
            ]

    async def clean_expired_consume_queues(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE: nothing to do on request.

        The store's retention pass (`MessageStore.clean_expired_files`) already deletes the
        consume queue files whose entries all point below the CommitLog's first offset, right
        after it deletes CommitLog files, so no expired queue file outlives a pass."""
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    @answers_header_errors()
    async def query_consume_queue(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE: up to `count` consume queue entries from `index` on."""
        query = ConsumeQueueQuery.decode(request.ext_fields)
        topic, queue_id = query.topic, query.queue_id
        queue = self._store.consume_queues.find(topic, queue_id)
        if queue is None:
            return error_response(
                request, ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!"
            )
        body: dict[str, Any] = {
            "maxQueueIndex": queue.max_offset,
            "minQueueIndex": queue.min_offset,
        }
        if query.consumer_group is not None:
            subscription = self._clients.subscription(query.consumer_group, topic)
            if subscription is None:
                body["filterData"] = f"{query.consumer_group}@{topic} is not online!"
            else:
                body["subscriptionData"] = subscription_json(subscription)
                # Java prints its `ConsumerFilterData`, kept for SQL92 consumers only; this
                # broker compiles SQL92 filters per subscription and keeps none.
                body["filterData"] = "null"
        if not queue.min_offset <= query.index < queue.max_offset:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SUCCESS,
                f"Index {query.index} of {queue_id}@{topic} is not exist!",
            )
        entries = []
        offset = query.index
        end = min(queue.max_offset, query.index + max(query.count, 0))
        while offset < end:
            # `entries` stops at the end of a file: go on in the next one.
            batch = list(queue.entries(offset, end - offset))
            if not batch:
                break
            for _, physic_offset, size, tags_code in batch:
                entries.append(
                    {
                        "eval": False,
                        "physicOffset": physic_offset,
                        "physicSize": size,
                        "tagsCode": tags_code,
                    }
                )
            offset += len(batch)
        body["queueData"] = entries
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=_compact(body).encode("utf-8")
        )

    async def system_topics(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: RocketMQ's system topics and this broker's own
        (its cluster and broker name topics, `rmq_sys_` topics it created)."""
        own = {self._config.broker_cluster_name, self._config.broker_name}
        topics = set(SYSTEM_TOPIC_SET)
        topics |= {name for name in self._topics.topics if is_system_topic(name) or name in own}
        body = _compact({"topicList": sorted(topics)}).encode("utf-8")
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def set_message_request_mode(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """SET_MESSAGE_REQUEST_MODE: chooses POP or PULL per group and topic; there is no POP
        here, and RocketMQ has no code that says so, hence REQUEST_CODE_NOT_SUPPORTED."""
        return error_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, POP_NOT_SUPPORTED)
