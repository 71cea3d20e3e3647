"""How one broker is put together from its config: the store, the services over it, the
request handlers and the table of request codes they answer.

Plain constructor calls; the server (`server.py`) decides when each part starts and stops.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.broker.admin_handlers import AdminHandlers
from pocketmq.broker.admin_queries import AdminQueryHandlers
from pocketmq.broker.admin_stats import AdminStatsHandlers
from pocketmq.broker.client_handlers import ClientHandlers
from pocketmq.broker.clients import ClientRegistry
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.controlled.handlers import controlled_routes
from pocketmq.broker.controlled.replica import ControlledReplica
from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.dledger.handlers import dledger_routes
from pocketmq.broker.dledger.replica import DLedgerReplica
from pocketmq.broker.groups import SubscriptionGroupConfig
from pocketmq.broker.ha.role import ReplicaRole
from pocketmq.broker.ha.sync import master_routes
from pocketmq.broker.long_polling import PullHoldService
from pocketmq.broker.metrics import BrokerMetrics
from pocketmq.broker.offset_handlers import OffsetHandlers
from pocketmq.broker.offset_reset import OffsetResetHandlers
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.pop.handlers import PopArrivals, PopHandlers
from pocketmq.broker.pop.service import PopService, PopSettings
from pocketmq.broker.pull import PullHandler, PullSettings
from pocketmq.broker.put_path import PutPath, PutSettings, StoreWriter
from pocketmq.broker.queue_locks import QueueLockHandlers, QueueLockTable
from pocketmq.broker.schedule import DelayLevels
from pocketmq.broker.send import SendHandler, SendSettings
from pocketmq.broker.send_back import SendBackHandler
from pocketmq.broker.timer_handlers import RecallHandler
from pocketmq.broker.timer_messages import TimerSettings
from pocketmq.broker.topics import TopicTable
from pocketmq.broker.transaction.check_service import RoundRobinProducers, TransactionCheckService
from pocketmq.broker.transaction.half_messages import CheckSettings
from pocketmq.broker.transaction.handlers import EndTransactionHandler
from pocketmq.common.codes import RequestCode
from pocketmq.common.stored_message import HostAddress
from pocketmq.common.topic_names import METADATA_TOPIC, TopicError
from pocketmq.remoting.transport import RequestHandler
from pocketmq.runtime.clock import Clock
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch import DispatchRequest
from pocketmq.store.message_store import MessageStore
from pocketmq.store.timer import TimerMessageStore

log = logging.getLogger(__name__)


def build_store(
    store_config: MessageStoreConfig,
    store_host: HostAddress,
    clock: Clock,
    delay_levels: DelayLevels,
) -> MessageStore:
    """The broker's store, not yet loaded."""
    store = MessageStore(store_config, store_host=store_host, clock=clock)
    # Before recovery, which dispatches too: schedule entries get their delivery time.
    store.dispatcher.schedule_delays_ms = delay_levels.delays_ms
    return store


@dataclass(frozen=True, slots=True)
class DelayedServices:
    """Delayed delivery and (on a master with `timerWheelEnable`) the timer store, loaded;
    the server starts them on a master only."""

    delay_delivery: DelayDelivery
    timer_store: TimerMessageStore | None


def build_put_path(
    store: MessageStore,
    config: BrokerConfig,
    store_config: MessageStoreConfig,
    delay_levels: DelayLevels,
    clock: Clock,
    *,
    writer: StoreWriter | None = None,
) -> PutPath:
    """The one way into `store`: every door below stores through it. `writer` replaces the
    store as what appends (a DLedger replica's Raft log)."""
    settings = PutSettings(
        delay_level_count=delay_levels.max_level,
        timer=TimerSettings.from_config(store_config, config.broker_name),
        reject_transaction_message=config.reject_transaction_message,
        broker_ip=store.store_host[0],
        max_message_size=store_config.max_message_size,
    )
    return PutPath(writer or store, clock, settings)


async def load_delayed_services(
    store: MessageStore,
    put_path: PutPath,
    config: BrokerConfig,
    store_config: MessageStoreConfig,
    delay_levels: DelayLevels,
    clock: Clock,
) -> DelayedServices:
    """Builds and loads the services that store messages again when they are due."""
    timer_store = None
    # Timer messages wait on a master only; a slave gets their deliveries by replication.
    if store_config.timer_wheel_enable and config.broker_role is not BrokerRole.SLAVE:
        timer_store = TimerMessageStore(store, store_config, clock, deliver=put_path.deliver)
        await asyncio.to_thread(timer_store.load)
    delay_delivery = DelayDelivery(store, put_path, delay_levels, clock)
    delay_delivery.load(store.metadata_documents.get("delayOffset.json"))
    return DelayedServices(delay_delivery, timer_store)


