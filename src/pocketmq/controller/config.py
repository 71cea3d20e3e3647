"""The controller's settings under RocketMQ's `ControllerConfig` key names, and the Raft group
they describe.

RocketMQ serves a controller's requests on its DLedger peer address (the port in
`controllerDLegerPeers` for `controllerDLegerSelfId`); pocketmq does the same, and also listens
on `listenPort` when the file sets one that differs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pocketmq.common.config import key
from pocketmq.common.ha_qos import Qos, QosError, parse_group_qos, parse_qos
from pocketmq.raft.core import RaftConfig
from pocketmq.raft.node import NodeSettings
from pocketmq.raft.peers import PeerListError, check_member, parse_peers, raft_ids


class ControllerConfigError(ValueError):
    """A controller setting that cannot work; the message names the key and the fix."""


@dataclass
class ControllerConfig:
    """Settings of one controller replica; defaults are RocketMQ's unless noted."""

    listen_port: int = key("listenPort", 0)
    controller_dleger_group: str = key("controllerDLegerGroup", "")
    controller_dleger_peers: str = key("controllerDLegerPeers", "")
    controller_dleger_self_id: str = key("controllerDLegerSelfId", "")
    controller_store_path: str = key("controllerStorePath", "")
    # How often the leader looks for brokers whose heartbeats stopped.
    scan_not_active_broker_interval_ms: int = key("scanNotActiveBrokerInterval", 5_000, minimum=10)
    enable_elect_unclean_master: bool = key("enableElectUncleanMaster", False)
    notify_broker_role_changed: bool = key("notifyBrokerRoleChanged", True)
    elect_master_max_retry_count: int = key("electMasterMaxRetryCount", 3, minimum=1)
    # pocketmq's: each group's replication QoS (`pocketmq.common.ha_qos`): AVAILABILITY or
    # NO_LOSS, by brokerName (`broker-a:NO_LOSS;broker-b:AVAILABILITY`), else the default.
    default_broker_group_qos: str = key("defaultBrokerGroupQos", "AVAILABILITY")
    broker_group_qos: str = key("brokerGroupQos", "")
    # pocketmq's own: the controllers' Raft timing, as the broker's dLeger keys.
    controller_dleger_heartbeat_interval_ms: int = key(
        "controllerDLegerHeartBeatIntervalMs", 100, minimum=10
    )
    controller_dleger_election_timeout_ms: int = key(
        "controllerDLegerElectionTimeoutMs", 800, minimum=50
    )
    controller_snapshot_every_entries: int = key(
        "controllerSnapshotEveryEntries", 10_000, minimum=1
    )

    def peers(self) -> dict[str, str]:
        """Peer name -> address, in list order.

        Raises:
            ControllerConfigError: a missing or malformed list, or a self id not in it.
        """
        if not self.controller_dleger_peers.strip():
            raise ControllerConfigError(
                "a controller needs controllerDLegerPeers and controllerDLegerSelfId, e.g. "
                "controllerDLegerPeers=n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858 "
                "and controllerDLegerSelfId=n0"
            )
        try:
            peers = parse_peers(self.controller_dleger_peers, "controllerDLegerPeers")
            check_member(
                peers, self.controller_dleger_self_id, "controllerDLegerSelfId",
                "controllerDLegerPeers",
            )  # fmt: skip
        except PeerListError as exc:
            raise ControllerConfigError(str(exc)) from None
        return peers

    def qos_of(self, group: str) -> Qos:
        """The QoS level of broker group `group`.

        Raises:
            ControllerConfigError: a level or list that cannot be read.
        """
        try:
            levels = parse_group_qos(self.broker_group_qos, "brokerGroupQos")
            return levels.get(group) or parse_qos(
                self.default_broker_group_qos, "defaultBrokerGroupQos"
            )
        except QosError as exc:
            raise ControllerConfigError(str(exc)) from None

    @property
    def self_id(self) -> str:
        return self.controller_dleger_self_id.strip()

    @property
    def group(self) -> str:
        return self.controller_dleger_group or "DefaultControllerGroup"

    def store_path(self) -> Path:
        """`controllerStorePath`, by default `DledgerController` in the home directory (as
        RocketMQ's)."""
        if self.controller_store_path:
            return Path(self.controller_store_path)
        return Path(os.path.expanduser("~")) / "DledgerController"

    def node_settings(self) -> NodeSettings:
        """The Raft node this replica runs.

        Raises:
            ControllerConfigError: see `peers`, or an election timeout under three heartbeats.
        """
        peers = self.peers()
        self.qos_of("")  # a bad QoS setting stops the controller at start, saying why
        tick = self.controller_dleger_heartbeat_interval_ms
        if self.controller_dleger_election_timeout_ms < 3 * tick:
            raise ControllerConfigError(
                "controllerDLegerElectionTimeoutMs="
                f"{self.controller_dleger_election_timeout_ms} must be at least three "
                f"heartbeats (controllerDLegerHeartBeatIntervalMs={tick})"
            )
        return NodeSettings(
            node_id=list(peers).index(self.self_id) + 1,
            peers=raft_ids(peers),
            directory=self.store_path() / self.self_id,
            tick_ms=tick,
            raft=RaftConfig(
                election_ticks=max(3, self.controller_dleger_election_timeout_ms // tick)
            ),
            snapshot_every=self.controller_snapshot_every_entries,
        )
