"""One controller replica: a `RaftNode` over the replicated tables, the request handlers
brokers and admin tools reach on its address, and, on the leader, the scan that elects a new
master when a group's master stops heartbeating.

Every decision runs on the leader, one at a time: wait until this replica applied everything
committed before (a read barrier), decide from the tables, replicate the events, answer once
they applied here. A replica that does not lead answers CONTROLLER_NOT_LEADER naming the
leader, except for heartbeats, metadata and its own settings, which every replica serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.controller.config import ControllerConfig
from pocketmq.controller.decisions import (
    Decision,
    alter_sync_state_set,
    apply_broker_id,
    clean_broker_data,
    elect_master,
    master_fields,
    next_broker_id,
    register_broker,
    sync_state_set_body,
)
from pocketmq.controller.heartbeats import LiveBroker, LiveBrokers
from pocketmq.controller.replicas import ControllerStateMachine, ReplicasInfo, encode_events
from pocketmq.controller.settings_handlers import ControllerSettingsHandlers
from pocketmq.raft.core import Role
from pocketmq.raft.node import NotLeaderError, ProposalLostError, RaftNode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel, RemotingClient, RemotingServer, RequestHandler
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_TIMEOUT_MS: Final = 10_000
_NOTIFY_TIMEOUT_S: Final = 3.0


class BadRequest(ValueError):
    """A header field missing or malformed: CONTROLLER_INVALID_REQUEST."""


def _field(request: RemotingCommand, name: str) -> str:
    value = request.ext_fields.get(name)
    if value is None or value == "":
        raise BadRequest(f"the request lacks {name}")
    return value


def _int_field(request: RemotingCommand, name: str, default: int | None = None) -> int:
    value = request.ext_fields.get(name)
    if (value is None or value == "") and default is not None:
        return default
    try:
        return int(_field(request, name))
    except ValueError:
        raise BadRequest(f"{name}={value!r} is not a number") from None


class ControllerServer:
    def __init__(self, config: ControllerConfig, *, clock: Clock | None = None) -> None:
        self.config = config
        self.clock = clock or SystemClock()
        self.peers = config.peers()
        self.replicas = ReplicasInfo()
        self.live = LiveBrokers(self.clock.now_ms)
        self.live.on_dead.append(lambda broker: self._scan_now.set())
        self.settings_handlers = ControllerSettingsHandlers(
            config, lambda: int(self.peers[config.self_id].rpartition(":")[2])
        )
        self.node: RaftNode[None] = RaftNode(
            config.node_settings(), ControllerStateMachine(self.replicas), self.routes()
        )
        self.client = RemotingClient()
        self.extra_server: RemotingServer | None = None
        self.elections = 0
        self.election_results: dict[tuple[str, str], int] = {}
        """Elections this replica ran as leader, by (broker set, RocketMQ's result name)."""
        self._decide_lock = asyncio.Lock()
        self._scan_now = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def routes(self) -> dict[int, RequestHandler]:
        leader_only: dict[int, Callable[[RemotingCommand], Awaitable[RemotingCommand]]] = {
            RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: self._next_broker_id,
            RequestCode.CONTROLLER_APPLY_BROKER_ID: self._apply_broker_id,
            RequestCode.CONTROLLER_REGISTER_BROKER: self._register_broker,
            RequestCode.CONTROLLER_GET_REPLICA_INFO: self._get_replica_info,
            RequestCode.CONTROLLER_ELECT_MASTER: self._elect_master,
            RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: self._alter_sync_state_set,
            RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: self._get_sync_state_data,
            RequestCode.CLEAN_BROKER_DATA: self._clean_broker_data,
        }
        routes: dict[int, RequestHandler] = {
            code: self._leader_only(handler) for code, handler in leader_only.items()
        }
        routes[RequestCode.BROKER_HEARTBEAT] = self._heartbeat
        routes[RequestCode.CONTROLLER_GET_METADATA_INFO] = self._metadata
        routes.update(self.settings_handlers.routes())
        return routes

    @property
    def address(self) -> str:
        return self.peers[self.config.self_id]

    @property
    def is_leader(self) -> bool:
        return self.node.raft.role is Role.LEADER

    def leader_address(self) -> str | None:
        return self.node.leader_address()

    async def start(self) -> int:
        port = await self.node.start()
        self.node.server.on_channel_closed.append(self.live.channel_closed)
        # A new leader scans at once: a master that died with the old leader is judged now
        # (its connection here closed too), not at the next interval.
        self.node.on_change.append(self._scan_now.set)
        listen = self.config.listen_port
        if listen and listen != port:
            self.extra_server = RemotingServer(self.routes(), host="0.0.0.0", port=listen)
            await self.extra_server.start()
            self.extra_server.on_channel_closed.append(self.live.channel_closed)
        self._tasks.append(asyncio.get_running_loop().create_task(self._scan(), name="scan"))
        log.info(
            "controller %s of group %s serving at %s (peers %s)", self.config.self_id,
            self.config.group, self.address,
            ", ".join(f"{n}={a}" for n, a in self.peers.items()),
        )  # fmt: skip
        return port

    async def stop(self) -> None:
        for task in list(self._tasks):
            await cancel_and_wait(task)
        self._tasks = []
        if self.extra_server is not None:
            await self.extra_server.stop(0.5)
        await self.node.stop()
        await self.client.close()

    # -- deciding ------------------------------------------------------------------------------
    async def _decide(self, decide: Callable[[], Decision]) -> Decision:
        """Runs `decide` on the leader's current tables, replicates its events and returns it
        once they applied here.

        Raises:
            NotLeaderError, ProposalLostError: the caller answers CONTROLLER_NOT_LEADER.
        """
        async with self._decide_lock:
            await self.node.read_barrier()
            decision = decide()
            if decision.events:
                await self.node.propose(encode_events(decision.events))
            return decision

    def _leader_only(
        self, handler: Callable[[RemotingCommand], Awaitable[RemotingCommand]]
    ) -> RequestHandler:
        async def handle(request: RemotingCommand, channel: Channel) -> RemotingCommand:
            try:
                return await handler(request)
            except (NotLeaderError, ProposalLostError):
                leader = self.leader_address()
                return RemotingCommand.response_to(
                    request,
                    ResponseCode.CONTROLLER_NOT_LEADER,
                    "The controller is not in leader state",
                    ext_fields={"leaderAddress": leader} if leader else None,
                )
            except BadRequest as exc:
                return RemotingCommand.response_to(
                    request, ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)
                )

        return handle

    async def _answer(
        self, request: RemotingCommand, decide: Callable[[], Decision]
    ) -> RemotingCommand:
        decision = await self._decide(decide)
        fields, body = decision.answer() if decision.answer is not None else ({}, b"")
        return RemotingCommand.response_to(
            request, decision.code, decision.remark, ext_fields=fields, body=body
        )

    def _live(self, group: str, broker_id: int) -> LiveBroker | None:
        return self.live.get(group, broker_id)

    # -- handlers --------------------------------------------------------------------------------
    async def _next_broker_id(self, request: RemotingCommand) -> RemotingCommand:
        cluster, name = _field(request, "clusterName"), _field(request, "brokerName")
        return await self._answer(request, lambda: next_broker_id(self.replicas, cluster, name))

    async def _apply_broker_id(self, request: RemotingCommand) -> RemotingCommand:
        cluster, name = _field(request, "clusterName"), _field(request, "brokerName")
        broker_id = _int_field(request, "appliedBrokerId")
        code = _field(request, "registerCheckCode")
        return await self._answer(
            request, lambda: apply_broker_id(self.replicas, cluster, name, broker_id, code)
        )

    async def _register_broker(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "brokerName")
        broker_id = _int_field(request, "brokerId")
        address = _field(request, "brokerAddress")
        alive = lambda broker_id: self.live.alive(name, broker_id)  # noqa: E731
        return await self._answer(
            request, lambda: register_broker(self.replicas, name, broker_id, address, alive)
        )

    async def _get_replica_info(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "brokerName")
        await self._decide(Decision)  # a read: everything committed before it is applied
        group = self.replicas.groups.get(name)
        if group is None:
            return RemotingCommand.response_to(
                request,
                ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                "Broker metadata is not existed",
            )
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields=master_fields(group),
            body=sync_state_set_body(group),
        )  # fmt: skip

    async def _elect_master(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "brokerName")
        designate = request.ext_fields.get("designateElect", "false").lower() == "true"
        broker_id = _int_field(request, "brokerId", -1)
        chosen = broker_id if broker_id >= 0 else None
        response = await self._answer(
            request,
            lambda: elect_master(
                self.replicas,
                name,
                self._live,
                unclean=self.config.enable_elect_unclean_master,
                designated=chosen if designate else None,
                requester=None if designate else chosen,
            ),
        )
        if response.code == ResponseCode.SUCCESS:
            self._count_election(name, "new_master_elected")
            self._master_changed(name, "electMaster request")
        return response

    def _count_election(self, name: str, result: str) -> None:
        key = (name, result)
        self.election_results[key] = self.election_results.get(key, 0) + 1

    async def _alter_sync_state_set(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "brokerName")
        master_id = _int_field(request, "masterBrokerId")
        master_epoch = _int_field(request, "masterEpoch")
        try:
            body = json.loads(request.body or b"{}")
            new_set = {int(i) for i in body["syncStateSet"]}
            set_epoch = int(body["syncStateSetEpoch"])
        except (ValueError, KeyError, TypeError):
            raise BadRequest("the body is not a SyncStateSet") from None
        return await self._answer(
            request,
            lambda: alter_sync_state_set(
                self.replicas,
                name,
                master_id,
                master_epoch,
                new_set,
                set_epoch,
                self.live.alive,
                qos=self.config.qos_of(name),
            ),
        )

    async def _get_sync_state_data(self, request: RemotingCommand) -> RemotingCommand:
        try:
            names = json.loads(request.body or b"[]")
        except ValueError:
            raise BadRequest("the body is not a JSON list of broker names") from None
        await self._decide(Decision)
        body = self.sync_state_data([str(n) for n in names])
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    def sync_state_data(self, names: list[str]) -> bytes:
        """`BrokerReplicasInfo`: each group's master, in-sync and out-of-sync replicas."""
        table = {}
        for name in names:
            group = self.replicas.groups.get(name)
            if group is None:
                continue

            def member(broker_id: int, address: str, name: str = name) -> dict[str, object]:
                return {
                    "alive": self.live.alive(name, broker_id),
                    "brokerAddress": address,
                    "brokerId": broker_id,
                    "brokerName": name,
                }

            entry: dict[str, object] = {}
            if group.master_id is not None:
                entry["masterAddress"] = group.master_address
                entry["masterBrokerId"] = group.master_id
            master = self.live.get(name, group.master_id) if group.master_id else None
            table[name] = {
                **entry,
                # pocketmq's: the group's QoS level and its master's replication state.
                "haQos": self.config.qos_of(name).value,
                "haState": master.ha_state if master is not None else "",
                "masterEpoch": group.master_epoch,
                "syncStateSetEpoch": group.sync_state_set_epoch,
                "inSyncReplicas": [
                    member(i, r.address)
                    for i, r in sorted(group.replicas.items())
                    if i in group.sync_state_set
                ],
                "notInSyncReplicas": [
                    member(i, r.address)
                    for i, r in sorted(group.replicas.items())
                    if i not in group.sync_state_set
                ],
            }
        return json.dumps({"replicasInfoTable": table}, separators=(",", ":")).encode()

    async def _clean_broker_data(self, request: RemotingCommand) -> RemotingCommand:
        name = _field(request, "brokerName")
        raw = request.ext_fields.get("brokerControllerIdsToClean", "")
        try:
            ids = [int(part) for part in raw.split(";") if part.strip()] or None
        except ValueError:
            raise BadRequest(
                f"brokerControllerIdsToClean={raw!r} is not ids separated by ;"
            ) from None
        living = request.ext_fields.get("isCleanLivingBroker", "false").lower() == "true"
        response = await self._answer(
            request,
            lambda: clean_broker_data(
                self.replicas, name, ids, clean_living=living, alive=self.live.alive
            ),
        )
        if response.code == ResponseCode.SUCCESS:
            self.live.forget(name, ids)
        return response

    async def _heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """BROKER_HEARTBEAT, oneway from RocketMQ's brokers; answered when asked."""
        try:
            broker = LiveBroker(
                cluster=request.ext_fields.get("clusterName", ""),
                group=_field(request, "brokerName"),
                broker_id=_int_field(request, "brokerId"),
                address=request.ext_fields.get("brokerAddr", ""),
                last_ms=self.clock.now_ms(),
                timeout_ms=_int_field(
                    request, "heartbeatTimeoutMills", DEFAULT_HEARTBEAT_TIMEOUT_MS
                ),
                epoch=_int_field(request, "epoch", 0),
                max_offset=_int_field(request, "maxOffset", 0),
                confirm_offset=_int_field(request, "confirmOffset", 0),
                priority=_int_field(request, "electionPriority", 0),
                channel=channel,
                ha_state=request.ext_fields.get("haState", ""),
            )
        except BadRequest as exc:
            return RemotingCommand.response_to(
                request, ResponseCode.CONTROLLER_INVALID_REQUEST, str(exc)
            )
        self.live.heartbeat(broker)
        # pocketmq's addition: the group's master epoch as this replica knows it, so that a
        # master that was cut off learns at its first heartbeat that it has been replaced.
        group = self.replicas.groups.get(broker.group)
        fields = {"haQos": self.config.qos_of(broker.group).value}
        if group is not None:
            fields["masterEpoch"] = str(group.master_epoch)
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, "Heart beat success", ext_fields=fields
        )

    async def _metadata(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        raft = self.node.raft
        leader_name = next((n for i, n in enumerate(self.peers, start=1) if i == raft.leader), "")
        fields = {
            "group": self.config.group,
            "isLeader": str(self.is_leader).lower(),
            "peers": "".join(f"{n}:{a};" for n, a in self.peers.items()),
        }
        if leader_name:
            fields["controllerLeaderId"] = leader_name
            fields["controllerLeaderAddress"] = self.leader_address() or ""
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, ext_fields=fields)

    # -- failover --------------------------------------------------------------------------------
    async def _scan(self) -> None:
        interval = self.config.scan_not_active_broker_interval_ms / 1000
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._scan_now.wait()
            self._scan_now.clear()
            if not self.is_leader:
                continue
            try:
                await self.scan_once()
            except (NotLeaderError, ProposalLostError):
                continue

    async def scan_once(self) -> None:
        """Elects a new master for every group whose master this replica heard from and now
        hears no more."""
        for name, group in list(self.replicas.groups.items()):
            master = group.master_id
            if master is None or not self.live.known(name, master) or self.live.alive(name, master):
                continue
            decision = await self._decide(
                lambda name=name: elect_master(  # type: ignore[misc]
                    self.replicas,
                    name,
                    self._live,
                    unclean=self.config.enable_elect_unclean_master,
                    designated=None,
                )
            )
            group_now = self.replicas.groups.get(name)
            if group_now is None or group_now.master_id == master:
                continue
            self.elections += 1
            self._count_election(
                name, "no_master_elected" if group_now.master_id is None else "new_master_elected"
            )
            if group_now.master_id is None:
                log.warning("master %d of %s is gone and no replica may replace it: %s",
                            master, name, decision.remark)  # fmt: skip
            else:
                log.info(
                    "master %d of %s is gone; elected broker %d (%s) in epoch %d", master,
                    name, group_now.master_id, group_now.master_address,
                    group_now.master_epoch,
                )  # fmt: skip
            self._master_changed(name, "failover")

    def _master_changed(self, name: str, why: str) -> None:
        """Tells every replica of the group (NOTIFY_BROKER_ROLE_CHANGED) instead of letting
        them find out at their next poll."""
        group = self.replicas.groups.get(name)
        if group is None or not self.config.notify_broker_role_changed:
            return
        fields = {
            "masterAddress": group.master_address,
            "masterEpoch": str(group.master_epoch),
            "syncStateSetEpoch": str(group.sync_state_set_epoch),
            "masterBrokerId": str(group.master_id if group.master_id is not None else -1),
        }
        body = sync_state_set_body(group)
        for broker_id, replica in group.replicas.items():
            if replica.address and self.live.alive(name, broker_id):
                request = RemotingCommand.request(
                    RequestCode.NOTIFY_BROKER_ROLE_CHANGED, fields, body
                )
                task = asyncio.get_running_loop().create_task(
                    self._notify(replica.address, request, why)
                )
                self._tasks.append(task)
                task.add_done_callback(self._tasks.remove)

    async def _notify(self, address: str, request: RemotingCommand, why: str) -> None:
        try:
            await self.client.invoke(address, request, _NOTIFY_TIMEOUT_S)
        except (RemotingError, OSError) as exc:
            log.info("could not tell broker %s of the role change (%s): %s", address, why, exc)
