"""Choosing free loopback ports for servers that are told their port before they start.

A port that is free now must stay free until its server binds it. One the kernel picks (a bind
to port 0) comes from its ephemeral range, from which it also takes the local port of every
outgoing connection of every process, so any connection made in the meantime may take it:
one that retries against the not yet listening port may even connect to itself. Ports below
that range are never given to connections, so the choice is made there, and a port is never
handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_LOWEST = 10000  # the ports below are left to services with fixed, well-known ports
_handed_out: set[int] = set()
_lock = threading.Lock()
_choose = random.Random()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections (Linux's default if it
    cannot be read)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port_run(width: int) -> int:
    """The first of `width` adjacent ports of 127.0.0.1 that bind now, outside the ephemeral
    range, none handed out before by this process.

    Raises:
        RuntimeError: no such run of ports found in 1,000 tries.
    """
    low, high = ephemeral_range()
    if low - width > _LOWEST:
        first, last = _LOWEST, low - width
    else:
        first, last = high + 1, 65535 - width
    with _lock:
        for _ in range(1000):
            port = _choose.randint(first, last)
            wanted = range(port, port + width)
            if _handed_out.intersection(wanted) or not all(map(_binds, wanted)):
                continue
            _handed_out.update(wanted)
            return port
    raise RuntimeError(f"no {width} adjacent free ports on 127.0.0.1 in {first}..{last}")


def _binds(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
