"""`AdminClient`: what `mqadmin` asks NameServers and brokers, as asyncio calls.

Topics (create, delete, statistics), broker figures and settings, consumer offsets and
progress, and subscription groups live here; message lookups, reads and sends come from
`MessageAdmin`, requests and NameServer lookups from `AdminLookups`.

Where a broker answers REQUEST_CODE_NOT_SUPPORTED for a statistics request, the client asks
the cheap per-queue requests instead (GET_MIN_OFFSET, GET_MAX_OFFSET, QUERY_CONSUMER_OFFSET and
a one-message pull for the last store time), so `topicStatus` and `consumerProgress -t` work
against any broker.

Not done: ACL signing, TLS, message tracks ("who consumed this"), static topics.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pocketmq.client.admin.acl import AclAdmin
from pocketmq.client.admin.auth import AuthAdmin
from pocketmq.client.admin.controllers import ControllerAdmin
from pocketmq.client.admin.decoders import (
    decode_kv_table,
    decode_offset_table,
    ext_int,
    json_float,
    json_int,
)
from pocketmq.client.admin.errors import AdminError, check
from pocketmq.client.admin.lookups import queue_data_of
from pocketmq.client.admin.messages import MessageAdmin
from pocketmq.client.admin.values import (
    ConsumeProgress,
    QueueProgress,
    QueueStats,
    SubscriptionGroupSettings,
    TopicSettings,
    TopicStats,
)
from pocketmq.client.errors import ConnectionFailedError, RequestTimeoutError
from pocketmq.client.message import MessageQueue
from pocketmq.client.producer.wire import AUTO_CREATE_TOPIC
from pocketmq.common.codes import DLEDGER_TRANSFER_LEADER, RequestCode, ResponseCode
from pocketmq.common.fastjson import FastjsonError, parse_fastjson
from pocketmq.common.route import MASTER_ID, BrokerData, TopicRouteData

ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"


class AdminClient(MessageAdmin, ControllerAdmin, AclAdmin, AuthAdmin):
    """Admin operations on a cluster, found through its NameServers.

    Use as `async with AdminClient(["127.0.0.1:9876"]) as admin: ...`, or call `close()`.
    """

    async def __aenter__(self) -> AdminClient:
        return self

    # -- topics --------------------------------------------------------------------------------

    async def create_topic(
        self,
        settings: TopicSettings,
        *,
        cluster: str | None = None,
        broker: str | None = None,
        force: bool = False,
    ) -> list[str]:
        """Creates or updates a topic on one broker or every master of a cluster.

        A system topic (TBW102, SCHEDULE_TOPIC_XXXX, RMQ_SYS_*, ...) is refused unless `force`
        (pocketmq's `force=true` header field; Apache RocketMQ has no way round it).

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
        if force:
            ext["force"] = "true"
        if settings.attributes:
            ext["attributes"] = settings.attributes
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
        check(response, "order config update", "NameServer")

    async def wait_for_route(self, topic: str, timeout_s: float = 3.0) -> bool:
        """Waits (bounded) until a NameServer routes `topic`; True when it does."""
        deadline = self.instance.clock.monotonic() + timeout_s
        while True:
            try:
                await self.topic_route(topic)
                return True
            except AdminError as exc:
                if (
                    exc.code != ResponseCode.TOPIC_NOT_EXIST
                    or self.instance.clock.monotonic() > deadline
                ):
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
            try:
                response = await self.instance.invoke(
                    namesrv,
                    RequestCode.DELETE_TOPIC_IN_NAMESRV,
                    {"topic": topic, "clusterName": cluster},
                )
            except (ConnectionFailedError, RequestTimeoutError) as exc:
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
            table = decode_offset_table(response.body, "TopicStatsTable", address)
            for queue, row in table.items():
                queues.append(
                    QueueStats(
                        queue,
                        json_int(row.get("minOffset")),
                        json_int(row.get("maxOffset")),
                        json_int(row.get("lastUpdateTimestamp")),
                    )
                )
            put_tps += json_float(table.extra.get("topicPutTps"))
        return TopicStats(sorted(queues, key=lambda q: q.queue), put_tps)

    async def _topic_stats_per_queue(
        self, route: TopicRouteData, data: BrokerData, topic: str, address: str
    ) -> list[QueueStats]:
        queue_data = queue_data_of(route, data.broker_name)
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
        return decode_kv_table(response.body, address)

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

    async def dledger_transfer_leader(self, address: str, to: str) -> str:
        """Asks the DLedger leader at `address` to hand leadership to replica `to`
        (a `dLegerSelfId`); returns the broker's answer."""
        response = await self._broker_ok(
            address, DLEDGER_TRANSFER_LEADER, {"to": to}, what="leadership transfer"
        )
        return response.remark or f"handing leadership to {to}"

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

    async def offset_at(self, address: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first offset of the queue stored at or after `timestamp_ms`
        (SEARCH_OFFSET_BY_TIMESTAMP)."""
        response = await self._broker_ok(
            address,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
            {"topic": topic, "queueId": str(queue_id), "timestamp": str(timestamp_ms)},
            what="offset by time",
        )
        return ext_int(response, "offset", address)

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
        check(response, "consumer offset", f"broker {address}")
        return ext_int(response, "offset", address)

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
            table = decode_offset_table(response.body, "ConsumeStats", address)
            for queue, row in table.items():
                consumer = json_int(row.get("consumerOffset"))
                rows.append(
                    QueueProgress(
                        queue,
                        json_int(row.get("brokerOffset")),
                        consumer,
                        max(json_int(row.get("pullOffset")), consumer),
                        json_int(row.get("lastTimestamp")),
                    )
                )
            tps += json_float(table.extra.get("consumeTps"))
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
        queue_data = queue_data_of(route, data.broker_name)
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

    async def subscription_groups(self, address: str) -> dict[str, dict[str, Any]]:
        """The consumer groups of the broker at `address` (GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
        name -> `SubscriptionGroupConfig` as it sends them."""
        response = await self._broker_ok(
            address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, what="subscription groups"
        )
        try:
            document = parse_fastjson(response.body)
        except FastjsonError as exc:
            raise AdminError(
                f"broker {address} sent unreadable subscription groups: {exc}"
            ) from None
        table = document.get("subscriptionGroupTable") if isinstance(document, dict) else None
        return dict(table) if isinstance(table, dict) else {}

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


Admin = AdminClient
"""The admin client under the SDK's name (`pocketmq.client.aio.Admin`)."""
