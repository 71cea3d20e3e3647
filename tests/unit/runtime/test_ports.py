"""The ports handed to servers before they start (`pocketmq up --dledger`'s Raft ports, and the
servers tests start): free, outside the kernel's range for the local ports of outgoing
connections (which another process could take before the server binds), and never handed out
twice."""

from __future__ import annotations

import socket

import pytest

from pocketmq.runtime import ports
from pocketmq.runtime.ports import ephemeral_range
from pocketmq.testing import free_port, free_port_pair


def test_ports_are_free_below_the_ephemeral_range_and_never_repeat() -> None:
    low, _ = ephemeral_range()
    pairs = [free_port_pair() for _ in range(50)]
    singles = [free_port() for _ in range(50)]
    handed = [*pairs, *(p + 1 for p in pairs), *singles]
    assert len(set(handed)) == len(handed)
    assert all(port < low for port in handed)
    for port in handed:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))


def test_a_port_in_use_or_whose_neighbour_is_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        held = holder.getsockname()[1]
        spare = free_port()
        offers = iter([held, held - 1, spare + 1])
        monkeypatch.setattr(ports._choose, "randint", lambda _a, _b: next(offers))
        assert free_port_pair() == spare + 1
