"""The asyncio transport of the remoting protocol: a server and a client of `Channel`s.

`RemotingServer` routes request codes to handlers (an unknown code gets
REQUEST_CODE_NOT_SUPPORTED, a handler that raises gets SYSTEM_ERROR with the error text); a
malformed or oversized frame closes only that connection, with one log line saying why.
`RemotingClient` keeps one channel per address, reconnects on demand, and closes idle ones.
Each connection is a `pocketmq.remoting.channel.Channel`; its names are exported here too, as
the remoting API's one place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Final

from pocketmq.remoting.channel import (
    MAX_IN_FLIGHT_DEFAULT,
    Channel,
    ChannelClosedError,
    RemotingTimeoutError,
    RequestGuard,
    RequestHandler,
    RequestObserver,
)
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.dial import dial
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.frame import FRAME_BYTES_MAX_DEFAULT
from pocketmq.remoting.tls import Listener, TlsMode
from pocketmq.remoting.tls import client_context as process_client_context
from pocketmq.runtime.event_loop import cancel_and_wait

__all__ = [
    "MAX_IN_FLIGHT_DEFAULT",
    "READ_CHUNK_BYTES",
    "Channel",
    "ChannelClosedError",
    "RemotingClient",
    "RemotingConnectError",
    "RemotingServer",
    "RemotingTimeoutError",
    "RequestGuard",
    "RequestHandler",
    "RequestObserver",
]

log = logging.getLogger(__name__)

READ_CHUNK_BYTES: Final = 256 * 1024
"""The stream's buffer limit on a client connection, until its channel takes the transport."""


class RemotingConnectError(RemotingError):
    """The connection to an address could not be opened."""


