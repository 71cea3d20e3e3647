"""The admin client: what `mqadmin` asks NameServers and brokers, as asyncio calls.

`AdminClient` talks over one `RemotingClient`. NameServer requests go to the first NameServer
that answers, starting with the last one that did (a dead one is skipped, never fatal while
another lives). Broker requests go to the address the route, the cluster table or the caller
names. Every failure surfaces as one `AdminError` whose message says what went wrong and what to
do next ("topic X does not exist: create it with updateTopic -t X -c DefaultCluster").

Bodies are RocketMQ's (fastjson) JSON: routes and cluster tables through the NameServer's codec,
and `TopicStatsTable` / `ConsumeStats` through `parse_fastjson_value`, which also reads JSON
objects in key position (fastjson's way of writing `Map<MessageQueue, ...>`).

Where a broker answers REQUEST_CODE_NOT_SUPPORTED for a statistics request, the client asks
the cheap per-queue requests instead (GET_MIN_OFFSET, GET_MAX_OFFSET, QUERY_CONSUMER_OFFSET and
a one-message pull for the last store time), so `topicStatus` and `consumerProgress -t` work
against any broker.

Not done: ACL signing, TLS, message tracks ("who consumed this"), static topics.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import socket
import struct
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import (
    KEY_SEPARATOR,
    PERM_READ,
    PERM_WRITE,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from pocketmq.common.message_id import MessageIdError, create_offset_msg_id, decode_offset_msg_id
from pocketmq.common.properties import PropertyError, encode_properties
from pocketmq.common.route import BrokerData, ClusterInfo, QueueData, TopicRouteData
from pocketmq.common.route_json import (
    RouteBodyError,
    decode_cluster_info,
    decode_topic_list,
    decode_topic_route,
)
from pocketmq.common.stored_message import MessageDecodeError, StoredMessage, decode_records
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import RemotingClient, RemotingTimeoutError

MASTER_ID: Final = 0
DEFAULT_CLUSTER: Final = "DefaultCluster"
AUTO_CREATE_TOPIC: Final = "TBW102"
AUTO_CREATE_QUEUE_NUMS: Final = 4
"""Queues a topic created on first send gets (a producer's `defaultTopicQueueNums`)."""
TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
"""The group mqadmin pulls with (`MixAll.TOOLS_CONSUMER_GROUP`)."""
ADMIN_PRODUCER_GROUP: Final = "TOOLS_PRODUCER"
ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"
QUERY_MAX_NUM_DEFAULT: Final = 64
PULL_BATCH_MAX: Final = 32
TIMESTAMP_MAX_MS: Final = (1 << 63) - 1
_PULL_FLAG_SUBSCRIPTION: Final = 0x4
_JSON_DEPTH_MAX: Final = 64
_SEND_STATUS: Final[dict[int, str]] = {
    ResponseCode.SUCCESS: "SEND_OK",
    ResponseCode.FLUSH_DISK_TIMEOUT: "FLUSH_DISK_TIMEOUT",
    ResponseCode.FLUSH_SLAVE_TIMEOUT: "FLUSH_SLAVE_TIMEOUT",
    ResponseCode.SLAVE_NOT_AVAILABLE: "SLAVE_NOT_AVAILABLE",
}


class AdminError(Exception):
    """An admin operation failed; the message says why and what to do next.

    Attributes:
        code: The broker's or NameServer's response code, when one answered.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


# -- fastjson bodies ---------------------------------------------------------------------------


class _FastjsonReader:
    """JSON as fastjson writes it: any value may be an object key (`{{"a":1}:2}`)."""

    _WHITESPACE: Final = " \t\n\r"

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._scalars = json.JSONDecoder()

    def document(self) -> Any:
        value = self._value(0)
        self._skip()
        if self._pos != len(self._text):
            raise ValueError(f"extra data at character {self._pos}")
        return value

    def _skip(self) -> None:
        text, pos = self._text, self._pos
        while pos < len(text) and text[pos] in self._WHITESPACE:
            pos += 1
        self._pos = pos

    def _value(self, depth: int) -> Any:
        if depth > _JSON_DEPTH_MAX:
            raise ValueError(f"nested deeper than {_JSON_DEPTH_MAX} levels")
        self._skip()
        text, pos = self._text, self._pos
        if pos >= len(text):
            raise ValueError("unexpected end of the document")
        char = text[pos]
        if char == "{":
            return self._object(depth)
        if char == "[":
            return self._array(depth)
        try:  # a scalar: standard JSON from here on
            value, self._pos = self._scalars.raw_decode(text, pos)
        except json.JSONDecodeError:
            raise ValueError(f"unexpected {char!r} at character {pos}") from None
        return value

    def _expect(self, char: str) -> None:
        self._skip()
        if self._text[self._pos : self._pos + 1] != char:
            raise ValueError(f"expected {char!r} at character {self._pos}")
        self._pos += 1

    def _next_is(self, char: str) -> bool:
        self._skip()
        if self._text[self._pos : self._pos + 1] == char:
            self._pos += 1
            return True
        return False

    def _object(self, depth: int) -> dict[Any, Any]:
        self._pos += 1
        result: dict[Any, Any] = {}
        if self._next_is("}"):
            return result
        while True:
            key = _freeze(self._value(depth + 1))
            self._expect(":")
            result[key] = self._value(depth + 1)
            if self._next_is("}"):
                return result
            self._expect(",")

    def _array(self, depth: int) -> list[Any]:
        self._pos += 1
        result: list[Any] = []
        if self._next_is("]"):
            return result
        while True:
            result.append(self._value(depth + 1))
            if self._next_is("]"):
                return result
            self._expect(",")


def _freeze(value: Any) -> Any:
    """A hashable form of a key: objects become sorted (key, value) tuples."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def parse_fastjson_value(data: bytes | str) -> Any:
    """Parses a fastjson body; an object used as a key becomes a sorted tuple of its items.

    Raises:
        ValueError: not UTF-8, or not JSON even with fastjson's key forms.
    """
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    return _FastjsonReader(text).document()


# -- values ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """One queue of a topic on one broker (`MessageQueue`); sorts as Java's does."""

    topic: str
    broker_name: str
    queue_id: int


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

    def to_json(self) -> dict[str, Any]:
        return {
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
class SendResult:
    """The answer to `send_message` (`SendResult`)."""

    status: str
    msg_id: str
    """The client message id (UNIQ_KEY), what mqadmin prints as MsgId."""
    offset_msg_id: str
    """Broker address and CommitLog offset; `queryMsgById` finds it without a topic."""
    queue: MessageQueue
    queue_offset: int


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


@dataclass(slots=True)
class _UniqueIds:
    """Client message ids (UNIQ_KEY) shaped as RocketMQ's `MessageClientIDSetter` makes them."""

    prefix: bytes
    counter: int = 0
    month_start_ms: int = field(default=0)

    def next(self, now_ms: int) -> str:
        if self.month_start_ms == 0 or now_ms - self.month_start_ms >= 31 * 86_400_000:
            local = datetime.fromtimestamp(now_ms / 1000, tz=UTC).astimezone()
            start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
            self.month_start_ms = int(start.timestamp() * 1000)
        self.counter = (self.counter + 1) & 0xFFFF
        since = (now_ms - self.month_start_ms) & 0xFFFFFFFF
        return (self.prefix + struct.pack(">IH", since, self.counter)).hex().upper()


# -- the client --------------------------------------------------------------------------------


class AdminClient:
    """Admin operations on a cluster, found through its NameServers.

    Use as `async with AdminClient(["127.0.0.1:9876"]) as admin: ...`, or call `close()`.
    """

    def __init__(
        self,
        namesrv_addresses: list[str],
        *,
        timeout_s: float = 5.0,
        client: RemotingClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        """Creates the client; nothing connects until the first request.

        Args:
            namesrv_addresses: `host:port` of each NameServer; tried in order, failing over.
            timeout_s: How long one request may wait for its answer.
            client: The transport to use (one is made and owned otherwise).
            rng: Picks send queues and the random part of message ids.

        Raises:
            AdminError: no NameServer address given.
        """
        self.namesrv_addresses = [a.strip() for a in namesrv_addresses if a.strip()]
        if not self.namesrv_addresses:
            raise AdminError(
                "no NameServer address: pass -n host:port (several separated by ';') or set "
                "NAMESRV_ADDR"
            )
        self.timeout_s = timeout_s
        self._owns_client = client is None
        self._client = client or RemotingClient()
        self._rng = rng or random.Random()
        self._namesrv_index = 0
        self._ids = _UniqueIds(
            socket.inet_aton("127.0.0.1")
            + struct.pack(">HI", os.getpid() & 0xFFFF, self._rng.getrandbits(32))
        )

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections (if this client made its transport)."""
        if self._owns_client:
            await self._client.close()

    # -- requests ------------------------------------------------------------------------------

    async def _namesrv(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Asks the NameServers in turn until one answers; returns its answer, any code."""
        problems = []
        count = len(self.namesrv_addresses)
        for attempt in range(count):
            index = (self._namesrv_index + attempt) % count
            address = self.namesrv_addresses[index]
            request = RemotingCommand.request(code, ext_fields, body)
            try:
                response = await self._client.invoke(address, request, self.timeout_s)
            except (RemotingError, OSError) as exc:
                problems.append(f"{address}: {exc}")
                continue
            self._namesrv_index = index
            return response
        raise AdminError(
            "no NameServer answers (" + "; ".join(problems) + "): check -n / NAMESRV_ADDR, or "
            "start one with `pocketmq namesrv` (or `pocketmq up`)"
        )

    async def _broker(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        what: str,
    ) -> RemotingCommand:
        """Sends one request to a broker; transport failures become `AdminError`."""
        request = RemotingCommand.request(code, ext_fields, body)
        try:
            return await self._client.invoke(address, request, self.timeout_s)
        except RemotingTimeoutError:
            raise AdminError(
                f"broker {address} did not answer {what} within {self.timeout_s:g} s: is it "
                "overloaded or stuck? see its log"
            ) from None
        except (RemotingError, OSError) as exc:
            raise AdminError(
                f"cannot reach broker {address} for {what}: {exc}; check the address with "
                "clusterList"
            ) from None

    async def _broker_ok(
        self,
        address: str,
        code: int,
        ext_fields: Mapping[str, str] | None = None,
        body: bytes = b"",
        *,
        what: str,
    ) -> RemotingCommand:
        response = await self._broker(address, code, ext_fields, body, what=what)
        _check(response, what, f"broker {address}")
        return response

    # -- NameServer ----------------------------------------------------------------------------

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route: which brokers serve it with how many queues.

        Raises:
            AdminError: the topic does not exist (the message says how to create it), or no
                NameServer answers.
        """
        response = await self._namesrv(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic, "acceptStandardJsonOnly": "true"}
        )
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            cluster = await self._suggested_cluster()
            raise AdminError(
                f"topic {topic} does not exist: create it with updateTopic -t {topic} -c {cluster}",
                response.code,
            )
        _check(response, "route lookup", "NameServer")
        try:
            return decode_topic_route(response.body)
        except RouteBodyError as exc:
            raise AdminError(f"the NameServer sent a bad route for {topic}: {exc}") from None

    async def _suggested_cluster(self) -> str:
        try:
            clusters = sorted((await self.cluster_info()).cluster_addr_table)
        except AdminError:
            return DEFAULT_CLUSTER
        return clusters[0] if len(clusters) == 1 else DEFAULT_CLUSTER

    async def cluster_info(self) -> ClusterInfo:
        """Clusters, their broker groups and addresses (GET_BROKER_CLUSTER_INFO)."""
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        _check(response, "cluster lookup", "NameServer")
        try:
            return decode_cluster_info(response.body)
        except RouteBodyError as exc:
            raise AdminError(f"the NameServer sent a bad cluster table: {exc}") from None

    async def topic_list(self) -> list[str]:
        """Every topic the NameServer knows, sorted."""
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        _check(response, "topic list", "NameServer")
        try:
            return sorted(decode_topic_list(response.body).topic_list)
        except RouteBodyError as exc:
            raise AdminError(f"the NameServer sent a bad topic list: {exc}") from None

    async def broker_addresses(self, cluster: str, *, masters_only: bool = True) -> list[str]:
        """Addresses of the cluster's brokers (masters only by default), sorted by name.

        Raises:
            AdminError: no such cluster (the message lists the known ones).
        """
        info = await self.cluster_info()
        names = info.cluster_addr_table.get(cluster)
        if not names:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(
                f"cluster {cluster} not found (known clusters: {known}); see clusterList"
            )
        addresses = []
        for name in sorted(names):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            for broker_id, address in sorted(data.broker_addrs.items()):
                if broker_id == MASTER_ID or not masters_only:
                    addresses.append(address)
        if not addresses:
            raise AdminError(f"cluster {cluster} has no live master broker; see clusterList")
        return addresses

    async def resolve_broker_address(self, broker: str) -> str:
        """`host:port` as is; a broker name becomes its master's address.

        Raises:
            AdminError: a name no NameServer knows, or a group without a master.
        """
        if ":" in broker:
            return broker
        info = await self.cluster_info()
        data = info.broker_addr_table.get(broker)
        if data is None:
            known = ", ".join(sorted(info.broker_addr_table)) or "none"
            raise AdminError(
                f"broker {broker} not found (known brokers: {known}); pass a broker name or "
                "its address host:port, see clusterList"
            )
        return _master_of(data)

    async def targets(self, *, cluster: str | None, broker: str | None) -> list[str]:
        """The broker addresses a `-c cluster` / `-b broker` pair of options names."""
        if broker:
            return [await self.resolve_broker_address(broker)]
        if cluster:
            return await self.broker_addresses(cluster)
        raise AdminError("name the target: -c CLUSTER or -b BROKER_ADDR")

    # -- topics --------------------------------------------------------------------------------

    async def create_topic(
        self, settings: TopicSettings, *, cluster: str | None = None, broker: str | None = None
    ) -> list[str]:
        """Creates or updates a topic on one broker or every master of a cluster.

        Returns:
            The broker addresses that took it. With `order`, the NameServers also get the
            topic's order config (`brokerName:queueNums;...`).

        Raises:
            AdminError: a broker refused (bad name, queue count, permission) or is unreachable.
        """
        addresses = await self.targets(cluster=cluster, broker=broker)
        ext = {
            "topic": settings.topic,
            "defaultTopic": AUTO_CREATE_TOPIC,
            "readQueueNums": str(settings.read_queue_nums),
            "writeQueueNums": str(settings.write_queue_nums),
            "perm": str(settings.perm),
            "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": str(settings.topic_sys_flag),
            "order": "true" if settings.order else "false",
        }
        for address in addresses:
            await self._broker_ok(
                address, RequestCode.UPDATE_AND_CREATE_TOPIC, ext, what="topic creation"
            )
        if settings.order:
            await self._put_order_conf(settings, addresses)
        return addresses

    async def _put_order_conf(self, settings: TopicSettings, addresses: Sequence[str]) -> None:
        info = await self.cluster_info()
        names = sorted(
            data.broker_name
            for data in info.broker_addr_table.values()
            if set(data.broker_addrs.values()) & set(addresses)
        )
        conf = ";".join(f"{name}:{settings.write_queue_nums}" for name in names)
        response = await self._namesrv(
            RequestCode.PUT_KV_CONFIG,
            {"namespace": ORDER_TOPIC_CONFIG_NAMESPACE, "key": settings.topic, "value": conf},
        )
        _check(response, "order config update", "NameServer")

    async def wait_for_route(self, topic: str, timeout_s: float = 3.0) -> bool:
        """Waits (bounded) until a NameServer routes `topic`; True when it does."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                await self.topic_route(topic)
                return True
            except AdminError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST or time.monotonic() > deadline:
                    return False
            await asyncio.sleep(0.05)

    async def delete_topic(self, topic: str, cluster: str) -> list[str]:
        """Deletes a topic from the cluster's masters, then from every NameServer.

        Returns:
            The broker addresses it was deleted from.

        Raises:
            AdminError: a broker or NameServer failed; the rest were still asked.
        """
        addresses = await self.broker_addresses(cluster)
        for address in addresses:
            await self._broker_ok(
                address, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}, what="topic delete"
            )
        problems = []
        for namesrv in self.namesrv_addresses:
            request = RemotingCommand.request(
                RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster}
            )
            try:
                response = await self._client.invoke(namesrv, request, self.timeout_s)
            except (RemotingError, OSError) as exc:
                problems.append(f"{namesrv}: {exc}")
                continue
            if response.code != ResponseCode.SUCCESS:
                problems.append(f"{namesrv}: {response.remark}")
        if problems:
            raise AdminError(
                f"topic {topic} was deleted from the brokers but not from NameServer(s) "
                + "; ".join(problems)
                + ": run deleteTopic again once they are up"
            )
        return addresses

    async def topic_stats(self, topic: str) -> TopicStats:
        """Bounds and last store time of every queue of `topic`, over its route.

        Raises:
            AdminError: the topic does not exist, or a broker failed.
        """
        route = await self.topic_route(topic)
        queues: list[QueueStats] = []
        put_tps = 0.0
        for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
            address = data.broker_addrs.get(MASTER_ID)
            if address is None:
                continue
            try:
                response = await self._broker_ok(
                    address, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}, what="topic stats"
                )
            except AdminError as exc:
                if exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    raise
                queues.extend(await self._topic_stats_per_queue(route, data, topic, address))
                continue
            table = _decode_offset_table(response.body, "TopicStatsTable", address)
            for queue, row in table.items():
                queues.append(
                    QueueStats(
                        queue,
                        _json_int(row.get("minOffset")),
                        _json_int(row.get("maxOffset")),
                        _json_int(row.get("lastUpdateTimestamp")),
                    )
                )
            put_tps += _json_float(table.extra.get("topicPutTps"))
        return TopicStats(sorted(queues, key=lambda q: q.queue), put_tps)

    async def _topic_stats_per_queue(
        self, route: TopicRouteData, data: BrokerData, topic: str, address: str
    ) -> list[QueueStats]:
        queue_data = _queue_data_of(route, data.broker_name)
        count = max(queue_data.read_queue_nums, queue_data.write_queue_nums) if queue_data else 0

        async def one(queue_id: int) -> QueueStats:
            low = await self.min_offset(address, topic, queue_id)
            high = await self.max_offset(address, topic, queue_id)
            stamp = 0
            if high > 0:
                batch = await self.pull(address, topic, queue_id, high - 1, 1)
                stamp = batch.messages[0].store_timestamp if batch.messages else 0
            return QueueStats(MessageQueue(topic, data.broker_name, queue_id), low, high, stamp)

        return list(await asyncio.gather(*(one(q) for q in range(count))))

    # -- brokers -------------------------------------------------------------------------------

    async def broker_runtime_info(self, address: str) -> dict[str, str]:
        """The broker's runtime figures (GET_BROKER_RUNTIME_INFO `KVTable`)."""
        response = await self._broker_ok(
            address, RequestCode.GET_BROKER_RUNTIME_INFO, what="runtime info"
        )
        return _kv_table(response.body, address)

    async def ha_status(self, address: str) -> dict[str, Any]:
        """The broker's replication state (GET_BROKER_HA_STATUS `HARuntimeInfo`): a master's
        slaves with their acknowledged offsets and lag, or a slave's view of its master."""
        response = await self._broker_ok(
            address, RequestCode.GET_BROKER_HA_STATUS, what="replication status"
        )
        try:
            document = json.loads(response.body or b"{}")
        except ValueError as exc:
            raise AdminError(f"broker {address} sent an unreadable HA status: {exc}") from None
        return document if isinstance(document, dict) else {}

    async def broker_config(self, address: str) -> dict[str, str]:
        """The broker's settings (GET_BROKER_CONFIG), key -> value as it reports them."""
        response = await self._broker_ok(
            address, RequestCode.GET_BROKER_CONFIG, what="getBrokerConfig"
        )
        settings: dict[str, str] = {}
        for line in response.body.decode("utf-8", "replace").splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() and not name.lstrip().startswith("#"):
                settings[name.strip()] = value
        return settings

    async def update_broker_config(self, address: str, settings: Mapping[str, str]) -> None:
        """Changes settings of a running broker (UPDATE_BROKER_CONFIG).

        Raises:
            AdminError: the broker refused (unknown key, bad value, or a setting that needs a
                restart: the message says which).
        """
        body = "".join(f"{name}={value}\n" for name, value in settings.items())
        await self._broker_ok(
            address, RequestCode.UPDATE_BROKER_CONFIG, body=body.encode(), what="config update"
        )

    # -- offsets -------------------------------------------------------------------------------

    async def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        """The queue's oldest readable offset (GET_MIN_OFFSET)."""
        response = await self._broker_ok(
            address,
            RequestCode.GET_MIN_OFFSET,
            {"topic": topic, "queueId": str(queue_id)},
            what="min offset",
        )
        return _ext_int(response, "offset", address)

    async def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        """One past the queue's newest offset (GET_MAX_OFFSET)."""
        response = await self._broker_ok(
            address,
            RequestCode.GET_MAX_OFFSET,
            {"topic": topic, "queueId": str(queue_id)},
            what="max offset",
        )
        return _ext_int(response, "offset", address)

    async def offset_at(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset of the queue stored at or after `timestamp_ms`
        (SEARCH_OFFSET_BY_TIMESTAMP)."""
        response = await self._broker_ok(
            address,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": topic, "queueId": str(queue_id), "timestamp": str(timestamp_ms)},
            what="offset by time",
        )
        return _ext_int(response, "offset", address)

    async def update_consumer_offset(
        self, address: str, group: str, topic: str, queue_id: int, offset: int
    ) -> None:
        """Commits `group`'s offset of one queue (UPDATE_CONSUMER_OFFSET), as a consumer would."""
        await self._broker_ok(
            address,
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {
                "consumerGroup": group,
                "topic": topic,
                "queueId": str(queue_id),
                "commitOffset": str(offset),
            },
            what="offset commit",
        )

    async def consumer_offset(
        self, address: str, group: str, topic: str, queue_id: int
    ) -> int | None:
        """The group's committed offset in one queue, or None if it never committed one."""
        response = await self._broker(
            address,
            RequestCode.QUERY_CONSUMER_OFFSET,
            {
                "consumerGroup": group,
                "topic": topic,
                "queueId": str(queue_id),
                "setZeroIfNotFound": "false",
            },
            what="consumer offset",
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        _check(response, "consumer offset", f"broker {address}")
        return _ext_int(response, "offset", address)

    async def consume_progress(self, group: str, topic: str | None = None) -> ConsumeProgress:
        """Where `group` is in each queue (of `topic`, or of every topic it committed in).

        Raises:
            AdminError: nothing to show (the group never committed), or a broker failed.
        """
        if topic:
            route = await self.topic_route(topic)
            brokers = [d for d in route.broker_datas if MASTER_ID in d.broker_addrs]
        else:
            route = None
            brokers = list((await self.cluster_info()).broker_addr_table.values())
            brokers = [d for d in brokers if MASTER_ID in d.broker_addrs]
        rows: list[QueueProgress] = []
        tps = 0.0
        for data in sorted(brokers, key=lambda d: d.broker_name):
            address = data.broker_addrs[MASTER_ID]
            ext = {"consumerGroup": group}
            if topic:
                ext["topic"] = topic
            try:
                response = await self._broker_ok(
                    address, RequestCode.GET_CONSUME_STATS, ext, what="consume stats"
                )
            except AdminError as exc:
                if exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                    raise
                if route is None or topic is None:
                    raise AdminError(
                        f"consume stats are not supported by broker {address} yet: pass -t TOPIC "
                        "to read the group's offsets queue by queue",
                        exc.code,
                    ) from None
                rows.extend(await self._progress_per_queue(route, data, group, topic, address))
                continue
            table = _decode_offset_table(response.body, "ConsumeStats", address)
            for queue, row in table.items():
                consumer = _json_int(row.get("consumerOffset"))
                rows.append(
                    QueueProgress(
                        queue,
                        _json_int(row.get("brokerOffset")),
                        consumer,
                        max(_json_int(row.get("pullOffset")), consumer),
                        _json_int(row.get("lastTimestamp")),
                    )
                )
            tps += _json_float(table.extra.get("consumeTps"))
        if not rows:
            where = f"topic {topic}" if topic else "any topic"
            raise AdminError(
                f"consumer group {group} has no consume progress on {where}: it has not "
                "committed an offset yet, or the group name is wrong"
            )
        return ConsumeProgress(sorted(rows, key=lambda r: r.queue), tps)

    async def _progress_per_queue(
        self, route: TopicRouteData, data: BrokerData, group: str, topic: str, address: str
    ) -> list[QueueProgress]:
        queue_data = _queue_data_of(route, data.broker_name)
        count = queue_data.read_queue_nums if queue_data else 0

        async def one(queue_id: int) -> QueueProgress:
            high = await self.max_offset(address, topic, queue_id)
            committed = await self.consumer_offset(address, group, topic, queue_id) or 0
            queue = MessageQueue(topic, data.broker_name, queue_id)
            return QueueProgress(queue, high, committed, committed, 0)

        return list(await asyncio.gather(*(one(q) for q in range(count))))

    # -- subscription groups -------------------------------------------------------------------

    async def update_subscription_group(
        self,
        settings: SubscriptionGroupSettings,
        *,
        cluster: str | None = None,
        broker: str | None = None,
    ) -> list[str]:
        """Creates or updates a consumer group on one broker or every master of a cluster."""
        addresses = await self.targets(cluster=cluster, broker=broker)
        body = json.dumps(settings.to_json(), separators=(",", ":")).encode()
        for address in addresses:
            await self._broker_ok(
                address,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                body=body,
                what="subscription group update",
            )
        return addresses

    async def delete_subscription_group(
        self,
        group: str,
        *,
        cluster: str | None = None,
        broker: str | None = None,
        clean_offset: bool = False,
    ) -> list[str]:
        """Deletes a consumer group (and with `clean_offset` its committed offsets)."""
        addresses = await self.targets(cluster=cluster, broker=broker)
        ext = {"groupName": group, "cleanOffset": "true" if clean_offset else "false"}
        for address in addresses:
            await self._broker_ok(
                address,
                RequestCode.DELETE_SUBSCRIPTIONGROUP,
                ext,
                what="subscription group delete",
            )
        return addresses

    # -- messages ------------------------------------------------------------------------------

    async def query_message_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = QUERY_MAX_NUM_DEFAULT,
        begin_ms: int = 0,
        end_ms: int = TIMESTAMP_MAX_MS,
        unique_key: bool = False,
    ) -> list[FoundMessage]:
        """Messages of `topic` whose KEYS (or, with `unique_key`, UNIQ_KEY) hold `key`.

        Every master serving the topic is asked (QUERY_MESSAGE, through the broker's index);
        index hits are hashes, so messages are checked again here, as RocketMQ clients do.
        """
        route = await self.topic_route(topic)
        ext = {
            "topic": topic,
            "key": key,
            "maxNum": str(max_num),
            "beginTimestamp": str(begin_ms),
            "endTimestamp": str(end_ms),
        }
        if unique_key:
            ext["_UNIQUE_KEY_QUERY"] = "true"
        found: list[FoundMessage] = []
        for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
            address = data.broker_addrs.get(MASTER_ID)
            if address is None:
                continue
            response = await self._broker(
                address, RequestCode.QUERY_MESSAGE, ext, what="message query"
            )
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            _check(response, "message query", f"broker {address}")
            found.extend(
                FoundMessage(data.broker_name, message)
                for message in _decode_messages(response.body, address)
                if message.topic == topic and _matches(message, key, unique_key)
            )
        found.sort(key=lambda f: (f.message.store_timestamp, f.broker_name, f.message.queue_id))
        return found[:max_num]

    async def view_message(self, offset_msg_id: str) -> FoundMessage:
        """The message an offset message id points at (VIEW_MESSAGE_BY_ID on its broker).

        Raises:
            AdminError: not an offset message id, or the broker has no such message.
        """
        try:
            (ip, port), offset = decode_offset_msg_id(offset_msg_id)
        except MessageIdError as exc:
            raise AdminError(f"{offset_msg_id} is not an offset message id: {exc}") from None
        address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        response = await self._broker(
            address, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)}, what="message view"
        )
        _check(response, f"view of message {offset_msg_id}", f"broker {address}")
        messages = _decode_messages(response.body, address)
        if not messages:
            raise AdminError(f"broker {address} has no message at CommitLog offset {offset}")
        return FoundMessage(await self._broker_name_of(address), messages[0])

    async def _broker_name_of(self, address: str) -> str:
        try:
            info = await self.cluster_info()
        except AdminError:
            return ""
        for data in info.broker_addr_table.values():
            if address in data.broker_addrs.values():
                return data.broker_name
        return ""

    async def query_message_by_id(self, msg_id: str, topic: str | None = None) -> FoundMessage:
        """Finds a message by offset message id, or by client message id (UNIQ_KEY) in `topic`.

        An id that decodes to a broker the NameServers know is viewed there; otherwise, with a
        topic, it is looked up as a UNIQ_KEY through the index.

        Raises:
            AdminError: nothing found; the message says whether a topic would help.
        """
        known: set[str] = set()
        with_address: str | None = None
        try:
            (ip, port), _ = decode_offset_msg_id(msg_id)
            with_address = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
            info = await self.cluster_info()
            known = {a for d in info.broker_addr_table.values() for a in d.broker_addrs.values()}
        except MessageIdError:
            pass
        if with_address is not None and with_address in known:
            try:
                return await self.view_message(msg_id)
            except AdminError:
                if not topic:
                    raise
        if not topic:
            if with_address is None:
                raise AdminError(
                    f"{msg_id} is not an offset message id: to look it up as a client message "
                    "id (UNIQ_KEY), pass -t TOPIC"
                )
            raise AdminError(
                f"{msg_id} decodes to broker {with_address}, which no NameServer knows: if it "
                "is a client message id (UNIQ_KEY), pass -t TOPIC"
            )
        found = await self.query_message_by_key(topic, msg_id, max_num=1, unique_key=True)
        if not found:
            raise AdminError(f"no message with id {msg_id} in topic {topic}")
        return found[0]

    async def pull(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> PullBatch:
        """One PULL_MESSAGE as group TOOLS_CONSUMER, subscription `*`, never held."""
        raw = await self.pull_raw(address, topic, queue_id, offset, max_nums)
        return PullBatch(
            _decode_messages(raw.records, address) if raw.records else [],
            raw.next_begin_offset,
            raw.min_offset,
            raw.max_offset,
        )

    async def pull_raw(
        self, address: str, topic: str, queue_id: int, offset: int, max_nums: int
    ) -> RawPull:
        """`pull` without decoding: the stored records as the broker sent them, for readers
        that decode only what they need (the Spark connector builds Arrow columns from them)."""
        response = await self._broker(
            address,
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": TOOLS_CONSUMER_GROUP,
                "topic": topic,
                "queueId": str(queue_id),
                "queueOffset": str(offset),
                "maxMsgNums": str(max_nums),
                "sysFlag": str(_PULL_FLAG_SUBSCRIPTION),
                "commitOffset": "0",
                "suspendTimeoutMillis": "0",
                "subscription": "*",
                "subVersion": "0",
                "expressionType": "TAG",
            },
            what="pull",
        )
        if response.code not in (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            _check(response, "pull", f"broker {address}")
        return RawPull(
            response.body if response.code == ResponseCode.SUCCESS else b"",
            _ext_int(response, "nextBeginOffset", address, offset),
            _ext_int(response, "minOffset", address, 0),
            _ext_int(response, "maxOffset", address, 0),
        )

    async def message_at(
        self, topic: str, broker_name: str, queue_id: int, offset: int
    ) -> FoundMessage:
        """The message at one queue offset.

        Raises:
            AdminError: no such broker in the topic's route, or no message there (the message
                gives the queue's bounds).
        """
        route = await self.topic_route(topic)
        address = _master_in_route(route, broker_name, topic)
        batch = await self.pull(address, topic, queue_id, offset, 1)
        if not batch.messages or batch.messages[0].queue_offset != offset:
            raise AdminError(
                f"no message at offset {offset} of {topic} queue {queue_id} on {broker_name}: "
                f"the queue holds offsets {batch.min_offset} to {batch.max_offset - 1}"
                if batch.max_offset > batch.min_offset
                else f"no message at offset {offset}: {topic} queue {queue_id} on "
                f"{broker_name} is empty"
            )
        return FoundMessage(broker_name, batch.messages[0])

    async def consume(
        self,
        topic: str,
        *,
        broker_name: str | None = None,
        queue_id: int | None = None,
        offset: int | None = None,
        count: int = 128,
    ) -> list[FoundMessage]:
        """Reads up to `count` messages without committing anything, oldest first per queue.

        Queues are the topic's (or one broker's, or one queue's); each is read from
        `max(offset, min offset)` (its min offset without `offset`) up to its max offset.
        """
        if count <= 0:
            raise AdminError(f"the message count must be positive, got {count}")
        route = await self.topic_route(topic)
        queues: list[tuple[str, str, int]] = []
        for data in sorted(route.broker_datas, key=lambda d: d.broker_name):
            if broker_name is not None and data.broker_name != broker_name:
                continue
            address = data.broker_addrs.get(MASTER_ID)
            queue_data = _queue_data_of(route, data.broker_name)
            if address is None or queue_data is None:
                continue
            queues.extend(
                (data.broker_name, address, qid)
                for qid in range(queue_data.read_queue_nums)
                if queue_id is None or qid == queue_id
            )
        if broker_name is not None and not queues:
            _master_in_route(route, broker_name, topic)  # raises naming the known brokers
            raise AdminError(f"queue {queue_id} does not exist on {broker_name} for {topic}")
        found: list[FoundMessage] = []
        for name, address, qid in queues:
            start = max(offset or 0, await self.min_offset(address, topic, qid))
            end = await self.max_offset(address, topic, qid)
            position = start
            for _ in range(count + 8):  # every pull advances, or the queue ends
                if position >= end or len(found) >= count:
                    break
                wanted = min(PULL_BATCH_MAX, count - len(found), end - position)
                batch = await self.pull(address, topic, qid, position, wanted)
                found.extend(FoundMessage(name, m) for m in batch.messages[:wanted])
                if batch.next_begin_offset <= position:
                    break
                position = batch.next_begin_offset
            if len(found) >= count:
                break
        return found[:count]

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        keys: str | None = None,
        tags: str | None = None,
        broker_name: str | None = None,
        queue_id: int | None = None,
    ) -> SendResult:
        """Sends one message (SEND_MESSAGE_V2), waiting until it is stored.

        A topic without a route is sent through `TBW102`, as producers do, so a broker with
        `autoCreateTopicEnable` creates it.

        Raises:
            AdminError: no writable queue, a bad key or tag, or the broker refused.
        """
        queue_nums_max: int | None = None
        try:
            route = await self.topic_route(topic)
        except AdminError as exc:
            if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
            try:
                route = await self.topic_route(AUTO_CREATE_TOPIC)
            except AdminError:
                raise exc from None
            # The broker creates the topic with this many queues (`defaultTopicQueueNums`).
            queue_nums_max = AUTO_CREATE_QUEUE_NUMS
        candidates = _writable_queues(route, broker_name, queue_id, queue_nums_max)
        if not candidates:
            where = f" on broker {broker_name}" if broker_name else ""
            which = f" queue {queue_id}" if queue_id is not None else ""
            raise AdminError(
                f"topic {topic} has no writable{which} queue{where}: check it with topicRoute "
                f"-t {topic}"
            )
        name, address, qid = self._rng.choice(candidates)
        now_ms = time.time_ns() // 1_000_000
        unique_id = self._ids.next(now_ms)
        try:
            properties = encode_properties(
                {
                    PROPERTY_TAGS: tags or None,
                    PROPERTY_KEYS: keys or None,
                    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: unique_id,
                    PROPERTY_WAIT_STORE_MSG_OK: "true",
                }
            )
        except PropertyError as exc:
            raise AdminError(f"cannot send: {exc}") from None
        ext = {
            "a": ADMIN_PRODUCER_GROUP,
            "b": topic,
            "c": AUTO_CREATE_TOPIC,
            "d": str(AUTO_CREATE_QUEUE_NUMS),
            "e": str(qid),
            "f": "0",
            "g": str(now_ms),
            "h": "0",
            "i": properties,
            "j": "0",
            "k": "false",
            "n": name,
        }
        response = await self._broker(address, RequestCode.SEND_MESSAGE_V2, ext, body, what="send")
        status = _SEND_STATUS.get(response.code)
        if status is None:
            _check(response, "send", f"broker {address}")
        return SendResult(
            status or "SEND_OK",
            response.ext_fields.get("transactionId") or unique_id,
            response.ext_fields.get("msgId", ""),
            MessageQueue(topic, name, _ext_int(response, "queueId", address, qid)),
            _ext_int(response, "queueOffset", address, -1),
        )


