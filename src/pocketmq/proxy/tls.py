"""TLS on the proxy's gRPC port, as RocketMQ's `tls.server.mode` has it:

- `disabled`: plaintext only;
- `enforcing`: TLS only;
- `permissive` (RocketMQ's default): both on the same port, told apart by the first byte a
  client sends (a TLS ClientHello starts with 0x16). grpcio serves one kind per port, so the
  public port is a small splice in front of two loopback ports, one of each kind: it reads that
  byte, connects to the matching port and copies bytes both ways, never decrypting.

The certificate is `tls.server.certPath` / `tls.server.keyPath`, or with `tls.test.mode.enable`
(RocketMQ's default) a throwaway self-signed one made at start. Some 5.x clients (Go's) always
dial with TLS and do not check the certificate; the others dial in plaintext unless told.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import grpc

from pocketmq.remoting.tls import (
    TLS_RECORD_HANDSHAKE,
    TlsConfigError,
    TlsMode,
    throwaway_certificate,
)

log = logging.getLogger(__name__)

FIRST_BYTE_TIMEOUT_S: Final = 30.0
CHUNK: Final = 256 * 1024


@dataclass(frozen=True, slots=True)
class TlsSettings:
    mode: TlsMode = TlsMode.PERMISSIVE
    cert_path: str = ""
    key_path: str = ""
    test_mode: bool = True

    def credentials(self) -> grpc.ServerCredentials:
        """The server credentials: the configured certificate, else a throwaway one.

        Raises:
            TlsConfigError: no certificate configured and test mode off, or unreadable files.
        """
        if self.cert_path and self.key_path:
            try:
                key, cert = Path(self.key_path).read_bytes(), Path(self.cert_path).read_bytes()
            except OSError as exc:
                raise TlsConfigError(f"cannot read the proxy's certificate or key: {exc}") from None
        elif self.test_mode:
            key, cert = throwaway_certificate()
        else:
            raise TlsConfigError(
                "tls.server.mode needs tls.server.certPath and tls.server.keyPath, or "
                "tls.test.mode.enable=true"
            )
        return grpc.ssl_server_credentials([(key, cert)])


class PermissiveFront:
    """The public port of permissive mode: sends each connection to the plaintext or the TLS
    loopback port by its first byte."""

    def __init__(self, plain_port: int, tls_port: int) -> None:
        self.plain_port = plain_port
        self.tls_port = tls_port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listens; returns the port. Raises OSError when it cannot bind."""
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        bound: int = self._server.sockets[0].getsockname()[1]
        return bound

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._splice(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError) as exc:
            log.debug("proxy connection ended: %s", exc)
        finally:
            self._connections.discard(task)
            writer.close()

    async def _splice(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await asyncio.wait_for(reader.readexactly(1), FIRST_BYTE_TIMEOUT_S)
        port = self.tls_port if first[0] == TLS_RECORD_HANDSHAKE else self.plain_port
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        for stream in (writer, upstream_writer):
            sock = stream.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream_writer.write(first)
        try:
            await asyncio.gather(_pump(reader, upstream_writer), _pump(upstream_reader, writer))
        finally:
            upstream_writer.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()