class RemotingServer:
    """Accepts connections and routes their requests by code."""

    def __init__(
        self,
        handlers: Mapping[int, RequestHandler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT,
        ssl_context: ssl.SSLContext | None = None,
        idle_timeout_s: float = 120.0,
        max_in_flight: int = MAX_IN_FLIGHT_DEFAULT,
    ) -> None:
        """`max_in_flight`: requests handled at once on one connection; past it the
        connection is not read until one ends."""
        self.handlers = dict(handlers)
        self.guard: RequestGuard | None = None
        self.observe: RequestObserver | None = None
        self.eager: frozenset[int] = frozenset()
        """Request codes whose handlers start as their request is decoded (`Channel`)."""
        self.host = host
        self.port = port
        self._frame_bytes_max = frame_bytes_max
        self._ssl = ssl_context
        self._idle_timeout_s = idle_timeout_s
        self._max_in_flight = max_in_flight
        self._listener: Listener | None = None
        self.channels: set[Channel] = set()
        self.on_channel_closed: list[Callable[[Channel], None]] = []
        self._housekeeping: asyncio.Task[None] | None = None

    async def start(self, *, serve: bool = True) -> int:
        """Binds the port; returns it (useful with port 0).

        With `serve=False` connections wait in the backlog until `serve()`: a server that
        must know its port before it can answer (a broker writes it into every message) binds
        first and serves once ready.
        """
        if self._ssl is not None:
            self._listener = Listener(self._accept, TlsMode.ENFORCING, self._ssl)
        else:
            self._listener = Listener.for_process(self._accept)
        self.port = await self._listener.start(self.host, self.port, serve=serve)
        self._housekeeping = asyncio.get_running_loop().create_task(self._close_idle())
        if serve:
            self._log_listening()
        return self.port

    async def serve(self) -> None:
        """Starts accepting connections after `start(serve=False)`."""
        assert self._listener is not None, "start() first"
        await self._listener.serve()
        self._log_listening()

    def _log_listening(self) -> None:
        assert self._listener is not None
        log.info(
            "remoting server listening on %s:%d (tls %s)",
            self.host,
            self.port,
            self._listener.mode.value,
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        channel = Channel(
            reader,
            writer,
            self.handlers,
            frame_bytes_max=self._frame_bytes_max,
            max_in_flight=self._max_in_flight,
            eager=self.eager,
        )
        channel.guard = self.guard
        channel.observe = self.observe
        self.channels.add(channel)
        channel.on_close.append(self._forget)
        log.debug("connection from %s", channel.remote_address)
        channel.start()

    def _forget(self, channel: Channel) -> None:
        self.channels.discard(channel)
        for callback in self.on_channel_closed:
            callback(channel)

    async def _close_idle(self) -> None:
        while True:
            await asyncio.sleep(min(self._idle_timeout_s / 4, 10))
            now = time.monotonic()
            for channel in list(self.channels):
                if now - channel.last_active > self._idle_timeout_s:
                    log.info("closing idle connection from %s", channel.remote_address)
                    channel.close_reason = "idle"
                    await channel.close()

    async def stop(self, grace_s: float = 3.0) -> None:
        """Stops accepting, lets in-flight requests finish for `grace_s`, closes the rest."""
        if self._listener is None:
            return
        self._listener.close()
        if self._housekeeping is not None:
            self._housekeeping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._housekeeping
        await asyncio.gather(*(c.close(grace_s) for c in list(self.channels)))
        await self._listener.wait_closed()
        self._listener = None
        log.info("remoting server on port %d stopped", self.port)


class RemotingClient:
    """Requests to many addresses over one channel per address."""

    def __init__(
        self,
        handlers: Mapping[int, RequestHandler] | None = None,
        *,
        connect_timeout_s: float = 3.0,
        frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT,
        idle_timeout_s: float = 120.0,
        ssl_context: ssl.SSLContext | None = None,
        before_request: Callable[[RemotingCommand], None] | None = None,
    ) -> None:
        """`ssl_context` None follows the process's `tls.enable`; `before_request` sees every
        request just before it is sent (the ACL signature is added there)."""
        self.handlers = dict(handlers or {})
        self.before_request = before_request
        self._connect_timeout_s = connect_timeout_s
        self._frame_bytes_max = frame_bytes_max
        self._idle_timeout_s = idle_timeout_s
        self._ssl = ssl_context
        self._channels: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Lock] = {}
        self._housekeeping: asyncio.Task[None] | None = None

    async def channel(self, address: str) -> Channel:
        """The open channel to `address` ("host:port"), connecting if needed.

        Raises:
            RemotingConnectError: the address is malformed or does not accept connections.
        """
        channel = self._channels.get(address)
        if channel is not None and not channel.is_closed:
            return channel
        lock = self._connecting.setdefault(address, asyncio.Lock())
        async with lock:
            channel = self._channels.get(address)
            if channel is not None and not channel.is_closed:
                return channel
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise RemotingConnectError(f"bad address {address!r}: expected host:port")
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    context = self._ssl or process_client_context()
                    reader, writer = await dial(
                        host.strip("[]"), int(port), ssl_context=context, limit=READ_CHUNK_BYTES
                    )
            except (OSError, TimeoutError) as exc:
                raise RemotingConnectError(f"cannot connect to {address}: {exc}") from exc
            channel = Channel(reader, writer, self.handlers, frame_bytes_max=self._frame_bytes_max)
            channel.start()
            self._channels[address] = channel
            if self._housekeeping is None:
                self._housekeeping = asyncio.get_running_loop().create_task(
                    self._close_idle_periodically()
                )
            return channel

    async def _close_idle_periodically(self) -> None:
        while True:
            await asyncio.sleep(min(self._idle_timeout_s / 4, 30))
            await self.close_idle()

    async def invoke(
        self, address: str, request: RemotingCommand, timeout_s: float = 3.0
    ) -> RemotingCommand:
        """Sends `request` to `address` and waits for the response (see `Channel.invoke`)."""
        channel = await self.channel(address)
        if self.before_request is not None:
            self.before_request(request)
        return await channel.invoke(request, timeout_s)

    async def invoke_oneway(self, address: str, request: RemotingCommand) -> None:
        channel = await self.channel(address)
        if self.before_request is not None:
            self.before_request(request)
        await channel.invoke_oneway(request)

    async def close_idle(self) -> int:
        """Closes channels without traffic for `idle_timeout_s`; returns how many."""
        now = time.monotonic()
        idle = [
            (address, channel)
            for address, channel in self._channels.items()
            if channel.is_closed or now - channel.last_active > self._idle_timeout_s
        ]
        for address, channel in idle:
            del self._channels[address]
            await channel.close()
        return len(idle)

    async def close(self) -> None:
        if self._housekeeping is not None:
            await cancel_and_wait(self._housekeeping)
            self._housekeeping = None
        channels = list(self._channels.values())
        self._channels.clear()
        await asyncio.gather(*(c.close() for c in channels))