# -- helpers -----------------------------------------------------------------------------------


def _check(response: RemotingCommand, what: str, who: str) -> None:
    """Raises `AdminError` unless `response` is SUCCESS."""
    if response.code == ResponseCode.SUCCESS:
        return
    if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        raise AdminError(f"{what} is not supported by {who} yet", response.code)
    try:
        name = ResponseCode(response.code).name
    except ValueError:
        name = str(response.code)
    remark = (response.remark or "no reason given").strip().splitlines()[0]
    raise AdminError(f"{what} failed on {who}: {remark} ({name})", response.code)


def _master_of(data: BrokerData) -> str:
    address = data.broker_addrs.get(MASTER_ID)
    if address is None:
        raise AdminError(f"broker {data.broker_name} has no live master; see clusterList")
    return address


def _master_in_route(route: TopicRouteData, broker_name: str, topic: str) -> str:
    for data in route.broker_datas:
        if data.broker_name == broker_name:
            return _master_of(data)
    known = ", ".join(sorted(d.broker_name for d in route.broker_datas)) or "none"
    raise AdminError(
        f"broker {broker_name} does not serve topic {topic} (brokers serving it: {known}); "
        f"see topicRoute -t {topic}"
    )


def _queue_data_of(route: TopicRouteData, broker_name: str) -> QueueData | None:
    return next((q for q in route.queue_datas if q.broker_name == broker_name), None)


