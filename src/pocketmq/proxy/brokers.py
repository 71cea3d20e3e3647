"""How the proxy reaches the brokers: one client instance (routes from the NameServers,
heartbeats that register the proxy as the producer of its clients' topics, connections), and
the remoting requests each gRPC call turns into.

Both proxy modes use it: in cluster mode it reaches the cluster's brokers, in local mode the
broker in the same process, over loopback.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import RequestTimeoutError, RocketMQError, TopicNotFoundError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.pop import PopClient, PopError, PopResult
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.message_id import decode_offset_msg_id
from pocketmq.common.properties import encode_properties
from pocketmq.common.route import MASTER_ID, TopicRouteData
from pocketmq.proxy.grpc_v2 import definition_pb2 as v2
from pocketmq.proxy.status import ProxyError
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel

log = logging.getLogger(__name__)

CONFIG_CACHE_S: Final = 20.0
"""Topic and group settings are asked again after this long (RocketMQ's proxy: 20 s)."""
ROUTE_CACHE_S: Final = 20.0
PERSISTENCE_CODES: Final[dict[int, Any]] = {
    ResponseCode.FLUSH_DISK_TIMEOUT: v2.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: v2.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: v2.HA_NOT_AVAILABLE,
}
"""Sends stored but not as durably as asked: their own v2 codes."""


@dataclass(frozen=True, slots=True)
class SendOutcome:
    message_id: str
    queue_offset: int
    transaction_id: str
    offset_msg_id: str
    queue_id: int
    broker_name: str
    recall_handle: str = ""


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """What the proxy needs of a subscription group's config."""

    retry_max_times: int = 16
    orderly: bool = False
    exists: bool = True


CheckHandler = Callable[[dict[str, str], bytes, str], Awaitable[None]]


class Brokers:
    def __init__(
        self,
        namesrv_addresses: list[str],
        *,
        timeout_s: float = 3.0,
        credentials: SessionCredentials | None = None,
    ) -> None:
        """`credentials`: the account the proxy signs its broker requests with (ACL)."""
        self.instance = ClientInstance(
            namesrv_addresses,
            instance_name=f"proxy-{id(self):x}",
            request_timeout_s=timeout_s,
            credentials=credentials,
        )
        self.timeout_s = timeout_s
        self._topic_cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._group_cache: dict[str, tuple[float, GroupSettings]] = {}
        self._route_cache: dict[str, tuple[float, TopicRouteData]] = {}
        self.on_check: CheckHandler | None = None
        """Called with a broker's CHECK_TRANSACTION_STATE (header, body, broker address)."""
        self.instance.remoting.handlers[RequestCode.CHECK_TRANSACTION_STATE] = self._check

    async def start(self) -> None:
        await self.instance.start()

    async def close(self) -> None:
        await self.instance.close()

    # -- routes and settings ------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRouteData:
        cached = self._route_cache.get(topic)
        if cached is not None and time.monotonic() - cached[0] < ROUTE_CACHE_S:
            return cached[1]
        try:
            route = await self.instance.fetch_route(topic)
        except TopicNotFoundError:
            raise ProxyError(v2.TOPIC_NOT_FOUND, f"topic {topic} does not exist") from None
        except RocketMQError as exc:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"route of {topic}: {exc}") from None
        self._route_cache[topic] = (time.monotonic(), route)
        return route

    def masters(self, route: TopicRouteData) -> dict[str, str]:
        """broker name -> master address."""
        return {
            data.broker_name: data.broker_addrs[MASTER_ID]
            for data in route.broker_datas
            if MASTER_ID in data.broker_addrs
        }

    async def topic_attributes(self, topic: str) -> dict[str, str] | None:
        """The topic's attributes (its `message.type`), None when no master knows it."""
        cached = self._topic_cache.get(topic)
        if cached is not None and time.monotonic() - cached[0] < CONFIG_CACHE_S:
            return cached[1].get("attributes") or {}
        route = await self.route(topic)
        for address in self.masters(route).values():
            response = await self._invoke(address, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
            if response.code == ResponseCode.SUCCESS and response.body:
                document = json.loads(response.body)
                config = document.get("topicConfig", document)
                self._topic_cache[topic] = (time.monotonic(), config)
                return dict(config.get("attributes") or {})
        return None

    async def group_settings(self, group: str, topic: str) -> GroupSettings:
        cached = self._group_cache.get(group)
        if cached is not None and time.monotonic() - cached[0] < CONFIG_CACHE_S:
            return cached[1]
        settings = GroupSettings()
        try:
            route = await self.route(topic)
        except ProxyError:
            return settings
        for address in self.masters(route).values():
            response = await self._invoke(
                address, RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}
            )
            if response.code == ResponseCode.SUCCESS and response.body:
                document = json.loads(response.body)
                settings = GroupSettings(
                    retry_max_times=int(document.get("retryMaxTimes", 16)),
                    orderly=bool(document.get("consumeMessageOrderly", False)),
                )
                break
        self._group_cache[group] = (time.monotonic(), settings)
        return settings

    # -- requests ------------------------------------------------------------------------

    async def _invoke(
        self,
        address: str,
        code: int,
        fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        timeout_s: float | None = None,
    ) -> RemotingCommand:
        try:
            return await self.instance.invoke(address, code, fields, body, timeout_s=timeout_s)
        except RequestTimeoutError as exc:
            raise ProxyError(v2.PROXY_TIMEOUT, f"broker {address}: {exc}") from None
        except RocketMQError as exc:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"broker {address}: {exc}") from None

    async def send(
        self,
        address: str,
        broker_name: str,
        queue_id: int,
        *,
        topic: str,
        body: bytes,
        properties: dict[str, str],
        sys_flag: int,
        born_timestamp: int,
    ) -> SendOutcome:
        fields = {
            "a": topic,  # producer group: the topic, as RocketMQ's proxy names it
            "b": topic,
            "c": "TBW102",
            "d": "4",
            "e": str(queue_id),
            "f": str(sys_flag),
            "g": str(born_timestamp),
            "h": "0",
            "i": encode_properties(properties),
            "j": "0",
            "k": "false",
            "m": "false",
            "n": broker_name,
        }
        response = await self._invoke(address, RequestCode.SEND_MESSAGE_V2, fields, body)
        ext = response.ext_fields
        if response.code == ResponseCode.SUCCESS:
            return SendOutcome(
                message_id=properties.get("UNIQ_KEY", ""),
                queue_offset=int(ext.get("queueOffset", "0")),
                transaction_id=ext.get("transactionId") or properties.get("UNIQ_KEY", ""),
                offset_msg_id=ext.get("msgId", ""),
                queue_id=int(ext.get("queueId", str(queue_id))),
                broker_name=broker_name,
                recall_handle=ext.get("recallHandle", ""),
            )
        persistence = PERSISTENCE_CODES.get(response.code)
        if persistence is not None:
            raise ProxyError(persistence, response.remark or "the broker did not persist in time")
        raise ProxyError.from_remoting(response.code, response.remark)

    def pop_client(self, group: str, broker_name: str) -> PopClient:
        return PopClient(
            self.instance.remoting, group, broker_name=broker_name, timeout_s=self.timeout_s
        )

    async def pop(
        self, address: str, broker_name: str, group: str, topic: str, **options: Any
    ) -> PopResult:
        try:
            return await self.pop_client(group, broker_name).pop(address, topic, **options)
        except PopError as exc:
            raise ProxyError.from_remoting(exc.code, exc.remark) from None
        except (TimeoutError, RocketMQError, OSError) as exc:
            raise ProxyError(v2.INTERNAL_SERVER_ERROR, f"pop at {address}: {exc}") from None

    async def end_transaction(self, address: str, fields: dict[str, str]) -> None:
        try:
            await self.instance.invoke_oneway(address, RequestCode.END_TRANSACTION, fields)
        except RocketMQError as exc:
            raise ProxyError(
                v2.INTERNAL_SERVER_ERROR, f"end transaction at {address}: {exc}"
            ) from None

    async def request(
        self, address: str, code: int, fields: dict[str, str], what: str
    ) -> dict[str, str]:
        """One request that must succeed; its answer's ext fields.

        Raises:
            ProxyError: the broker refused (mapped as RocketMQ's proxy maps it) or is away.
        """
        response = await self._invoke(address, code, fields)
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError.from_remoting(response.code, response.remark or what)
        return dict(response.ext_fields)

    async def send_back_to_dlq(
        self, address: str, group: str, commit_log_offset: int, origin_topic: str, message_id: str
    ) -> None:
        response = await self._invoke(
            address,
            RequestCode.CONSUMER_SEND_MSG_BACK,
            {
                "offset": str(commit_log_offset),
                "group": group,
                "delayLevel": "-1",
                "originMsgId": message_id,
                "originTopic": origin_topic,
                "unitMode": "false",
                "maxReconsumeTimes": "0",
            },
        )
        if response.code != ResponseCode.SUCCESS:
            raise ProxyError.from_remoting(response.code, response.remark)

    async def _check(self, request: RemotingCommand, channel: Channel) -> None:
        if self.on_check is not None:
            await self.on_check(
                dict(request.ext_fields), request.body or b"", channel.remote_address
            )


def readable(perm: int) -> bool:
    return bool(perm & PERM_READ)


def writable(perm: int) -> bool:
    return bool(perm & PERM_WRITE)


def commit_log_offset_of(offset_msg_id: str) -> int:
    return decode_offset_msg_id(offset_msg_id)[1]
