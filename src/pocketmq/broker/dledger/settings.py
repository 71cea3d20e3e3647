"""A DLedger group as RocketMQ's `broker.conf` describes it: `dLegerGroup`, `dLegerPeers`
(`n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913`), `dLegerSelfId`, and
`preferredLeaderId`, read into the Raft node's settings.

Peer names become Raft ids in the order `dLegerPeers` lists them (1, 2, 3 ...). The broker id
a replica registers with follows RocketMQ's DLedger mode: 0 while it leads, else its peer
number plus one (`n0` is 1, `n1` is 2).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pocketmq.broker.config import BrokerConfig
from pocketmq.raft.core import RaftConfig
from pocketmq.raft.node import NodeSettings
from pocketmq.raft.peers import PeerListError, check_member, parse_peers, raft_ids

_NUMBERED = re.compile(r"^[A-Za-z]+(\d+)$")


class DLedgerConfigError(ValueError):
    """A DLedger setting that cannot work; the message names the key and what to write."""


@dataclass(frozen=True, slots=True)
class DLedgerSettings:
    group: str
    peers: dict[str, str]
    """Peer name -> host:port of its DLedger (Raft) port, in `dLegerPeers` order."""
    self_id: str
    preferred_leader: str
    heartbeat_ms: int
    election_timeout_ms: int
    snapshot_every: int = 10_000

    @classmethod
    def from_config(cls, config: BrokerConfig) -> DLedgerSettings:
        """Raises `DLedgerConfigError` for a missing or malformed key."""
        if not config.dleger_peers.strip():
            raise DLedgerConfigError(
                "enableDLegerCommitLog=true needs dLegerPeers, e.g. "
                "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
            )
        try:
            peers = parse_peers(config.dleger_peers, "dLegerPeers")
            self_id = check_member(peers, config.dleger_self_id, "dLegerSelfId", "dLegerPeers")
        except PeerListError as exc:
            raise DLedgerConfigError(str(exc)) from None
        preferred = config.preferred_leader_id.strip()
        if preferred and preferred not in peers:
            raise DLedgerConfigError(
                f"preferredLeaderId={preferred!r} is not one of the dLegerPeers "
                f"({', '.join(peers)})"
            )
        if config.dleger_election_timeout_ms < 3 * config.dleger_heartbeat_interval_ms:
            raise DLedgerConfigError(
                f"dLegerElectionTimeoutMs={config.dleger_election_timeout_ms} must be at least "
                "three heartbeats (dLegerHeartBeatIntervalMs="
                f"{config.dleger_heartbeat_interval_ms})"
            )
        return cls(
            group=config.dleger_group or config.broker_name,
            peers=peers,
            self_id=self_id,
            preferred_leader=preferred,
            heartbeat_ms=config.dleger_heartbeat_interval_ms,
            election_timeout_ms=config.dleger_election_timeout_ms,
            snapshot_every=config.dleger_snapshot_every_entries,
        )

    def raft_id(self, name: str) -> int:
        return list(self.peers).index(name) + 1

    def name_of(self, raft_id: int) -> str | None:
        names = list(self.peers)
        return names[raft_id - 1] if 0 < raft_id <= len(names) else None

    @property
    def follower_broker_id(self) -> int:
        """The broker id this replica registers with while it follows."""
        numbered = _NUMBERED.match(self.self_id)
        if numbered is not None:
            return int(numbered.group(1)) + 1
        return self.raft_id(self.self_id)

    def node_settings(self, store_root: Path, *, fsync: bool) -> NodeSettings:
        tick = self.heartbeat_ms
        return NodeSettings(
            node_id=self.raft_id(self.self_id),
            peers=raft_ids(self.peers),
            directory=store_root / f"dledger-{self.self_id}",
            tick_ms=tick,
            raft=RaftConfig(election_ticks=max(3, self.election_timeout_ms // tick)),
            fsync=fsync,
            snapshot_every=self.snapshot_every,
            compact_behind_followers=True,
        )
