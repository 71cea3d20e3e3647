"""A broker in controller mode (`enableControllerMode=true`; RocketMQ's `ReplicasManager`):
it takes its broker id from the controllers, heartbeats every one of them, and plays the role
the leader decides, master or slave of the master it names.

Start: the id (applied once, kept in `brokerIdentity`), then registration; a group without a
master asks for an election. Then three loops: heartbeats (`brokerHeartbeatInterval`), the
replica info from the leader (`syncBrokerMetadataPeriod`; NOTIFY_BROKER_ROLE_CHANGED brings a
change sooner), and on the master the SyncStateSet check (`checkSyncStateSetPeriod`).

Only a newer master epoch changes the role. A master starts its epoch at its CommitLog end and
streams with the epoch handshake; a slave cuts back to the point it shares with its master
before it follows (`broker/ha/epochs.py`). A master whose heartbeats no controller majority
took for most of `controllerHeartBeatTimeoutMills` is fenced: the controllers may be electing
another, so it acknowledges nothing until they hear it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.controlled.client import ControllerClient, ControllerUnavailable
from pocketmq.broker.controlled.identity import ReplicaInfo, take_broker_id
from pocketmq.broker.controlled.sync_state import SyncStateSet
from pocketmq.broker.ha.epochs import FILE_NAME, EpochFile
from pocketmq.broker.ha.master import HAMaster
from pocketmq.broker.ha.settings import HASettings
from pocketmq.broker.ha.slave import HASlave
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.ha_qos import Qos, QosError, parse_qos
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.tls import Listener
from pocketmq.remoting.transport import RemotingClient
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.runtime.json_file import JsonFile
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

RoleHook = Callable[[], Awaitable[None]]
LEASE_SHARE = 0.8
"""Of the heartbeat timeout: a master fences itself this long after the last heartbeat a
controller majority took, before any controller can have judged it dead."""


class ControlledReplica:
    """Build it over the loaded store; `start` once the broker serves."""

    def __init__(
        self,
        config: BrokerConfig,
        store_config: MessageStoreConfig,
        store: MessageStore,
        *,
        client: RemotingClient,
        broker_address: str,
        ha_host: str,
        clock: Clock,
    ) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.broker_address = broker_address
        self._ha_host = ha_host
        self._ha_bind = config.bind_address
        self._ha_port = store_config.ha_listen_port
        self.settings = HASettings.from_store_config(store_config, sync=True)
        self._store_config = store_config
        self._client = client
        self.controllers = ControllerClient(client, config.controller_addresses())
        root = Path(store.root)
        self.epochs = EpochFile(Path(store_config.store_path_epoch_file or root / FILE_NAME))
        self._identity = JsonFile(root / "brokerIdentity")
        self.broker_id = 0
        self.info: ReplicaInfo | None = None
        self.serving = False
        """Master, acknowledging puts."""
        self.ha_master: HAMaster | None = None
        self._ha_listener: Listener | None = None
        self.ha_slave: HASlave | None = None
        self.sync_state: SyncStateSet | None = None
        self.on_master: list[RoleHook] = []
        self.on_slave: list[RoleHook] = []
        self.role_changes = 0
        self._lease_ms = 0
        self._replaced_in = 0
        """A master epoch a controller named that is newer than this broker's."""
        self.qos = Qos.AVAILABILITY
        """The group's QoS level, as the controllers' heartbeat answers say."""
        self._role_lock = asyncio.Lock()
        self._wake_sync = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        store.accepts_puts = False

    @property
    def is_slave(self) -> bool:
        return not self.serving

    @property
    def registered_id(self) -> int:
        """The id NameServers know this broker by: 0 while master, as RocketMQ."""
        return 0 if self.serving else self.broker_id

    @property
    def ha_port(self) -> int:
        if self._ha_port < 0:
            port = int(self.broker_address.rpartition(":")[2])
            self._ha_port = port + 1
        return self._ha_port

    # -- life cycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Takes an id and a role if a controller leader answers now; keeps trying in the
        background otherwise (the broker serves reads meanwhile).

        Raises:
            OSError: the HA port cannot be bound.
        """
        self.epochs.load()
        # Bound for the broker's whole life, as RocketMQ's HA service is: a port first bound at
        # a promotion could by then be taken (by any outgoing connection's ephemeral port), and
        # the new master would have no way for its slaves in.
        self._ha_listener = listener = Listener.for_process(self._accept_slave)
        self._ha_port = await listener.start(self._ha_bind, self.ha_port)
        log.info("HA service listening on %s:%d (tls %s)", self._ha_bind, self._ha_port,
                 listener.mode.value)  # fmt: skip
        loop = asyncio.get_running_loop()
        try:
            await self._join()
        except ControllerUnavailable as exc:
            log.warning("no controller leader yet (%s); this broker keeps trying", exc)
        # Added to, not replaced: joining may have started the master's SyncStateSet check.
        self._tasks += [
            loop.create_task(self._heartbeats(), name="controller-heartbeat"),
            loop.create_task(self._sync_replica_info(), name="controller-sync"),
        ]

    async def stop(self) -> None:
        for task in list(self._tasks):
            await cancel_and_wait(task)
        self._tasks = []
        async with self._role_lock:
            await self._stop_slave()
            if self.serving:
                await self._stop_master("stopping")
        if self._ha_listener is not None:
            self._ha_listener.close()
            await self._ha_listener.wait_closed()
            self._ha_listener = None

    async def _accept_slave(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A slave's HA connection: served while this broker is master, else closed (the slave
        asks again whom the controller names)."""
        master = self.ha_master
        if master is None or not self.serving:
            writer.close()
            return
        await master.accept(reader, writer)

    async def _join(self) -> None:
        if not self.broker_id:
            self.broker_id = await self._take_broker_id()
        await self._heartbeat_once()
        response = await self.controllers.invoke(
            RequestCode.CONTROLLER_REGISTER_BROKER,
            {
                "clusterName": self.config.broker_cluster_name,
                "brokerName": self.config.broker_name,
                "brokerId": str(self.broker_id),
                "brokerAddress": self.broker_address,
                "invokeTime": str(self.clock.now_ms()),
            },
        )
        if response.code != ResponseCode.SUCCESS:
            raise ControllerUnavailable(f"registration refused: {response.code} {response.remark}")
        info = ReplicaInfo.from_response(response)
        if info.master_id is None:
            info = await self._elect() or info
        await self.apply(info)

    async def _take_broker_id(self) -> int:
        return await take_broker_id(
            self.controllers,
            self._identity,
            cluster=self.config.broker_cluster_name,
            name=self.config.broker_name,
            address=self.broker_address,
            now_ms=self.clock.now_ms,
        )

    async def _elect(self) -> ReplicaInfo | None:
        """Asks for an election (the group has no master); the answer when it names one."""
        response = await self.controllers.invoke(
            RequestCode.CONTROLLER_ELECT_MASTER,
            {
                "clusterName": self.config.broker_cluster_name,
                "brokerName": self.config.broker_name,
                "brokerId": str(self.broker_id),
                "designateElect": "false",
                "invokeTime": str(self.clock.now_ms()),
            },
        )
        if response.code in (ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST):
            return ReplicaInfo.from_response(response)
        log.info("no master elected yet for %s: %s", self.config.broker_name, response.remark)
        return None

    # -- roles ------------------------------------------------------------------------------------
    async def apply(self, info: ReplicaInfo) -> None:
        """Plays the role `info` gives this broker, if it is news (a newer master epoch, or
        the first word)."""
        async with self._role_lock:
            known = self.info
            if known is not None and info.master_epoch < known.master_epoch:
                return
            newer = known is None or info.master_epoch > known.master_epoch
            self.info = info
            if info.master_id == self.broker_id:
                if newer or not self.serving:
                    await self._become_master(info)
                elif self.sync_state is not None:
                    self.sync_state.accepted(set(info.sync_state_set), info.sync_state_set_epoch)
                    assert self.ha_master is not None
                    self.ha_master.recheck()
                return
            if newer or (info.master_id is not None and self.ha_slave is None):
                await self._become_slave(info)

    async def _become_master(self, info: ReplicaInfo) -> None:
        await self._stop_slave()
        store = self.store
        store.take_over_writing()
        if self.epochs.last_epoch != info.master_epoch:
            await asyncio.to_thread(self.epochs.begin, info.master_epoch, store.max_phy_offset)
        self._lease_ms = self.clock.now_ms()  # it was just elected: the controllers hear it
        rule = SyncStateSet(
            self.broker_id,
            set(info.sync_state_set),
            info.sync_state_set_epoch,
            self._store_config,
            fenced=self._fenced,
            now_ms=self.clock.now_ms,
        )
        rule.wanted = self._wake_sync.set
        rule.qos = self.qos
        self.sync_state = rule
        if self.ha_master is None:
            self.ha_master = HAMaster(
                store, self.settings, self.clock, epochs=self.epochs, rule=rule
            )
            self.ha_master.on_disconnect.append(lambda connection: self._wake_sync.set())
        else:
            self.ha_master.rule = rule
            self.ha_master.drop_connections()
        store.replication = self.ha_master
        store.accepts_puts = True
        self.serving = True
        self.role_changes += 1
        self._spawn(self._check_sync_state_set(rule))
        log.info(
            "master of %s in epoch %d from CommitLog offset %d (SyncStateSet %s)",
            self.config.broker_name, info.master_epoch, store.max_phy_offset,
            sorted(rule.members),
        )  # fmt: skip
        await self._run_hooks(self.on_master)

    async def _stop_master(self, why: str) -> None:
        self.serving = False
        self.store.accepts_puts = False
        self.store.replication = None
        self.sync_state = None
        if self.ha_master is not None:
            await self.ha_master.stop()
            self.ha_master = None
        self.role_changes += 1
        log.info("no longer master of %s (%s)", self.config.broker_name, why)
        await self._run_hooks(self.on_slave)

    async def _become_slave(self, info: ReplicaInfo) -> None:
        if self.serving:
            await self._stop_master(f"epoch {info.master_epoch} belongs to {info.master_id}")
        await self._stop_slave()
        if info.master_id is None:
            log.info("%s has no master in epoch %d", self.config.broker_name, info.master_epoch)
            return
        master = info.master_address
        self.ha_slave = slave = HASlave(
            self.store,
            HASettings.from_store_config(self._store_config, sync=False),
            lambda: self._master_ha_address(master),
            self.clock,
            epochs=self.epochs,
            broker_id=self.broker_id,
            master_epoch=lambda: self.info.master_epoch if self.info else 0,
        )
        slave.start()
        log.info("slave of %s's master %d (%s) in epoch %d", self.config.broker_name,
                 info.master_id, master, info.master_epoch)  # fmt: skip
        await self._run_hooks(self.on_slave)

    async def _stop_slave(self) -> None:
        if self.ha_slave is not None:
            await self.ha_slave.stop()
            self.ha_slave = None

    async def _master_ha_address(self, master: str) -> str | None:
        """The master's HA address, from its own status (GET_BROKER_HA_STATUS)."""
        request = RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS)
        try:
            response = await self._client.invoke(master, request, 3.0)
            address = json.loads(response.body or b"{}").get("haServerAddr")
        except (RemotingError, OSError, ValueError) as exc:
            log.debug("master %s did not say its HA address: %s", master, exc)
            return None
        return str(address) if address else None

    async def _run_hooks(self, hooks: list[RoleHook]) -> None:
        for hook in hooks:
            try:
                await hook()
            except Exception:  # a service that fails to start or stop must not stop the roles
                log.exception("a role change step failed")

    def _fenced(self) -> str | None:
        known = self.info.master_epoch if self.info else 0
        if self._replaced_in > known:
            return (
                f"fenced: the controllers elected a master in epoch {self._replaced_in}, newer "
                f"than this broker's {known}: send again"
            )
        silent = self.clock.now_ms() - self._lease_ms
        limit = LEASE_SHARE * self.config.controller_heartbeat_timeout_ms
        if silent > limit:
            return (
                f"fenced: no controller majority heard this master for {silent} ms; a new "
                "master may be elected: send again"
            )
        return None

    # -- loops ------------------------------------------------------------------------------------
    def _take_qos(self, text: str) -> None:
        try:
            qos = parse_qos(text, "haQos")
        except QosError:
            return
        if qos is not self.qos:
            log.info("the controller sets QoS %s for %s", qos.value, self.config.broker_name)
            self.qos = qos
        if self.sync_state is not None:
            self.sync_state.qos = qos

    def _heartbeat_fields(self) -> dict[str, str]:
        rule = self.sync_state
        return {
            "clusterName": self.config.broker_cluster_name,
            "brokerAddr": self.broker_address,
            "brokerName": self.config.broker_name,
            "brokerId": str(self.broker_id),
            "epoch": str(self.epochs.last_epoch),
            "maxOffset": str(self.store.max_phy_offset),
            "confirmOffset": str(rule.acknowledged if rule else self.store.max_phy_offset),
            "heartbeatTimeoutMills": str(self.config.controller_heartbeat_timeout_ms),
            "electionPriority": str(self.config.broker_election_priority),
            # pocketmq's: the master's replication state, shown by getSyncStateSet.
            "haState": rule.state.value if rule else "",
        }

    async def _heartbeat_once(self) -> None:
        if not self.broker_id:
            return
        sent = self.clock.now_ms()
        answers = await self.controllers.heartbeat_all(self._heartbeat_fields())
        took, epoch = answers.took, answers.master_epoch
        if answers.qos is not None:
            self._take_qos(answers.qos)
        known = self.info.master_epoch if self.info else 0
        if epoch > known:
            if self.serving and epoch > self._replaced_in:
                log.warning(
                    "a controller knows master epoch %d, newer than this master's %d: "
                    "acknowledging nothing until the new role is known", epoch, known,
                )  # fmt: skip
            self._replaced_in = epoch
            self._wake_sync_info()
        if took > len(self.controllers.addresses) // 2:
            self._lease_ms = sent

    async def _heartbeats(self) -> None:
        interval = self.config.broker_heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self._heartbeat_once()

    async def _sync_replica_info(self) -> None:
        interval = self.config.sync_broker_metadata_period_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                if self.info is None:
                    await self._join()
                    continue
                response = await self.controllers.invoke(
                    RequestCode.CONTROLLER_GET_REPLICA_INFO,
                    {"brokerName": self.config.broker_name},
                )
                if response.code != ResponseCode.SUCCESS:
                    continue
                info = ReplicaInfo.from_response(response)
                if info.master_id is None:
                    info = await self._elect() or info
                await self.apply(info)
            except ControllerUnavailable:
                continue

    async def _check_sync_state_set(self, rule: SyncStateSet) -> None:
        """While this broker masters with `rule`: asks the controller to grow or shrink the
        set when the slaves' progress says so."""
        period = self.config.check_sync_state_set_period_ms / 1000
        started = self.clock.now_ms()
        while self.sync_state is rule:
            # While holding puts for a slave, look again soon enough to give up in time.
            wait = period
            if rule.holding is not None:
                wait = min(period, self._store_config.ha_semi_sync_hold_ms / 2000)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake_sync.wait()
            self._wake_sync.clear()
            master = self.ha_master
            if self.sync_state is not rule or master is None or self.info is None:
                return
            if rule.give_up_holding():
                master.recheck()
            rule.observe(slaves_connected=bool(master.connections))
            grace_over = (
                self.clock.now_ms() - started > self._store_config.ha_max_time_slave_not_catchup_ms
            )
            wanted = rule.proposal(master.connections, grace_over)
            if wanted is None:
                continue
            await self._alter(rule, wanted)
            master.recheck()
            rule.observe(slaves_connected=bool(master.connections))

    async def _alter(self, rule: SyncStateSet, wanted: set[int]) -> None:
        info = self.info
        assert info is not None
        body = json.dumps({"syncStateSet": sorted(wanted), "syncStateSetEpoch": rule.epoch})
        try:
            response = await self.controllers.invoke(
                RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
                {
                    "brokerName": self.config.broker_name,
                    "masterBrokerId": str(self.broker_id),
                    "masterEpoch": str(info.master_epoch),
                    "invokeTime": str(self.clock.now_ms()),
                },
                body.encode(),
            )
        except ControllerUnavailable:
            return  # the pending set keeps counting; asked again at the next check
        if response.code == ResponseCode.SUCCESS:
            answer = json.loads(response.body or b"{}")
            rule.accepted(
                {int(i) for i in answer.get("syncStateSet", sorted(wanted))},
                int(answer.get("syncStateSetEpoch", rule.epoch + 1)),
            )
            return
        log.info("the controller refused SyncStateSet %s: %s %s", sorted(wanted),
                 response.code, response.remark)  # fmt: skip
        if response.code in (
            ResponseCode.CONTROLLER_FENCED_MASTER_EPOCH,
            ResponseCode.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
            ResponseCode.CONTROLLER_INVALID_MASTER,
        ):
            self._wake_sync_info()
        if rule.pending is not None and wanted >= rule.members:
            rule.rejected()

    def _wake_sync_info(self) -> None:
        """Fetches the replica info now (this broker's view is stale)."""
        self._spawn(self._refresh())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Runs `work` beside the loops; `stop` cancels it if it still runs."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.append(task)
        task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        if task in self._tasks:
            self._tasks.remove(task)

    async def _refresh(self) -> None:
        with contextlib.suppress(ControllerUnavailable, ValueError):
            response = await self.controllers.invoke(
                RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": self.config.broker_name}
            )
            if response.code == ResponseCode.SUCCESS:
                await self.apply(ReplicaInfo.from_response(response))

    # -- status ----------------------------------------------------------------------------------
    def epoch_cache(self) -> dict[str, Any]:
        """RocketMQ's `EpochEntryCache` (GET_BROKER_EPOCH_CACHE)."""
        head = self.store.max_phy_offset
        return {
            "brokerId": self.registered_id,
            "brokerName": self.config.broker_name,
            "clusterName": self.config.broker_cluster_name,
            "epochList": self.epochs.to_wire(head),
            "maxOffset": head,
        }

    def status(self) -> dict[str, Any]:
        """`HARuntimeInfo`, plus the controller's view: epoch, SyncStateSet, HA address."""
        if self.ha_master is not None and self.serving:
            status = self.ha_master.runtime_info()
        elif self.ha_slave is not None:
            status = self.ha_slave.runtime_info()
        else:
            status = {"master": False}
        info = self.info
        rule = self.sync_state
        status.update(
            {
                "haServerAddr": f"{self._ha_host}:{self.ha_port}",
                "brokerId": self.broker_id,
                "masterEpoch": info.master_epoch if info else 0,
                "masterBrokerId": info.master_id if info else None,
                "syncStateSet": sorted(rule.members) if rule else [],
                "syncStateSetEpoch": rule.epoch if rule else 0,
                "epochs": self.epochs.to_wire(self.store.max_phy_offset),
                "fenced": self._fenced() if self.serving else None,
                "haState": rule.state.value if rule else None,
                "haTransitions": [[at, state.value] for at, state in rule.transitions[-20:]]
                if rule
                else [],
                "haQos": self.qos.value,
                "roleChanges": self.role_changes,
            }
        )
        return status
