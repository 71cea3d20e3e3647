"""Opening a TCP connection to a peer, refusing the one that reaches itself.

Connecting on loopback to a port in the kernel's ephemeral range where nothing listens can
succeed: the kernel may choose that very port as the local end, and the socket then connects
to itself (a TCP simultaneous open). A Raft peer or a slave that retries against a stopped peer
would then talk to itself, and the port stays taken, so the peer cannot bind it when it comes
back. Such a connection is closed at once and reported as refused, as it would have been.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

_DEFAULT_LIMIT = 2**16


async def dial(
    host: str, port: int, *, ssl_context: ssl.SSLContext | None = None, limit: int = _DEFAULT_LIMIT
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """`asyncio.open_connection`, except that a connection to itself raises.

    Raises:
        ConnectionRefusedError: the connection reached its own socket (nothing listens there).
        OSError, ssl.SSLError: as `asyncio.open_connection`.
    """
    reader, writer = await asyncio.open_connection(host, port, ssl=ssl_context, limit=limit)
    local, remote = writer.get_extra_info("sockname"), writer.get_extra_info("peername")
    if local is not None and remote is not None and local[:2] == remote[:2]:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        raise ConnectionRefusedError(f"nothing listens on {host}:{port} (connected to itself)")
    return reader, writer