_EAGER_ALWAYS: Final = frozenset(
    {
        RequestCode.PULL_MESSAGE,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.HEART_BEAT,
    }
)
_SENDS: Final = frozenset(
    {RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE}
)


def eager_request_codes(puts_wait: bool) -> frozenset[int]:
    """The requests of every message's path that start as they are decoded (`Channel`): a task
    each would cost more than most of them take. Their handlers wait (a held pull, a SYNC_FLUSH
    send) only on futures and timers, never on anything that needs the current task first.

    Sends only where a put does not wait (`puts_wait`: SYNC_FLUSH, a SYNC_MASTER, DLedger or
    controller mode): there every send waits anyway, and started a turn of the loop earlier
    its wait joins a smaller group commit (10.9 against 8.4 sends a sync under RocketMQ's
    tools, 10 % fewer sends a second)."""
    return _EAGER_ALWAYS if puts_wait else _EAGER_ALWAYS | _SENDS


class BrokerWiring:
    """The services and handlers of one broker over its loaded store.

    Build it once the store, topics, offsets and delayed services are loaded; `routes()` is
    the dispatch table.
    """

    def __init__(
        self,
        store: MessageStore,
        put_path: PutPath,
        *,
        config: BrokerConfig,
        store_config: MessageStoreConfig,
        clock: Clock,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        clients: ClientRegistry,
        queue_locks: QueueLockTable,
        delay_levels: DelayLevels,
        replica: ReplicaRole | DLedgerReplica | ControlledReplica,
        delay_delivery: DelayDelivery,
        topics_changed: Callable[[], None],
        persist_offsets_now: Callable[[], Awaitable[None]],
        runtime_info: Callable[[], dict[str, str]],
        metrics: BrokerMetrics,
    ) -> None:
        self.store = store
        self.metrics = metrics
        self.put_path = put_path
        self.config = config
        self.store_config = store_config
        self.clock = clock
        self.topics = topics
        self.offsets = offsets
        self.clients = clients
        self.queue_locks = queue_locks
        self.delay_levels = delay_levels
        self.replica = replica
        self._topics_changed = topics_changed
        self._persist_offsets_now = persist_offsets_now
        self._runtime_info = runtime_info
        self.delay_delivery = delay_delivery
        self.topics_updated: Callable[[list[str]], Awaitable[None]] | None = None
        """Saves the topics and registers the named ones with the NameServers, returning once
        both are done (the server sets it once it has a registrar)."""
        self.holds = PullHoldService(store.get_max_offset_in_queue)
        store.dispatcher.on_dispatched.append(self.holds.on_dispatched)
        if (isinstance(replica, ReplicaRole) and replica.is_slave) or isinstance(
            replica, ControlledReplica
        ):
            store.dispatcher.on_dispatched.append(self._learn_replicated_topics)
        self.pull = PullHandler(
            store,
            topics,
            offsets,
            hold_service=self.holds,
            settings=PullSettings.from_config(config, store_config),
            registered_subscription=clients.subscription,
        )
        self.pull.metrics = metrics
        self.pop_arrivals = PopArrivals()
        store.dispatcher.on_dispatched.append(self.pop_arrivals.on_dispatched)
        self.pop = PopService(
            store,
            put_path,
            topics,
            offsets,
            clock,
            PopSettings(
                cluster_name=config.broker_cluster_name,
                broker_name=config.broker_name,
                revive_queue_num=config.revive_queue_num,
                retry_topic_v2=config.enable_retry_topic_v2,
            ),
            self._topics_updated,
        )
        self.admin_stats = AdminStatsHandlers(store, topics, offsets, clock, config, store_config)
        self.client_handlers = ClientHandlers(
            clients,
            topics,
            clock,
            self.admin_stats.ensure_group if config.auto_create_subscription_group else None,
            self._topics_updated,
            enable_property_filter=config.enable_property_filter,
        )

    def routes(self) -> dict[int, RequestHandler]:
        """Every request code the broker answers, with its handler."""
        store = self.store
        admin = AdminHandlers(
            store,
            self.topics,
            self.offsets,
            self.clock,
            self._topics_changed,
            self._topics_updated,
            self._runtime_info,
        )
        client_handlers = self.client_handlers
        queries = AdminQueryHandlers(
            store, self.topics, self.offsets, self.clients, self.admin_stats.groups, self.config
        )
        return {
            **self._put_path_routes(store),
            RequestCode.PULL_MESSAGE: self.pull.handle,
            **PopHandlers(
                self.pop,
                self.pop_arrivals,
                self._find_group,
                lambda: self.config.broker_permission,
            ).routes(),
            **OffsetHandlers(
                store, self.offsets, self.topics, persist=self._persist_offsets_now
            ).routes(),
            **QueueLockHandlers(self.queue_locks, self.clock).routes(),
            **OffsetResetHandlers(
                store,
                self.offsets,
                self.topics,
                self.admin_stats.groups,
                self.clients,
                broker_name=self.config.broker_name,
                is_slave=lambda: self.replica.is_slave,
                persist=self._persist_offsets_now,
            ).handlers(),
            **admin.routes(),
            **self.admin_stats.routes(),
            **queries.handlers(),
            **master_routes(self.offsets.document, self._delay_offsets_document),
            **self._replica_routes(),
            RequestCode.HEART_BEAT: queries.remember_clients(client_handlers.heartbeat),
            RequestCode.UNREGISTER_CLIENT: client_handlers.unregister,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: client_handlers.consumer_list,
            RequestCode.CHECK_CLIENT_CONFIG: client_handlers.check_client_config,
        }

    def _replica_routes(self) -> dict[int, RequestHandler]:
        replica = self.replica
        if isinstance(replica, DLedgerReplica):
            return dledger_routes(replica)
        if isinstance(replica, ControlledReplica):
            return controlled_routes(replica)
        return {RequestCode.GET_BROKER_HA_STATUS: replica.handle_status}

    def _learn_replicated_topics(self, run: Sequence[DispatchRequest]) -> None:
        """A slave serves reads of topics the master created since the last metadata sync."""
        if not self.replica.is_slave:
            return
        known = self.topics.topics
        for topic, queue_id in dict.fromkeys((request.topic, request.queue_id) for request in run):
            if topic in known or topic == METADATA_TOPIC:
                continue
            try:
                learned = self.topics.learn_replicated(topic, queue_id, self.clock.now_ms())
            except TopicError:
                continue
            if learned is not None:
                log.info("topic %s seen in replicated data before its config", topic)
                self._topics_changed()

    async def _find_group(self, group: str) -> SubscriptionGroupConfig | None:
        """A group's settings; an unknown group is created first with
        `autoCreateSubscriptionGroup` (`findSubscriptionGroupConfig`)."""
        groups = self.admin_stats.groups.groups
        if group not in groups and self.config.auto_create_subscription_group:
            await self.admin_stats.ensure_group(group)
        return groups.get(group)

    async def _topics_updated(self, names: list[str]) -> None:
        # Looked up at each call: the server sets `topics_updated` after the routes are built.
        if self.topics_updated is not None:
            await self.topics_updated(names)
        else:
            self._topics_changed()

    def _delay_offsets_document(self) -> dict[str, Any]:
        return self.delay_delivery.offsets.snapshot()

    # -- the put path: send, send back, delayed and timer messages, transactions --------------

    def _put_path_routes(self, store: MessageStore) -> dict[int, RequestHandler]:
        config = self.config
        put_path = self.put_path
        send = SendHandler(
            put_path,
            self.topics,
            SendSettings.from_config(config, store.store_host),
            self.clock,
            self._topics_updated,
            broker_permission=config.broker_permission,
            find_group=self._find_group,
        )
        send_back = SendBackHandler(
            store,
            self.topics,
            self._find_group,
            put_path,
            self.clock,
            self._topics_updated,
            broker_permission=lambda: send.broker_permission,
        )
        end_transaction = EndTransactionHandler(
            store,
            put_path,
            self.clock,
            transaction_timeout_ms=config.transaction_timeout_ms,
            is_slave=lambda: self.replica.is_slave,
        )
        send.metrics = send_back.metrics = end_transaction.metrics = self.metrics
        return {
            RequestCode.SEND_MESSAGE: send.handle,
            RequestCode.SEND_MESSAGE_V2: send.handle,
            RequestCode.SEND_BATCH_MESSAGE: send.handle,
            **send_back.routes(),
            **end_transaction.routes(),
            **RecallHandler(
                put_path,
                self.topics,
                TimerSettings.from_config(self.store_config, config.broker_name),
                self.clock,
                enabled=config.recall_message_enable,
                is_slave=config.broker_role is BrokerRole.SLAVE,
                broker_permission=lambda: send.broker_permission,
                allow_when_not_writeable=config.allow_recall_when_broker_not_writeable,
                region_id=config.region_id,
            ).routes(),
        }

    def transaction_check_service(self, store: MessageStore) -> TransactionCheckService:
        config = self.config
        settings = CheckSettings(
            interval_ms=config.transaction_check_interval_ms,
            timeout_ms=config.transaction_timeout_ms,
            check_max=config.transaction_check_max,
            file_reserved_ms=int(self.store_config.file_reserved_time_hours * 3_600_000),
        )
        return TransactionCheckService(
            store,
            self.put_path,
            self.offsets,
            RoundRobinProducers(self.clients).pick,
            self.clock,
            broker_name=config.broker_name,
            settings=settings,
        )
