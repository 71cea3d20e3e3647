"""The broker process: the store, the broker's tables and handlers, one remoting server.

Start-up: check the advertised address and the delay levels, recover the store, load topics,
offsets and delay offsets, start serving and (on a master) delivering delayed messages, register
with every NameServer. Stop (in phases): unregister, stop accepting and let in-flight requests
finish, stop delayed delivery, persist topics, offsets and delay offsets, stop the store cleanly.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from typing import Any, Final

from pocketmq.broker.admin_handlers import AdminHandlers
from pocketmq.broker.admin_stats import AdminStatsHandlers, SubscriptionGroupConfig
from pocketmq.broker.client_handlers import ClientHandlers
from pocketmq.broker.clients import ClientRegistry
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.ha.role import ReplicaRole
from pocketmq.broker.ha.sync import MetadataSync, MetadataTargets, master_routes
from pocketmq.broker.long_polling import PullHoldService
from pocketmq.broker.offset_handlers import OffsetHandlers
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.pull import PullHandler
from pocketmq.broker.queue_locks import QueueLockHandlers, QueueLockTable
from pocketmq.broker.registrar import BrokerIdentity, NameServerRegistrar
from pocketmq.broker.schedule import DelayLevelError, DelayLevels, parse_delay_levels
from pocketmq.broker.send import SendHandler
from pocketmq.broker.send_back import SendBackHandler
from pocketmq.broker.timer_handlers import RecallHandler
from pocketmq.broker.timer_messages import TimerSettings
from pocketmq.broker.topics import TopicConfig, TopicTable
from pocketmq.broker.transaction import (
    CheckSettings,
    EndTransactionHandler,
    RoundRobinProducers,
    TransactionCheckService,
)
from pocketmq.common.codes import RequestCode
from pocketmq.common.topic_names import TopicError
from pocketmq.remoting.transport import RemotingClient, RemotingServer, RequestHandler
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.message_store import MessageStore
from pocketmq.store.timer import TimerMessageStore

log = logging.getLogger(__name__)

CLIENT_SCAN_INTERVAL_S: Final = 10.0


class BrokerConfigError(ValueError):
    """A setting that would make the broker unusable; the message says what to set."""


def advertised_ip(config: BrokerConfig) -> str:
    """The address clients are told to use (`brokerIP1`).

    Raises:
        BrokerConfigError: `brokerIP1` is a wildcard or not an IP address, which no client
            could connect to (a common trap with containers).
    """
    ip = config.broker_ip1 or (
        config.bind_address if config.bind_address not in ("0.0.0.0", "::", "") else "127.0.0.1"
    )
    try:
        parsed = ipaddress.ip_address(ip)
    except ValueError:
        raise BrokerConfigError(
            f"brokerIP1={ip!r} is not an IP address; set brokerIP1 to the address clients use "
            "to reach this broker"
        ) from None
    if parsed.is_unspecified:
        raise BrokerConfigError(
            f"brokerIP1={ip} is a wildcard address that no client can connect to; set brokerIP1 "
            "to this machine's address as clients see it (for a container: the host's address)"
        )
    return ip


class BrokerServer:
    """One broker: storage, tables, handlers and the network side, with their life cycle."""

    def __init__(
        self,
        config: BrokerConfig,
        store_config: MessageStoreConfig,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.ip = advertised_ip(config)
        self.store_config = store_config
        self.store: MessageStore | None = None
        self.server: RemotingServer | None = None
        self.client = RemotingClient()
        self.topics = TopicTable(
            cluster_name=config.broker_cluster_name,
            broker_name=config.broker_name,
            default_queue_nums=config.default_topic_queue_nums,
            auto_create_topic_enable=config.auto_create_topic_enable,
        )
        self.offsets = ConsumerOffsetTable()
        self._offset_save_lock = asyncio.Lock()
        self._offset_saves_asked = 0
        self._offset_saves_done = 0
        self.clients = ClientRegistry(config.channel_expired_timeout_ms)
        self.queue_locks = QueueLockTable()
        # Checked here so that a bad messageDelayLevel stops the broker at start, saying why.
        try:
            self.delay_levels = DelayLevels(
                tuple(parse_delay_levels(store_config.message_delay_level))
            )
        except DelayLevelError as exc:
            raise BrokerConfigError(str(exc)) from None
        self.delay_delivery: DelayDelivery | None = None
        self.timer_store: TimerMessageStore | None = None
        self.transaction_checks: TransactionCheckService | None = None
        self.registrar: NameServerRegistrar | None = None
        self.replica = ReplicaRole(config.broker_role, store_config, self.clock)
        self._tasks: list[asyncio.Task[None]] = []
        self._holds: PullHoldService | None = None
        self._admin_stats: AdminStatsHandlers
        self._pull: PullHandler
        self._topics_dirty = asyncio.Event()
        self._started_ms = 0

    @property
    def address(self) -> str:
        """`ip:port` as clients and NameServers see it."""
        port = self.server.port if self.server else self.config.listen_port
        return f"{self.ip}:{port}"

    async def start(self) -> None:
        """Recovers the store and starts serving; returns when the broker accepts requests."""
        self._started_ms = self.clock.now_ms()
        server = RemotingServer(
            {},
            host=self.config.bind_address,
            port=self.config.listen_port,
            idle_timeout_s=self.config.server_channel_max_idle_time_seconds,
        )
        self.server = server
        port = await server.start(serve=False)
        self.store = store = MessageStore(
            self.store_config, store_host=(self.ip, port), clock=self.clock
        )
        # Before recovery, which dispatches too: schedule entries get their delivery time.
        store.dispatcher.schedule_delays_ms = self.delay_levels.delays_ms
        await asyncio.to_thread(store.load)
        await store.start()
        ha_port = await self.replica.start(
            store,
            bind_address=self.config.bind_address,
            listen_port=port if self.config.listen_port else 0,
            master_ha_address=self._master_ha_address,
        )
        # Timer messages wait on a master only; a slave gets their deliveries by replication.
        if self.store_config.timer_wheel_enable and self.config.broker_role is not BrokerRole.SLAVE:
            self.timer_store = TimerMessageStore(store, self.store_config, self.clock)
            await asyncio.to_thread(self.timer_store.load)
        now = self.clock.now_ms()
        self.topics.load(store.metadata_documents.get("topics.json"), now)
        self.offsets.load(store.metadata_documents.get("consumerOffset.json"))
        self.delay_delivery = DelayDelivery(store, self.delay_levels, self.clock)
        self.delay_delivery.load(store.metadata_documents.get("delayOffset.json"))
        server.handlers.update(self._handlers(store))
        client_handlers = ClientHandlers(
            self.clients,
            self.topics,
            self.clock,
            self._admin_stats.ensure_group if self.config.auto_create_subscription_group else None,
            self._topics_changed,
        )
        server.handlers.update(
            {
                RequestCode.HEART_BEAT: client_handlers.heartbeat,
                RequestCode.UNREGISTER_CLIENT: client_handlers.unregister,
                RequestCode.GET_CONSUMER_LIST_BY_GROUP: client_handlers.consumer_list,
            }
        )
        server.on_channel_closed.append(client_handlers.channel_closed)
        identity = BrokerIdentity(
            cluster_name=self.config.broker_cluster_name,
            broker_name=self.config.broker_name,
            broker_id=self.config.broker_id,
            broker_addr=self.address,
            ha_server_addr=f"{self.config.broker_ip2 or self.ip}:{ha_port}",
        )
        self.registrar = NameServerRegistrar(
            self.client,
            self.config.namesrv_addresses(),
            identity,
            self._registration_document,
            period_ms=self.config.register_name_server_period_ms,
            timeout_ms=self.config.register_broker_timeout_ms,
        )
        await server.serve()
        # As RocketMQ: only a master delivers; a slave gets the results by replication.
        if self.config.broker_role is not BrokerRole.SLAVE:
            self.delay_delivery.start()
            if self.timer_store is not None:
                self.timer_store.start()
            self.transaction_checks = self._transaction_check_service(store)
            self.transaction_checks.start()
        await self.registrar.register_all()
        self.registrar.start()
        if self.replica.is_slave:
            self.replica.follow(self._metadata_sync())
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._persist_offsets_periodically(), name="offsets-flush"),
            loop.create_task(self._persist_topics_on_change(), name="topics-flush"),
            loop.create_task(self._scan_clients(client_handlers), name="client-scan"),
        ]
        self._topics_dirty.set()
        log.info(
            "broker %s (cluster %s, id %d) serving at %s, NameServers: %s",
            self.config.broker_name,
            self.config.broker_cluster_name,
            self.config.broker_id,
            self.address,
            ", ".join(self.config.namesrv_addresses()) or "none",
        )

    def _handlers(self, store: MessageStore) -> dict[int, RequestHandler]:
        config = self.config
        send = SendHandler(
            store,
            self.topics,
            store.store_host,
            self.clock,
            config.default_topic_queue_nums,
            self.store_config.max_message_size,
            self._topic_created,
            broker_permission=config.broker_permission,
            region_id=config.region_id,
            trace_on=config.trace_on,
            delay_level_count=self.delay_levels.max_level,
            find_group=self._find_group,
            reject_transaction_message=config.reject_transaction_message,
            timer=self._timer_settings(),
        )
        self._holds = PullHoldService(store.get_max_offset_in_queue)
        store.dispatcher.on_dispatched.append(self._holds.on_dispatched)
        if self.replica.is_slave:
            store.dispatcher.on_dispatched.append(self._learn_replicated_topic)
        self._pull = pull = PullHandler(
            store,
            self.topics,
            self.offsets,
            hold_service=self._holds,
            broker_permission=config.broker_permission,
            long_polling_enable=config.long_polling_enable,
            enable_property_filter=config.enable_property_filter,
            short_polling_ms=config.short_polling_time_mills,
            slave_read_enable=config.slave_read_enable,
            transfer_count_max=self.store_config.max_transfer_count_on_message_in_memory,
            transfer_bytes_max=self.store_config.max_transfer_bytes_on_message_in_memory,
            registered_subscription=self.clients.subscription,
        )
        self._admin_stats = AdminStatsHandlers(
            store, self.topics, self.offsets, self.clock, self.config, self.store_config
        )
        admin = AdminHandlers(
            store, self.topics, self.offsets, self.clock, self._topics_changed, self.runtime_info
        )
        return {
            RequestCode.SEND_MESSAGE: send.handle,
            RequestCode.SEND_MESSAGE_V2: send.handle,
            RequestCode.SEND_BATCH_MESSAGE: send.handle,
            RequestCode.PULL_MESSAGE: pull.handle,
            **OffsetHandlers(
                store, self.offsets, self.topics, persist=self._persist_offsets_now
            ).routes(),
            **QueueLockHandlers(self.queue_locks, self.clock).routes(),
            **SendBackHandler(
                store,
                self.topics,
                self._find_group,
                send.store_messages,
                self.clock,
                self._topics_changed,
                broker_permission=lambda: send.broker_permission,
            ).routes(),
            **admin.routes(),
            **self._admin_stats.routes(),
            **master_routes(self.offsets.document, self._delay_offsets_document),
            RequestCode.GET_BROKER_HA_STATUS: self.replica.handle_status,
            **EndTransactionHandler(
                store,
                self.clock,
                transaction_timeout_ms=config.transaction_timeout_ms,
                is_slave=lambda: config.broker_role is BrokerRole.SLAVE,
            ).routes(),
            **RecallHandler(
                store,
                self.topics,
                self._timer_settings(),
                self.clock,
                enabled=config.recall_message_enable,
                is_slave=config.broker_role is BrokerRole.SLAVE,
                broker_permission=lambda: send.broker_permission,
                allow_when_not_writeable=config.allow_recall_when_broker_not_writeable,
                region_id=config.region_id,
            ).routes(),
        }

    def _learn_replicated_topic(self, request: DispatchRequest) -> None:
        """A slave serves reads of a topic the master created since the last metadata sync."""
        if request.topic in self.topics.topics:
            return
        try:
            learned = self.topics.learn_replicated(
                request.topic, request.queue_id, self.clock.now_ms()
            )
        except TopicError:
            return
        if learned is not None:
            log.info("topic %s seen in replicated data before its config", request.topic)
            self._topics_changed()

    def _metadata_sync(self) -> MetadataSync:
        registrar = self.registrar
        assert registrar is not None
        assert self.delay_delivery is not None
        delay_delivery = self.delay_delivery

        async def topics(document: Any) -> None:
            if document.get("dataVersion") != self.topics.data_version.to_json():
                self.topics.replace_all(document, self.clock.now_ms())
                self._topics_changed()

        async def offsets(document: Any) -> None:
            # Progress consumers committed here while the master was away goes back to it
            # first, so that the copy taken next does not roll it back.
            ahead = self.offsets.ahead_of(document)
            for group, topic, queue_id, offset in ahead:
                await sync.hand_back_offset(group, topic, queue_id, offset)
            self.offsets.replace_all(document)
            for group, topic, queue_id, offset in ahead:
                self.offsets.commit(group, topic, queue_id, offset)

        async def delay_offsets(document: Any) -> None:
            delay_delivery.offsets.load(document)
            delay_delivery.offsets.changed = True
            await delay_delivery.persist()

        sync = MetadataSync(
            self.client,
            lambda: registrar.master_address,
            MetadataTargets(topics, self._admin_stats.replace_groups, offsets, delay_offsets),
        )
        return sync

    async def _master_ha_address(self) -> str | None:
        """Where a slave follows: `haMasterAddress`, else what the NameServers said when it
        registered (asking them again while no master is known)."""
        if self.store_config.ha_master_address:
            return self.store_config.ha_master_address
        registrar = self.registrar
        if registrar is None:
            return None
        if registrar.master_ha_address is None:
            await registrar.register_all()
        return registrar.master_ha_address

    def _delay_offsets_document(self) -> dict[str, Any]:
        return self.delay_delivery.offsets.snapshot() if self.delay_delivery else {}

    def _timer_settings(self) -> TimerSettings:
        return TimerSettings(
            enabled=self.store_config.timer_wheel_enable,
            precision_ms=self.store_config.timer_precision_ms,
            max_delay_sec=self.store_config.timer_max_delay_sec,
            broker_name=self.config.broker_name,
        )

    def _transaction_check_service(self, store: MessageStore) -> TransactionCheckService:
        config = self.config
        settings = CheckSettings(
            interval_ms=config.transaction_check_interval_ms,
            timeout_ms=config.transaction_timeout_ms,
            check_max=config.transaction_check_max,
            file_reserved_ms=int(self.store_config.file_reserved_time_hours * 3_600_000),
        )
        return TransactionCheckService(
            store,
            self.offsets,
            RoundRobinProducers(self.clients).pick,
            self.clock,
            broker_name=config.broker_name,
            settings=settings,
        )

    async def _find_group(self, group: str) -> SubscriptionGroupConfig | None:
        """A group's settings; an unknown group is created first with
        `autoCreateSubscriptionGroup` (`findSubscriptionGroupConfig`)."""
        groups = self._admin_stats.groups.groups
        if group not in groups and self.config.auto_create_subscription_group:
            await self._admin_stats.ensure_group(group)
        return groups.get(group)

    def _registration_document(self) -> dict[str, Any]:
        return self.topics.snapshot()

    def _topic_created(self, config: TopicConfig) -> None:
        log.info("topic %s created on first send", config.topic_name)
        self._topics_changed()

    def _topics_changed(self) -> None:
        self._topics_dirty.set()
        if self.registrar is not None:
            self.registrar.register_soon()

    def runtime_info(self) -> dict[str, str]:
        store = self.store
        assert store is not None
        return {
            "brokerVersionDesc": "pocketmq",
            "brokerRole": self.config.broker_role.value,
            "bootTimestamp": str(self._started_ms),
            "commitLogMinOffset": str(store.min_phy_offset),
            "commitLogMaxOffset": str(store.max_phy_offset),
            "dispatchBehindBytes": str(store.max_phy_offset - store.dispatcher.reput_offset),
            "topicCount": str(len(self.topics.topics)),
            "clientConnections": str(len(self.server.channels) if self.server else 0),
            "pulledMessageCount": str(self._pull.pulled_messages),
            **(self.delay_delivery.runtime_stats() if self.delay_delivery else {}),
            **(self.timer_store.runtime_stats() if self.timer_store else {}),
        }

    async def _persist_offsets_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.config.flush_consumer_offset_interval_ms / 1000)
            await self._persist_offsets()

    async def _persist_offsets_now(self) -> None:
        """Saves the consumer offsets committed so far; callers waiting together share a save
        (one that starts after each caller's call)."""
        self._offset_saves_asked += 1
        asked = self._offset_saves_asked
        async with self._offset_save_lock:
            if self._offset_saves_done >= asked:
                return  # a save that started after this call has finished
            covers = self._offset_saves_asked
            await self._save_offsets()
            self._offset_saves_done = covers

    async def _persist_offsets(self) -> None:
        async with self._offset_save_lock:
            await self._save_offsets()
        if self.delay_delivery is not None:
            await self.delay_delivery.persist()

    async def _save_offsets(self) -> None:
        if self.store is not None and self.offsets.changed:
            document = self.offsets.snapshot()
            await asyncio.to_thread(self.store.metadata.consumer_offsets.save, document)

    async def _persist_topics_on_change(self) -> None:
        while True:
            await self._topics_dirty.wait()
            self._topics_dirty.clear()
            await self._persist_topics()

    async def _persist_topics(self) -> None:
        if self.store is not None:
            document = self.topics.snapshot()
            await asyncio.to_thread(self.store.metadata.topics.save, document)

    async def _scan_clients(self, handlers: ClientHandlers) -> None:
        while True:
            await asyncio.sleep(CLIENT_SCAN_INTERVAL_S)
            handlers.scan_expired()

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stops in phases; safe to call twice."""
        started = time.monotonic()
        if self.registrar is not None:
            await self.registrar.stop()
            self.registrar = None
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        if self._holds is not None:
            self._holds.close()
        if self.server is not None:
            await self.server.stop(grace_s)
        await self.replica.stop()
        if self.delay_delivery is not None:
            await self.delay_delivery.stop()
            self.delay_delivery = None
        if self.timer_store is not None:
            await self.timer_store.stop()
            self.timer_store = None
        if self.transaction_checks is not None:
            await self.transaction_checks.stop()
            self.transaction_checks = None
        await self.client.close()
        if self.store is not None:
            await self._persist_topics()
            self.offsets.changed = True
            await self._persist_offsets()
            await self.store.shutdown()
            self.store = None
        log.info("broker stopped in %.1f s", time.monotonic() - started)
