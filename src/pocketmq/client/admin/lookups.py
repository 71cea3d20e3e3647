"""The admin client's footing: requests over a `ClientInstance`, and what the NameServers know.

`AdminLookups` sends NameServer requests through the instance (the first NameServer that
answers, starting with the last one that did) and broker requests to the address the route,
the cluster table or the caller names. It turns every failure into one `AdminError`, so an
admin caller handles one exception whose message says what to do next.

The instance is used only for its connections, NameServer failover and route fetches: an admin
client never starts it, so it sends no heartbeats and joins no rebalance, and brokers never
list it as a producer or consumer.
"""

from __future__ import annotations

import random
import ssl
from collections.abc import Mapping
from typing import Final

from pocketmq.client.admin.decoders import ext_int
from pocketmq.client.admin.errors import AdminError, check
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import (
    ConnectionFailedError,
    RequestTimeoutError,
    RocketMQError,
    TopicNotFoundError,
)
from pocketmq.client.instance import ClientInstance
from pocketmq.common.codes import RequestCode
from pocketmq.common.route import MASTER_ID, BrokerData, ClusterInfo, QueueData, TopicRouteData
from pocketmq.common.route_json import RouteBodyError, decode_cluster_info, decode_topic_list
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.tls import TlsConfig
from pocketmq.runtime.clock import Clock

DEFAULT_CLUSTER: Final = "DefaultCluster"
TIMEOUT_S_DEFAULT: Final = 5.0


