"""Peer lists as RocketMQ writes them for its Raft groups (`dLegerPeers`,
`controllerDLegerPeers`): `n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913`.

Names become Raft ids in the order the list gives them (1, 2, 3 ...), so every replica that
reads the same list agrees on them.
"""

from __future__ import annotations

import re
from typing import Final

_PEER: Final = re.compile(r"^([A-Za-z0-9_]+)-(\S+):(\d{1,5})$")


class PeerListError(ValueError):
    """A peer list or self id that cannot work; the message names the key and the fix."""


def parse_peers(text: str, key: str) -> dict[str, str]:
    """Peer name -> `host:port`, in the list's order.

    Raises:
        PeerListError: an empty list, a malformed part, or a name given twice.
    """
    peers: dict[str, str] = {}
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        matched = _PEER.match(part)
        if matched is None or not 0 < int(matched.group(3)) < 65536:
            raise PeerListError(
                f"{key}: {part!r} is not <id>-<host>:<port> (as n0-127.0.0.1:40911)"
            )
        name = matched.group(1)
        if name in peers:
            raise PeerListError(f"{key} names {name} twice")
        peers[name] = f"{matched.group(2)}:{matched.group(3)}"
    if not peers:
        raise PeerListError(
            f"{key} is empty; list the group's replicas, e.g. "
            f"{key}=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913"
        )
    return peers


def check_member(peers: dict[str, str], name: str, key: str, peers_key: str) -> str:
    """`name`, stripped, if it is one of `peers`.

    Raises:
        PeerListError: it is not.
    """
    name = name.strip()
    if name not in peers:
        raise PeerListError(f"{key}={name!r} is not one of the {peers_key} ({', '.join(peers)})")
    return name


def raft_ids(peers: dict[str, str]) -> dict[int, str]:
    """Raft id -> address, ids numbered from 1 in list order."""
    return {number: address for number, address in enumerate(peers.values(), start=1)}