def _writable_queues(
    route: TopicRouteData,
    broker_name: str | None,
    queue_id: int | None,
    queue_nums_max: int | None = None,
) -> list[tuple[str, str, int]]:
    candidates: list[tuple[str, str, int]] = []
    for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if broker_name is not None and queue_data.broker_name != broker_name:
            continue
        if not queue_data.perm & PERM_WRITE:
            continue
        name = queue_data.broker_name
        data = next((d for d in route.broker_datas if d.broker_name == name), None)
        address = data.broker_addrs.get(MASTER_ID) if data else None
        if address is None:
            continue
        candidates.extend(
            (name, address, qid)
            for qid in range(min(queue_data.write_queue_nums, queue_nums_max or 1 << 31))
            if queue_id is None or qid == queue_id
        )
    return candidates


def _matches(message: StoredMessage, key: str, unique_key: bool) -> bool:
    if unique_key:
        return message.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == key
    keys = message.properties.get(PROPERTY_KEYS, "")
    return key in keys.split(KEY_SEPARATOR)


def _decode_messages(body: bytes, address: str) -> list[StoredMessage]:
    try:
        return decode_records(body)
    except MessageDecodeError as exc:
        raise AdminError(f"broker {address} sent messages that do not decode: {exc}") from None


def _ext_int(response: RemotingCommand, name: str, address: str, default: int | None = None) -> int:
    value = response.ext_fields.get(name)
    if value is None and default is not None:
        return default
    try:
        return int(value or "")
    except ValueError:
        raise AdminError(f"broker {address} answered a bad {name}: {value!r}") from None


