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

_PEER = re.compile(r"^([A-Za-z0-9_]+)-(\S+):(\d{1,5})$")
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
        peers: dict[str, str] = {}
        for part in config.dleger_peers.split(";"):
            part = part.strip()
            if not part:
                continue
            matched = _PEER.match(part)
            if matched is None or not 0 < int(matched.group(3)) < 65536:
                raise DLedgerConfigError(
                    f"dLegerPeers: {part!r} is not <id>-<host>:<port> (as n0-127.0.0.1:40911)"
                )
            name = matched.group(1)
            if name in peers:
                raise DLedgerConfigError(f"dLegerPeers names {name} twice")
            peers[name] = f"{matched.group(2)}:{matched.group(3)}"
        self_id = config.dleger_self_id.strip()
        if self_id not in peers:
            raise DLedgerConfigError(
                f"dLegerSelfId={self_id!r} is not one of the dLegerPeers ({', '.join(peers)})"
            )
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
            peers={self.raft_id(name): address for name, address in self.peers.items()},
            directory=store_root / f"dledger-{self.self_id}",
            tick_ms=tick,
            raft=RaftConfig(election_ticks=max(3, self.election_timeout_ms // tick)),
            fsync=fsync,
            snapshot_every=self.snapshot_every,
            compact_behind_followers=True,
        )
