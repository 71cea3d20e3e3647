"""The broker process's life cycle: what starts, in which order, what runs, how it stops.

The parts are built in `wiring.py`; metadata files are saved by `persistence.py`.

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

from pocketmq.acl.auth_hook import AuthHook
from pocketmq.acl.hook import AclHook
from pocketmq.broker.acl_handlers import AclAdminHandlers
from pocketmq.broker.auth_handlers import AuthAdminHandlers
from pocketmq.broker.auth_setup import auth_hook
from pocketmq.broker.clients import ClientRegistry
from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.broker.controlled.metadata import MetadataLog
from pocketmq.broker.controlled.replica import ControlledReplica
from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.dledger.replica import DLedgerReplica
from pocketmq.broker.dledger.settings import DLedgerConfigError, DLedgerSettings
from pocketmq.broker.ha.metadata_sync import slave_metadata_sync
from pocketmq.broker.ha.role import ReplicaRole
from pocketmq.broker.ha.sync import MetadataSync
from pocketmq.broker.master_services import MasterServices
from pocketmq.broker.metrics import BrokerMetrics
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.persistence import MetadataPersistence
from pocketmq.broker.queue_locks import QueueLockTable
from pocketmq.broker.registrar import BrokerIdentity, NameServerRegistrar
from pocketmq.broker.replicated_metadata import MetadataTables
from pocketmq.broker.runtime_info import runtime_table
from pocketmq.broker.schedule import DelayLevelError, DelayLevels, parse_delay_levels
from pocketmq.broker.topics import TopicTable
from pocketmq.broker.wiring import (
    BrokerWiring,
    build_put_path,
    build_store,
    eager_request_codes,
    load_delayed_services,
)
from pocketmq.client.credentials import inner_credentials
from pocketmq.observability.exporter import source_for
from pocketmq.observability.metrics_config import MetricsConfig
from pocketmq.observability.registry import MetricSource
from pocketmq.raft.node import NotLeaderError, ProposalLostError
from pocketmq.remoting.transport import RemotingClient, RemotingServer
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.config import FlushDiskType, MessageStoreConfig
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
        metrics: MetricSource | None = None,
    ) -> None:
        """`metrics`: where the broker counts (by default a source labelled with its cluster
        and name, as RocketMQ's broker labels its metrics); an exporter collects it."""
        self.config = config
        self.clock = clock or SystemClock()
        self.ip = advertised_ip(config)
        self.store_config = store_config
        self.store: MessageStore | None = None
        self.server: RemotingServer | None = None
        inner = inner_credentials(config.inner_credentials)
        self.client = RemotingClient(before_request=inner.sign if inner is not None else None)
        self.topics = TopicTable(
            cluster_name=config.broker_cluster_name,
            broker_name=config.broker_name,
            default_queue_nums=config.default_topic_queue_nums,
            auto_create_topic_enable=config.auto_create_topic_enable,
            trace_topic=config.msg_trace_topic_name if config.trace_topic_enable else None,
        )
        self.offsets = ConsumerOffsetTable()
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
        self.master_services: MasterServices | None = None
        self.registrar: NameServerRegistrar | None = None
        self.replica = ReplicaRole(config.broker_role, store_config, self.clock)
        self.controlled: ControlledReplica | None = None
        self.metadata_log: MetadataLog | None = None
        if config.broker_id < 0 and not config.enable_controller_mode:
            raise BrokerConfigError(
                f"brokerId={config.broker_id}: only controller mode (enableControllerMode=true) "
                "leaves the id to the controller; set brokerId=0 for a master, 1 or more for a "
                "slave"
            )
        if config.enable_controller_mode:
            if config.enable_dleger_commit_log:
                raise BrokerConfigError(
                    "enableControllerMode and enableDLegerCommitLog exclude each other: choose "
                    "one way to elect the master"
                )
            if not config.controller_addresses():
                raise BrokerConfigError(
                    "enableControllerMode=true needs controllerAddr, the controllers' addresses "
                    "separated by ';' (e.g. controllerAddr=127.0.0.1:9878;127.0.0.1:9868)"
                )
        self.dledger_settings: DLedgerSettings | None = None
        self.dledger: DLedgerReplica | None = None
        if config.enable_dleger_commit_log:
            try:
                self.dledger_settings = DLedgerSettings.from_config(config)
            except DLedgerConfigError as exc:
                raise BrokerConfigError(str(exc)) from None
        self._tasks: list[asyncio.Task[None]] = []
        self._wiring: BrokerWiring | None = None
        self._persistence: MetadataPersistence | None = None
        self._started_ms = 0
        self.acl: AclHook | None = None
        self.auth: AuthHook | None = None
        self.metrics = BrokerMetrics(
            metrics
            or source_for(
                MetricsConfig(),
                "broker-meter",
                "broker",
                config.broker_cluster_name,
                config.broker_name,
            )
        )
        self.metrics.watch(self)

    @property
    def wiring(self) -> BrokerWiring | None:
        """The handlers and services, while the broker runs."""
        return self._wiring

    @property
    def address(self) -> str:
        """`ip:port` as clients and NameServers see it."""
        port = self.server.port if self.server else self.config.listen_port
        return f"{self.ip}:{port}"

    async def start(self) -> None:
        """Recovers the store and starts serving; returns when the broker accepts requests."""
        self._started_ms = self.clock.now_ms()
        if self.config.acl_enable and self.acl is None:
            self.acl = AclHook(self.config.acl_file_path)  # a bad file stops the start here
        if self.auth is None:
            self.auth = auth_hook(self.config, self.store_config)
        server = RemotingServer(
            {},
            host=self.config.bind_address,
            port=self.config.listen_port,
            idle_timeout_s=self.config.server_channel_max_idle_time_seconds,
        )
        server.observe = self.metrics.rpc
        self.server = server
        port = await server.start(serve=False)
        self.store = store = build_store(
            self.store_config, (self.ip, port), self.clock, self.delay_levels
        )
        await asyncio.to_thread(store.load)
        await store.start()
        now = self.clock.now_ms()
        self.topics.load(store.metadata_documents.get("topics.json"), now)
        self.offsets.load(store.metadata_documents.get("consumerOffset.json"))
        dledger = None
        if self.dledger_settings is not None:
            self.dledger = dledger = DLedgerReplica(
                self.dledger_settings,
                store,
                fsync=self.store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH,
                store_host=(self.ip, port),
                clock=self.clock,
            )
            own_port = self.dledger_settings.peers[self.dledger_settings.self_id]
            ha_port = int(own_port.rpartition(":")[2])
        elif self.config.enable_controller_mode:
            self.controlled = ControlledReplica(
                self.config,
                self.store_config,
                store,
                client=self.client,
                broker_address=f"{self.ip}:{port}",
                ha_host=self.config.broker_ip2 or self.ip,
                clock=self.clock,
            )
            ha_port = self.controlled.ha_port
        else:
            ha_port = await self.replica.start(
                store,
                bind_address=self.config.bind_address,
                listen_port=port if self.config.listen_port else 0,
                master_ha_address=self._master_ha_address,
            )
        put_path = build_put_path(
            store, self.config, self.store_config, self.delay_levels, self.clock, writer=dledger
        )
        delayed = await load_delayed_services(
            store, put_path, self.config, self.store_config, self.delay_levels, self.clock
        )
        self.timer_store = delayed.timer_store
        self.delay_delivery = delayed.delay_delivery
        self._persistence = persistence = MetadataPersistence(
            store, self.topics, self.offsets, self.config, delayed.delay_delivery
        )
        self._wiring = wiring = BrokerWiring(
            store,
            put_path,
            config=self.config,
            store_config=self.store_config,
            clock=self.clock,
            topics=self.topics,
            offsets=self.offsets,
            clients=self.clients,
            queue_locks=self.queue_locks,
            delay_levels=self.delay_levels,
            replica=dledger or self.controlled or self.replica,
            delay_delivery=delayed.delay_delivery,
            topics_changed=self._topics_changed,
            persist_offsets_now=(
                self._replicate_offsets
                if dledger is not None
                else self._record_offsets
                if self.controlled is not None
                else persistence.save_offsets_now
            ),
            runtime_info=self.runtime_info,
            metrics=self.metrics,
        )
        self.master_services = MasterServices(
            delayed.delay_delivery,
            delayed.timer_store,
            lambda: wiring.transaction_check_service(store),
            wiring.pop,
        )
        server.handlers.update(wiring.routes())
        server.eager = eager_request_codes(
            self.store_config.flush_disk_type is FlushDiskType.SYNC_FLUSH
            or self.config.broker_role is BrokerRole.SYNC_MASTER
            or self.dledger_settings is not None
            or self.config.enable_controller_mode
        )
        server.handlers.update(
            AclAdminHandlers(
                self.acl,
                cluster_name=self.config.broker_cluster_name,
                broker_name=self.config.broker_name,
                broker_address=lambda: self.address,
            ).routes()
        )
        server.handlers.update(AuthAdminHandlers(self.auth).routes())
        if self.acl is not None:
            server.guard = self.acl.guard
            self.acl.start()
        elif self.auth.settings.authentication or self.auth.settings.authorization:
            server.guard = self.auth.guard
        server.on_channel_closed.append(wiring.client_handlers.channel_closed)
        if dledger is not None:
            # Before serving: restoring from the Raft log may cut the CommitLog back.
            self._follow_dledger_roles(dledger, wiring)
        if self.controlled is not None:
            self._follow_controlled_roles(self.controlled, wiring)
        identity = BrokerIdentity(
            cluster_name=self.config.broker_cluster_name,
            broker_name=self.config.broker_name,
            broker_id=(
                dledger.broker_id
                if dledger is not None
                else self.controlled.registered_id
                if self.controlled is not None
                else self.config.broker_id
            ),
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
        wiring.topics_updated = self._topics_updated
        await server.serve()
        if dledger is not None:
            await dledger.start()
        elif self.controlled is not None:
            await self.controlled.start()
        elif self.config.broker_role is not BrokerRole.SLAVE:
            # As RocketMQ: only a master delivers; a slave gets the results by replication.
            await self.master_services.start()
        if self.controlled is None or self.controlled.info is not None:
            await self.registrar.register_all()
        self.registrar.start()
        if self.replica.is_slave and self.controlled is None:
            self.replica.follow(self._metadata_sync(wiring))
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(persistence.offsets_periodically(), name="offsets-flush"),
            loop.create_task(persistence.topics_on_change(), name="topics-flush"),
            loop.create_task(wiring.admin_stats.group_saves.run(), name="groups-flush"),
            loop.create_task(self._scan_clients(wiring), name="client-scan"),
        ]
        persistence.topics_changed()
        log.info(
            "broker %s (cluster %s, id %d) serving at %s, NameServers: %s",
            self.config.broker_name,
            self.config.broker_cluster_name,
            self.registrar.identity.broker_id,
            self.address,
            ", ".join(self.config.namesrv_addresses()) or "none",
        )

    def _follow_dledger_roles(self, dledger: DLedgerReplica, wiring: BrokerWiring) -> None:
        """Replicates the metadata tables; a master runs the master's services and registers
        as brokerId 0 with the term as its state version (so NameServers take the newest
        leader's word), a follower as a slave."""
        dledger.attach(self._metadata_tables(wiring))
        metadata = dledger.metadata
        assert metadata is not None
        assert self.master_services is not None
        self.master_services.timer_handover = lambda: metadata.timer_handover

        async def switch() -> None:
            services = self.master_services
            assert services is not None
            if dledger.serving:
                await services.start()
            else:
                await services.stop()
            if self.registrar is not None:
                self.registrar.retarget(dledger.broker_id, dledger.served_term)
                self.registrar.register_soon()

        dledger.on_master.append(switch)
        dledger.on_slave.append(switch)

    def _follow_controlled_roles(self, controlled: ControlledReplica, wiring: BrokerWiring) -> None:
        """Metadata travels as CommitLog records (`MetadataLog`); a master runs the master's
        services and registers as brokerId 0 with its epoch as the state version (NameServers
        keep the newest master); a slave registers under its own id."""
        store = controlled.store
        self.metadata_log = metadata_log = MetadataLog(
            store,
            wiring.put_path,
            self._metadata_tables(wiring),
            store_host=(self.ip, int(controlled.broker_address.rpartition(":")[2])),
            serving=lambda: controlled.serving,
        )
        assert self.master_services is not None
        self.master_services.timer_handover = lambda: metadata_log.metadata.timer_handover

        async def switch() -> None:
            services = self.master_services
            assert services is not None
            if controlled.serving:
                metadata_log.start()
                await services.start()
            else:
                await services.stop()
                await metadata_log.stop()
            if self.registrar is not None:
                epoch = controlled.info.master_epoch if controlled.info else 0
                self.registrar.retarget(controlled.registered_id, epoch)
                self.registrar.register_soon()

        controlled.on_master.append(switch)
        controlled.on_slave.append(switch)

    def _metadata_tables(self, wiring: BrokerWiring) -> MetadataTables:
        return MetadataTables(
            self.topics,
            self.offsets,
            wiring.admin_stats.groups,
            wiring.delay_delivery,
            self.clock,
            self._topics_changed,
            wiring.admin_stats.groups_changed,
            self.timer_store,
        )

    async def _record_offsets(self) -> None:
        """A controller-mode master answers a consumer's commit once its record is
        acknowledged by the write rule."""
        assert self.metadata_log is not None
        await self.metadata_log.flush()

    async def _replicate_offsets(self) -> None:
        """A DLedger master answers a consumer's commit once a majority holds it."""
        assert self.dledger is not None
        assert self.dledger.metadata is not None
        try:
            await self.dledger.metadata.flush()
        except (NotLeaderError, ProposalLostError) as exc:
            raise OSError(f"not replicated to the DLedger group: {exc}") from exc

    def _metadata_sync(self, wiring: BrokerWiring) -> MetadataSync:
        registrar = self.registrar
        assert registrar is not None
        return slave_metadata_sync(
            self.client,
            lambda: registrar.master_address,
            topics=self.topics,
            offsets=self.offsets,
            replace_groups=wiring.admin_stats.replace_groups,
            delay_delivery=wiring.delay_delivery,
            clock=self.clock,
            topics_changed=self._topics_changed,
        )

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

    def _registration_document(self) -> dict[str, Any]:
        return self.topics.snapshot()

    async def _topics_updated(self, names: list[str]) -> None:
        """Saves the named topics (created, changed or deleted) and sends those that exist to
        the NameServers; returns once both are done, as RocketMQ answers a topic's creation: it
        survives a crash and is routed."""
        existing = [name for name in names if name in self.topics.topics]
        jobs = (
            [self._register_increment(existing)] if self.registrar is not None and existing else []
        )
        if self._persistence is not None:
            jobs.append(self._persistence.save_topics_now(names))
        await asyncio.gather(*jobs)

    async def _register_increment(self, names: list[str]) -> None:
        """Sends the named topics to the NameServers; returns once they answered or
        `registerBrokerTimeoutMills` ran out."""
        registrar = self.registrar
        assert registrar is not None
        document = self.topics.increment(names, self.clock.now_ms())
        # `wait_for`, not `asyncio.timeout`: a send starts eagerly, outside any task.
        try:
            await asyncio.wait_for(
                registrar.register_topics(document), self.config.register_broker_timeout_ms / 1000
            )
        except TimeoutError:
            log.warning("registering topic %s with the NameServers took too long; going on",
                        ", ".join(names))  # fmt: skip

    def _topics_changed(self) -> None:
        if self._persistence is not None:
            self._persistence.topics_changed()
        if self.registrar is not None:
            self.registrar.register_soon()

    def runtime_info(self) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO's table."""
        store = self.store
        assert store is not None
        assert self._wiring is not None
        return runtime_table(
            self.config,
            store,
            started_ms=self._started_ms,
            topic_count=len(self.topics.topics),
            client_connections=len(self.server.channels) if self.server else 0,
            pulled_messages=self._wiring.pull.pulled_messages,
            delay_delivery=self.delay_delivery,
            timer_store=self.timer_store,
            role=self._role_override(),
        )

    def _role_override(self) -> str | None:
        """`brokerRole` as it is now, in the modes that elect the master."""
        elected = self.dledger or self.controlled
        if elected is None:
            return None
        return "SYNC_MASTER" if elected.serving else "SLAVE"

    async def _scan_clients(self, wiring: BrokerWiring) -> None:
        while True:
            await asyncio.sleep(CLIENT_SCAN_INTERVAL_S)
            wiring.client_handlers.scan_expired()

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stops in phases; safe to call twice."""
        started = time.monotonic()
        if self.registrar is not None:
            await self.registrar.stop()
            self.registrar = None
        for task in self._tasks:
            await cancel_and_wait(task)
        self._tasks = []
        if self._wiring is not None:
            self._wiring.holds.close()
        if self.server is not None:
            await self.server.stop(grace_s)
        if self.acl is not None:
            await self.acl.stop()
        await self.replica.stop()
        if self.controlled is not None:
            await self.controlled.stop()
        if self.dledger is not None:
            await self.dledger.stop()
        if self.master_services is not None:
            await self.master_services.close()
            self.master_services = None
        self.delay_delivery = None
        self.timer_store = None
        await self.client.close()
        if self.store is not None:
            if self._persistence is not None:
                await self._persistence.save_all()
            if self._wiring is not None:  # the journal folded in: a clean stop leaves none
                await self._wiring.admin_stats.group_saves.save_whole()
            await self.store.shutdown()
            self.store = None
        log.info("broker stopped in %.1f s", time.monotonic() - started)