def _json_int(value: object) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return 0
    return 0


def _json_float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 0.0


def _kv_table(body: bytes, address: str) -> dict[str, str]:
    try:
        document = parse_fastjson_value(body)
    except ValueError as exc:
        raise AdminError(f"broker {address} sent a bad KVTable: {exc}") from None
    table = document.get("table") if isinstance(document, dict) else None
    if not isinstance(table, dict):
        raise AdminError(f"broker {address} sent a KVTable without a table")
    return {str(k): str(v) for k, v in table.items()}


@dataclass(slots=True)
class _OffsetTable:
    """A decoded `Map<MessageQueue, row>` body, and its other top-level fields."""

    rows: dict[MessageQueue, dict[str, Any]]
    extra: dict[str, Any]

    def items(self) -> Iterable[tuple[MessageQueue, dict[str, Any]]]:
        return self.rows.items()


def _decode_offset_table(body: bytes, what: str, address: str) -> _OffsetTable:
    """Reads `{"offsetTable": {<MessageQueue>: {...}}, ...}` in fastjson's object-key form."""
    try:
        document = parse_fastjson_value(body)
    except ValueError as exc:
        raise AdminError(f"broker {address} sent a bad {what}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("offsetTable"), dict):
        raise AdminError(f"broker {address} sent a {what} without an offsetTable")
    rows: dict[MessageQueue, dict[str, Any]] = {}
    for key, row in document["offsetTable"].items():
        queue = _message_queue(key)
        if queue is None or not isinstance(row, dict):
            raise AdminError(f"broker {address} sent a {what} with a bad queue key {key!r}")
        rows[queue] = row
    extra = {k: v for k, v in document.items() if k != "offsetTable"}
    return _OffsetTable(rows, extra)


def _message_queue(key: Any) -> MessageQueue | None:
    if isinstance(key, str):  # a standard-JSON writer may send the key as an object string
        try:
            key = _freeze(json.loads(key))
        except ValueError:
            return None
    if not isinstance(key, tuple):
        return None
    fields: dict[str, Any] = {}
    for item in key:
        if not (isinstance(item, tuple) and len(item) == 2):
            return None
        fields[str(item[0])] = item[1]
    topic, broker_name, queue_id = (fields.get(k) for k in ("topic", "brokerName", "queueId"))
    if not isinstance(topic, str) or not isinstance(broker_name, str):
        return None
    if not isinstance(queue_id, int) or isinstance(queue_id, bool):
        return None
    return MessageQueue(topic, broker_name, queue_id)


def split_namesrv_addresses(text: str | None) -> list[str]:
    """`host:port;host:port` (RocketMQ's separator; commas accepted too) as a list."""
    return [part.strip() for part in (text or "").replace(",", ";").split(";") if part.strip()]


def human_time_ms(timestamp_ms: int) -> str:
    """`yyyy-MM-dd HH:mm:ss,SSS` in local time, as mqadmin prints times; "" for 0."""
    if timestamp_ms <= 0:
        return ""
    moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{timestamp_ms % 1000:03d}"


Admin = AdminClient
"""The admin client under the SDK's name (`pocketmq.client.aio.Admin`)."""
