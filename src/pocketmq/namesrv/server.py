"""The NameServer process: request handlers over the route table, and its remoting server.

Handlers decode headers and bodies, call the pure `RouteTable`, and encode RocketMQ's answers
(route JSON in the dialect the requester's version expects). A scan every 10 s drops brokers
silent for 120 s; a closed broker connection drops its routes at once. NameServers share
nothing: brokers register with each, clients ask any. The settings and the requests that read
and change them live in `config.py`; wiping and adding a broker's write permission in
`write_perm.py`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.route_json import (
    RouteBodyError,
    decode_data_version,
    decode_register_broker_body,
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_topic_list,
    encode_topic_route,
    register_body_crc32,
    wants_standard_json,
)
from pocketmq.namesrv.config import NamesrvConfig, NamesrvConfigHandlers
from pocketmq.namesrv.kv_config import KvConfig
from pocketmq.namesrv.route_table import RouteTable
from pocketmq.namesrv.write_perm import WritePermHandlers
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RemotingServer, RequestHandler
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.runtime.json_file import JsonFile

__all__ = ["NamesrvConfig", "NamesrvHandlers", "NamesrvServer"]

log = logging.getLogger(__name__)

ORDER_TOPIC_CONFIG_NAMESPACE: Final = "ORDER_TOPIC_CONFIG"
FAQ_NO_ROUTE: Final = "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


class MissingFieldError(ValueError):
    """A required header field is absent."""


def _field(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    if not value:
        raise MissingFieldError(f"the custom field <{name}> is null")
    return value


class NamesrvHandlers:
    """The NameServer's request handlers."""

    def __init__(
        self,
        table: RouteTable,
        kv: KvConfig,
        clock: Clock,
        on_kv_changed: Callable[[], None] = lambda: None,
        config: NamesrvConfig | None = None,
    ) -> None:
        self.config = config or NamesrvConfig()
        self.table = table
        self.kv = kv
        self._clock = clock
        self._on_kv_changed = on_kv_changed

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.topics_by_cluster,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.BROKER_HEARTBEAT: self.broker_heartbeat,
            RequestCode.PUT_KV_CONFIG: self.put_kv,
            RequestCode.GET_KV_CONFIG: self.get_kv,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv,
        }

    async def register_broker(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        ext = request.ext_fields
        try:
            crc = int(ext.get("bodyCrc32") or 0)
            if crc and register_body_crc32(request.body) != crc:
                return RemotingCommand.response_to(
                    request, ResponseCode.SYSTEM_ERROR, "crc32 not match"
                )
            body = decode_register_broker_body(
                request.body, compressed=ext.get("compressed", "false").lower() == "true"
            )
            result = self.table.register_broker(
                _field(request, "clusterName"),
                _field(request, "brokerAddr"),
                _field(request, "brokerName"),
                int(_field(request, "brokerId")),
                ext.get("haServerAddr", ""),
                body.topic_configs,
                body.data_version,
                self._clock.now_ms(),
                channel.id,
                filter_server_list=body.filter_server_list,
                heartbeat_timeout_ms=int(ext["heartbeatTimeoutMillis"])
                if ext.get("heartbeatTimeoutMillis")
                else None,
                enable_acting_master=ext.get("enableActingMaster", "").lower() == "true"
                if "enableActingMaster" in ext
                else None,
                zone_name=ext.get("__ZONE_NAME"),
            )
        except (MissingFieldError, RouteBodyError, ValueError) as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        if result.slot_holder_addr is not None:
            return self._refuse_slot_takeover(request, result.slot_holder_addr)
        fields = {}
        if result.ha_server_addr:
            fields["haServerAddr"] = result.ha_server_addr
        if result.master_addr:
            fields["masterAddr"] = result.master_addr
        if not self.config.return_order_topic_config_to_broker:
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=fields)
        orders = self.kv.namespace(ORDER_TOPIC_CONFIG_NAMESPACE) or {}
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields=fields, body=encode_kv_table(orders)
        )

    def _refuse_slot_takeover(self, request: RemotingCommand, holder: str) -> RemotingCommand:
        """SYSTEM_ERROR for a broker whose name and id a live broker elsewhere already holds.

        RocketMQ would hand the slot over; a copied or mistyped `brokerName` would then take
        a running broker's routes. The remark tells the newcomer what to change.
        """
        ext = request.ext_fields
        cluster, name, broker_id = ext["clusterName"], ext["brokerName"], ext["brokerId"]
        newcomer = ext["brokerAddr"]
        log.warning(
            "refused registration of broker %s (cluster %s, brokerId %s) from %s: %s holds "
            "that slot and is alive",
            name,
            cluster,
            broker_id,
            newcomer,
            holder,
        )
        remark = (
            f"broker {name} (cluster {cluster}, brokerId {broker_id}) is already registered "
            f"from {holder}, which is alive; this broker at {newcomer} was not registered. "
            "Give it another brokerName or brokerId, or stop the other one first"
        )
        return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, remark)

    async def unregister_broker(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        try:
            self.table.unregister_broker(
                _field(request, "clusterName"),
                _field(request, "brokerAddr"),
                _field(request, "brokerName"),
                int(_field(request, "brokerId")),
            )
        except (MissingFieldError, ValueError) as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("broker %s unregistered", request.ext_fields.get("brokerAddr"))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def route(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        topic = request.ext_fields.get("topic", "")
        route = self.table.route(topic)
        if route is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {topic}\n{FAQ_NO_ROUTE}",
            )
        orders = self.kv.get(ORDER_TOPIC_CONFIG_NAMESPACE, topic)
        if orders and self.config.order_message_enable:
            route.order_topic_conf = orders
        standard = wants_standard_json(
            request.version, request.ext_fields.get("acceptStandardJsonOnly") == "true"
        )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=encode_topic_route(route, standard_json=standard)
        )

    async def cluster_info(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        body = encode_cluster_info(self.table.cluster_info())
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def all_topics(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        if not self.config.enable_all_topic_list:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, "disable")
        body = encode_topic_list(self.table.all_topics())
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def topics_by_cluster(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        if not self.config.enable_topic_list:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, "disable")
        cluster = request.ext_fields.get("cluster", "")
        body = encode_topic_list(self.table.topics_by_cluster(cluster))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def delete_topic(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            topic = _field(request, "topic")
        except MissingFieldError as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        self.table.delete_topic(topic, request.ext_fields.get("clusterName") or None)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def query_data_version(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        try:
            address = _field(request, "brokerAddr")
            version = decode_data_version(request.body)
        except (MissingFieldError, RouteBodyError) as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        changed = self.table.is_broker_data_changed(address, version)
        self.table.refresh_broker(address, self._clock.now_ms())
        known = self.table.data_version(address)
        body = encode_data_version(known) if known else b""
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"changed": "true" if changed else "false"},
            body=body,
        )

    async def broker_heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        address = request.ext_fields.get("brokerAddr", "")
        self.table.refresh_broker(address, self._clock.now_ms())
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def put_kv(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            self.kv.put(
                _field(request, "namespace"), _field(request, "key"), _field(request, "value")
            )
        except MissingFieldError as exc:
            return RemotingCommand.response_to(request, ResponseCode.SYSTEM_ERROR, str(exc))
        self._on_kv_changed()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def get_kv(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        value = self.kv.get(
            request.ext_fields.get("namespace", ""), request.ext_fields.get("key", "")
        )
        if value is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {request.ext_fields.get('namespace')} "
                f"Key: {request.ext_fields.get('key')}",
            )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={"value": value}
        )

    async def delete_kv(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        if self.kv.delete(
            request.ext_fields.get("namespace", ""), request.ext_fields.get("key", "")
        ):
            self._on_kv_changed()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)


class NamesrvServer:
    """One NameServer: route table, handlers, remoting server, dead-broker scan."""

    def __init__(self, config: NamesrvConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.table = RouteTable(
            delete_topic_with_broker_registration=config.delete_topic_with_broker_registration,
            broker_expiry_ms=config.broker_channel_expired_time_ms,
        )
        self.kv = KvConfig()
        self._kv_file = JsonFile(config.kv_config_path) if config.kv_config_path else None
        self._kv_saves: set[asyncio.Task[None]] = set()
        self.handlers = NamesrvHandlers(self.table, self.kv, self.clock, self._save_kv, config)
        routes = {
            **self.handlers.routes(),
            **NamesrvConfigHandlers(config, lambda: self.server.port).routes(),
            **WritePermHandlers(self.table).routes(),
        }
        self.server = RemotingServer(routes, host=config.bind_address, port=config.listen_port)
        self._scan: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return self.server.port

    async def start(self) -> int:
        if self._kv_file is not None:
            Path(self._kv_file.path).parent.mkdir(parents=True, exist_ok=True)
            document = self._kv_file.load()
            if document is not None:
                self.kv = self.handlers.kv = KvConfig.from_json(json.dumps(document))
        port = await self.server.start()
        self.server.on_channel_closed.append(self._channel_closed)
        self._scan = asyncio.get_running_loop().create_task(self._scan_brokers())
        log.info("NameServer serving on port %d", port)
        return port

    def _save_kv(self) -> None:
        """Writes `kvConfig.json` off the loop after a change (when `kvConfigPath` is set)."""
        if self._kv_file is None:
            return
        document = json.loads(self.kv.to_json())
        task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self._kv_file.save, document)
        )
        self._kv_saves.add(task)
        task.add_done_callback(self._kv_saves.discard)

    def _channel_closed(self, channel: Channel) -> None:
        for address in self.table.on_channel_closed(channel.id):
            log.info("broker %s is gone: its connection closed", address)

    async def _scan_brokers(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_not_active_broker_interval_ms / 1000)
            expired = self.table.scan_not_active(
                self.clock.now_ms(), self.config.broker_channel_expired_time_ms
            )
            for address in expired:
                log.warning("broker %s expired: no registration for 120 s", address)

    async def stop(self) -> None:
        if self._scan is not None:
            await cancel_and_wait(self._scan)
            self._scan = None
        await self.server.stop()
        if self._kv_saves:
            await asyncio.gather(*self._kv_saves)
