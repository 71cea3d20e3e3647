"""A connection that reaches its own socket (loopback, nothing listening, the kernel choosing
the target port as the local one) is refused, not used, and leaves the port free."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from pocketmq.remoting.transport import RemotingClient, RemotingConnectError
from pocketmq.testing import free_port


def connected_to_itself(port: int) -> socket.socket:
    """What the kernel rarely does by chance, done on purpose: local port = target port."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.connect(("127.0.0.1", port))
    assert sock.getsockname() == sock.getpeername()
    return sock


def test_a_connection_to_itself_is_refused_and_frees_its_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = free_port()
    real = asyncio.open_connection

    async def by_chance(host: str, target: int, **kwargs: Any) -> Any:
        assert target == port
        kwargs.pop("ssl", None)
        return await real(sock=connected_to_itself(port), **kwargs)

    monkeypatch.setattr(asyncio, "open_connection", by_chance)

    async def connect() -> None:
        client = RemotingClient({})
        try:
            with pytest.raises(RemotingConnectError, match="connected to itself"):
                await client.channel(f"127.0.0.1:{port}")
        finally:
            await client.close()

    asyncio.run(connect())
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