class AdminLookups:
    """Requests to NameServers and brokers, and the cluster's layout as they report it."""

    def __init__(
        self,
        namesrv_addresses: list[str],
        *,
        timeout_s: float = TIMEOUT_S_DEFAULT,
        instance: ClientInstance | None = None,
        rng: random.Random | None = None,
        clock: Clock | None = None,
        tls: bool | ssl.SSLContext | TlsConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        """Creates the client; nothing connects until the first request.

        Args:
            namesrv_addresses: `host:port` of each NameServer; tried in order, failing over.
            timeout_s: How long one request may wait for its answer.
            instance: A client instance to share with producers and consumers (its
                NameServers and timeout are then its own); one is made and owned otherwise.
            rng: Picks send queues and the random part of message ids.
            clock: Where waits and message birth times read the time (tests pass a fake).
            tls: TLS to the cluster (see `ClientInstance`); ignored with `instance`.
            credentials: The ACL account requests are signed with; ignored with `instance`.

        """
        addresses = [a.strip() for a in namesrv_addresses if a.strip()]
        self._owns_instance = instance is None
        self.instance = instance or ClientInstance(
            addresses,
            request_timeout_s=timeout_s,
            rng=rng,
            clock=clock,
            require_namesrv=False,
            tls=tls,
            credentials=credentials,
        )
        self.timeout_s = self.instance.request_timeout_s

    @property
    def namesrv_addresses(self) -> list[str]:
        """The NameServers asked, in failover order."""
        return self.instance.namesrv_addresses

    async def __aenter__(self) -> AdminLookups:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the connections (if this client made its instance)."""
        if self._owns_instance:
            await self.instance.close()

    # -- requests ------------------------------------------------------------------------------

    async def _namesrv(
        self, code: int, ext_fields: Mapping[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """Asks the NameServers in turn until one answers; returns its answer, any code."""
        try:
            return await self.instance.invoke_namesrv(code, ext_fields, body)
        except ConnectionFailedError as exc:
            if exc.reason == "no NameServer address":
                raise AdminError(str(exc)) from None
            raise AdminError(f"{exc}; or check -n / NAMESRV_ADDR") from None

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
        try:
            return await self.instance.invoke(address, code, ext_fields, body)
        except RequestTimeoutError:
            raise AdminError(
                f"broker {address} did not answer {what} within {self.timeout_s:g} s: is it "
                "overloaded or stuck? see its log"
            ) from None
        except ConnectionFailedError as exc:
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
        check(response, what, f"broker {address}")
        return response

    # -- NameServer ----------------------------------------------------------------------------

    async def topic_route(self, topic: str) -> TopicRouteData:
        """The topic's route: which brokers serve it with how many queues.

        Raises:
            AdminError: the topic does not exist (the message says how to create it), or no
                NameServer answers.
        """
        try:
            return await self.instance.fetch_route(topic)
        except TopicNotFoundError as exc:
            cluster = await self._suggested_cluster()
            raise AdminError(
                f"topic {topic} does not exist: create it with updateTopic -t {topic} -c {cluster}",
                exc.code,
            ) from None
        except ConnectionFailedError as exc:
            if exc.reason == "no NameServer address":
                raise AdminError(str(exc)) from None
            raise AdminError(f"{exc}; or check -n / NAMESRV_ADDR") from None
        except AdminError:
            raise
        except RocketMQError as exc:  # a refusal, or a route that does not decode
            raise AdminError(str(exc), exc.code) from None

    async def _suggested_cluster(self) -> str:
        try:
            clusters = sorted((await self.cluster_info()).cluster_addr_table)
        except AdminError:
            return DEFAULT_CLUSTER
        return clusters[0] if len(clusters) == 1 else DEFAULT_CLUSTER

    async def cluster_info(self) -> ClusterInfo:
        """Clusters, their broker groups and addresses (GET_BROKER_CLUSTER_INFO)."""
        response = await self._namesrv(RequestCode.GET_BROKER_CLUSTER_INFO)
        check(response, "cluster lookup", "NameServer")
        try:
            return decode_cluster_info(response.body)
        except RouteBodyError as exc:
            raise AdminError(f"the NameServer sent a bad cluster table: {exc}") from None

    async def topic_list(self) -> list[str]:
        """Every topic the NameServer knows, sorted."""
        response = await self._namesrv(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        check(response, "topic list", "NameServer")
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
        return master_of(data)

    async def targets(self, *, cluster: str | None, broker: str | None) -> list[str]:
        """The broker addresses a `-c cluster` / `-b broker` pair of options names."""
        if broker:
            return [await self.resolve_broker_address(broker)]
        if cluster:
            return await self.broker_addresses(cluster)
        raise AdminError("name the target: -c CLUSTER or -b BROKER_ADDR")

    async def _broker_name_of(self, address: str) -> str:
        try:
            info = await self.cluster_info()
        except AdminError:
            return ""
        for data in info.broker_addr_table.values():
            if address in data.broker_addrs.values():
                return data.broker_name
        return ""

    # -- queue bounds --------------------------------------------------------------------------

    async def min_offset(self, address: str, topic: str, queue_id: int) -> int:
        """The queue's oldest readable offset (GET_MIN_OFFSET)."""
        response = await self._broker_ok(
            address,
            RequestCode.GET_MIN_OFFSET,
            {"topic": topic, "queueId": str(queue_id)},
            what="min offset",
        )
        return ext_int(response, "offset", address)

    async def max_offset(self, address: str, topic: str, queue_id: int) -> int:
        """One past the queue's newest offset (GET_MAX_OFFSET)."""
        response = await self._broker_ok(
            address,
            RequestCode.GET_MAX_OFFSET,
            {"topic": topic, "queueId": str(queue_id)},
            what="max offset",
        )
        return ext_int(response, "offset", address)


# -- routes ------------------------------------------------------------------------------------


def master_of(data: BrokerData) -> str:
    """The master address of a broker group.

    Raises:
        AdminError: the group has no live master.
    """
    address = data.broker_addrs.get(MASTER_ID)
    if address is None:
        raise AdminError(f"broker {data.broker_name} has no live master; see clusterList")
    return address


def master_in_route(route: TopicRouteData, broker_name: str, topic: str) -> str:
    """The master address of `broker_name` in `topic`'s route.

    Raises:
        AdminError: the broker does not serve the topic (the message names those that do), or
            has no live master.
    """
    for data in route.broker_datas:
        if data.broker_name == broker_name:
            return master_of(data)
    known = ", ".join(sorted(d.broker_name for d in route.broker_datas)) or "none"
    raise AdminError(
        f"broker {broker_name} does not serve topic {topic} (brokers serving it: {known}); "
        f"see topicRoute -t {topic}"
    )


def queue_data_of(route: TopicRouteData, broker_name: str) -> QueueData | None:
    """The queue counts `broker_name` has for the route's topic, if it serves it."""
    return next((q for q in route.queue_datas if q.broker_name == broker_name), None)
