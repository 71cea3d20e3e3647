"""One remoting connection: a `Channel`, driven by the sans-IO `RemotingConnection`.

Connections are opened as asyncio streams (TLS included, by `transport`'s server and client);
once the first bytes arrive, the channel takes the transport's protocol over, so every later
chunk goes from the transport straight to the decoder: no stream buffer copies it twice and no
reader task wakes for it. Each request that arrives runs as its own task (so a long-polling
pull never blocks the other requests on its connection), or, for the codes the server names
`eager` (sends, pulls), starts at once as it is decoded and becomes a task only if it has to
wait; responses resolve the future of the request that asked. Both ends of a connection can
ask: brokers call their clients back on the same socket.

Backpressure: at most `max_in_flight` requests run per channel; past that the channel stops
reading, so TCP pushes back on the peer. Writes wait while the transport is past its
high-water mark. Writes made in one turn of the event loop are sent together at its end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, cast

from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.connection import (
    ConnectionClosed,
    RemotingConnection,
    RequestReceived,
    ResponseReceived,
)
from pocketmq.remoting.errors import RemoteProtocolError, RemotingError
from pocketmq.remoting.frame import FRAME_BYTES_MAX_DEFAULT
from pocketmq.runtime.event_loop import start_eagerly

log = logging.getLogger(__name__)

_EVERYTHING: Final = 1 << 62
"""A read size that takes whatever the stream holds."""
_BIG_READ: Final = 64 * 1024
"""A read at least this large says the peer has more queued: the connection reads no more in
this turn of the event loop. The loop would otherwise read a fast peer's whole backlog (many
batch requests) and handle all of it before answering any, so that the peer waits idle and
then sends in bursts; a read a turn keeps both sides busy."""
MAX_IN_FLIGHT_DEFAULT: Final = 4096

RequestHandler = Callable[[RemotingCommand, "Channel"], Awaitable[RemotingCommand | None]]
"""Answers one request; returns the response (None for oneway requests or no answer)."""

RequestGuard = Callable[[RemotingCommand, "Channel"], RemotingCommand | None]
"""Runs before the handler of a known code (the ACL check); a response it returns refuses the
request with it."""
RequestObserver = Callable[[int, int, float, bool, bool], None]
"""Told of each handled request: its code, the answer's code (-1: none was made), seconds
taken, whether it was oneway and whether it was held (long polling)."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout."""


class ChannelClosedError(RemotingError):
    """The connection closed before the response arrived, or was closed when used."""


_channel_ids = itertools.count(1)


class Channel:
    """One open remoting connection, client or server side."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handlers: Mapping[int, RequestHandler],
        *,
        frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT,
        max_in_flight: int = MAX_IN_FLIGHT_DEFAULT,
        eager: frozenset[int] = frozenset(),
    ) -> None:
        """`eager`: the request codes whose handlers start as their request is decoded (no task
        unless they wait); they must not need a current task before their first wait."""
        self.id = next(_channel_ids)
        self.guard: RequestGuard | None = None
        self.observe: RequestObserver | None = None
        self._reader = reader
        self._writer = writer
        # A stream's transport reads too: typed as a write transport only.
        self._transport = cast(asyncio.Transport, writer.transport)
        self._handlers = handlers
        self._connection = RemotingConnection(frame_bytes_max=frame_bytes_max)
        self._waiting: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._tasks: dict[asyncio.Task[None], bool] = {}  # handler task -> request is oneway
        self._max_in_flight = max_in_flight
        self._eager = eager
        self._eager_running = False  # an eager handler's first part runs (not in a task)
        self._wire: _Wire | None = None
        self._reading_paused = False
        self._read_this_turn = False  # a big read: the next waits for the next turn
        self._writable: asyncio.Future[None] | None = None  # set while the transport is full
        self._lost = asyncio.Event()
        self._closed = asyncio.Event()
        self._reader_task: asyncio.Task[None] | None = None
        peer = writer.get_extra_info("peername")
        self.remote_address = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.remote_ip: str = peer[0] if peer else ""
        local = writer.get_extra_info("sockname")
        self.local_ip: str = local[0] if local else "127.0.0.1"
        """The address this side of the connection uses (what a client reports as its ip)."""
        self.last_active = time.monotonic()
        self.close_reason = ""
        self.on_close: list[Callable[[Channel], None]] = []
        self._out: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None

    @property
    def is_closed(self) -> bool:
        return self._closed.is_set()

    def start(self) -> None:
        self._reader_task = asyncio.get_running_loop().create_task(
            self._first_read(), name=f"channel-{self.id}-{self.remote_address}"
        )

    async def wait_closed(self) -> None:
        await self._closed.wait()

    # -- sending ---------------------------------------------------------------------------
    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        """Sends `request` and waits for its response.

        Raises:
            RemotingTimeoutError: no response within `timeout_s` (the request is forgotten).
            ChannelClosedError: the connection is closed or closes while waiting.
        """
        if self.is_closed:
            raise ChannelClosedError(f"channel to {self.remote_address} is closed")
        data = self._connection.send_request(request)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[RemotingCommand] = loop.create_future()
        # With no other request waiting, none is likely to follow this turn: it leaves now.
        alone = not self._waiting
        self._waiting[request.opaque] = future
        try:
            await self._write(data, alone=alone)
            # A timer that fails the future, not `asyncio.timeout`: that one looks up the task
            # and runs a context manager on every request, a tenth of a sync send's client work.
            expiry = loop.call_later(timeout_s, self._expire, future, request.code, timeout_s)
            try:
                return await future
            finally:
                expiry.cancel()
        finally:
            self._waiting.pop(request.opaque, None)
            self._connection.forget(request.opaque)

    def _expire(self, future: asyncio.Future[RemotingCommand], code: int, timeout_s: float) -> None:
        if not future.done():
            future.set_exception(
                RemotingTimeoutError(
                    f"no response from {self.remote_address} to request code {code} "
                    f"within {timeout_s * 1000:.0f} ms"
                )
            )

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Sends a oneway request; nothing comes back."""
        if self.is_closed:
            raise ChannelClosedError(f"channel to {self.remote_address} is closed")
        request.flag |= 2
        await self._write(self._connection.send_request(request))

    async def send_response(self, response: RemotingCommand) -> None:
        if not self.is_closed:
            # The only request in flight here is answered at once: a client sending one at a
            # time waits a turn of the loop less, and its answer leaves before the work the
            # request left behind (dispatch of what it stored).
            if self._eager_running:  # alone if no task runs and no request follows in the read
                alone = not self._tasks and not self._connection.buffered_bytes
            else:
                alone = len(self._tasks) <= 1
            await self._write(self._connection.send_response(response), alone=alone)

    async def _write(self, data: bytes, *, alone: bool = False) -> None:
        """Queues `data`; everything queued in one turn of the event loop leaves in one write
        (one system call for the answers of many requests handled together), at the end of
        that turn. `alone`: nothing else is expected this turn, so with nothing queued it
        leaves now."""
        self.last_active = time.monotonic()
        transport = self._transport
        if transport.is_closing():
            raise ChannelClosedError(f"channel to {self.remote_address} is closed")
        if alone and self._flush_handle is None:  # nothing queued
            self._send([data])
        else:
            self._out.append(data)
            if self._flush_handle is None:
                self._flush_handle = asyncio.get_running_loop().call_soon(self._flush)
        if self._writable is not None:
            await asyncio.shield(self._writable)
        elif (
            self._wire is None  # the stream's protocol still keeps the flow control
            and transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]
        ):
            await self._writer.drain()

    def _flush(self) -> None:
        self._flush_handle = None
        out, self._out = self._out, []
        if out and not self._transport.is_closing():
            self._send(out)

    def _send(self, out: list[bytes]) -> None:
        try:
            if len(out) == 1:
                self._transport.write(out[0])
            else:
                self._transport.writelines(out)
        except RuntimeError as exc:
            # uvloop refuses a write to a transport that closed under us (the peer went away
            # since the check): the reader sees the close and fails whoever waits.
            log.debug("write to %s dropped: %s", self.remote_address, exc)

    # -- receiving -------------------------------------------------------------------------
    async def _first_read(self) -> None:
        """Waits for the first bytes on the stream, then takes the transport's protocol over
        (`_Wire`): what the stream held is handed on, and later bytes come straight here."""
        try:
            data = await self._reader.read(_EVERYTHING)
        except (ConnectionError, OSError) as exc:
            self._end(f"connection error: {exc}")
            return
        if self.is_closed:
            return
        if data:
            self._wire = _Wire(self)
            transport = self._transport
            transport.set_protocol(self._wire)
            if transport.get_write_buffer_size() > transport.get_write_buffer_limits()[1]:
                self._writing_paused()  # paused before: told only when it resumes
        self._received(data)

    def _received(self, data: bytes) -> None:
        """Takes bytes from the peer (b"": it closed its side)."""
        self.last_active = time.monotonic()
        if len(data) >= _BIG_READ:
            self._read_this_turn = True
            asyncio.get_running_loop().call_soon(self._next_turn)
        try:
            self._connection.receive_data(data)
        except RemoteProtocolError as exc:
            self._protocol_error(exc)
            return
        self._take_events()
        if self._read_this_turn:
            self._pace_reading()

    def _take_events(self) -> None:
        """Starts a task for each request decoded, resolves each response; with
        `max_in_flight` requests running, leaves the rest in the decoder until one ends."""
        if len(self._tasks) >= self._max_in_flight:
            return
        loop = asyncio.get_running_loop()
        try:
            for event in self._connection.events():
                if isinstance(event, RequestReceived):
                    command = event.command
                    if command.code in self._eager:
                        self._eager_running = True
                        try:
                            task = start_eagerly(loop, self._handle(command))
                        finally:
                            self._eager_running = False
                        if self.is_closed:
                            return
                        if task is None:
                            continue
                    else:
                        task = loop.create_task(self._handle(command))
                    self._tasks[task] = command.is_oneway
                    task.add_done_callback(self._forget_task)
                    if len(self._tasks) >= self._max_in_flight:
                        self._pace_reading()
                        return
                elif isinstance(event, ResponseReceived):
                    future = self._waiting.get(event.command.opaque)
                    if future is not None and not future.done():
                        future.set_result(event.command)
                elif isinstance(event, ConnectionClosed):
                    self._end("closed by peer")
                    return
        except RemoteProtocolError as exc:
            self._protocol_error(exc)

    def _next_turn(self) -> None:
        """Runs after the turn of the loop with a big read (before its requests are handled;
        reading goes on at the turn's end)."""
        self._read_this_turn = False
        self._pace_reading()

    def _pace_reading(self) -> None:
        """Reads while fewer than `max_in_flight` requests run and this turn had no big read;
        otherwise lets the peer wait (TCP pushes back)."""
        paused = len(self._tasks) >= self._max_in_flight or self._read_this_turn
        if paused is not self._reading_paused and not self.is_closed:
            self._reading_paused = paused
            with contextlib.suppress(RuntimeError):  # a transport closing under us
                if paused:
                    self._transport.pause_reading()
                else:
                    self._transport.resume_reading()

    def _protocol_error(self, exc: RemoteProtocolError) -> None:
        log.warning("closing connection from %s: %s", self.remote_address, exc)
        self._end(f"protocol error from peer: {exc}")

    def _connection_lost(self, exc: Exception | None) -> None:
        self._lost.set()
        self._writing_resumed()
        if not self.is_closed:
            self._end("closed by peer" if exc is None else f"connection error: {exc}")

    def _writing_paused(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def _writing_resumed(self) -> None:
        writable, self._writable = self._writable, None
        if writable is not None and not writable.done():
            writable.set_result(None)

    def _end(self, reason: str) -> None:
        if self.is_closed:
            return
        self.close_reason = reason
        # Nobody can read an answer any more: stop waiting (held pulls), but let oneway
        # requests (offset commits sent just before closing) finish.
        for task, oneway in list(self._tasks.items()):
            if not oneway:
                task.cancel()
        self._shutdown()

    def _forget_task(self, task: asyncio.Task[None]) -> None:
        self._tasks.pop(task, None)
        if self._reading_paused and not self.is_closed:
            if len(self._tasks) < self._max_in_flight:
                self._take_events()  # the requests already received come first
            self._pace_reading()

    @property
    def in_flight(self) -> int:
        """Requests of this connection being handled now."""
        return len(self._tasks)

    async def _handle(self, request: RemotingCommand) -> None:
        started = time.perf_counter()
        response: RemotingCommand | None = None
        try:
            handler = self._handlers.get(request.code)
            if handler is None:
                response = RemotingCommand.response_to(
                    request,
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                    f" request type {request.code} not supported",
                )
            elif self.guard is not None and (refusal := self.guard(request, self)) is not None:
                response = refusal
            else:
                try:
                    response = await handler(request, self)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # a handler bug answers, never kills the channel
                    log.exception("handler for request code %d failed", request.code)
                    response = RemotingCommand.response_to(
                        request, ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"
                    )
            if response is not None and not request.is_oneway:
                await self.send_response(response)
        except (ConnectionError, RemotingError):
            pass  # the peer went away while we answered
        finally:
            if self.observe is not None:
                self.observe(
                    request.code,
                    response.code if response is not None else -1,
                    time.perf_counter() - started,
                    request.is_oneway,
                    request.suspended,
                )

    # -- closing ---------------------------------------------------------------------------
    def _shutdown(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(
                    ChannelClosedError(f"connection to {self.remote_address} closed")
                )
        self._waiting.clear()
        if self._flush_handle is not None:  # what was answered before the close still goes
            self._flush_handle.cancel()
            self._flush()
        with contextlib.suppress(Exception):
            self._writer.close()
        for callback in self.on_close:
            try:
                callback(self)
            except Exception:  # one bad callback must not block the others
                log.exception("channel close callback failed")

    async def close(self, grace_s: float = 0.0) -> None:
        """Closes the connection; in-flight handlers get `grace_s` seconds to finish."""
        if self._tasks and grace_s > 0:
            await asyncio.wait(set(self._tasks), timeout=grace_s)
        for task in list(self._tasks):
            task.cancel()
        self.close_reason = self.close_reason or "closed locally"
        self._shutdown()
        if self._reader_task is not None and self._reader_task is not asyncio.current_task():
            self._reader_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader_task
        if self._wire is not None:
            await self._lost.wait()
        else:
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()


class _Wire(asyncio.Protocol):
    """The transport's protocol once a channel has taken it over from the stream."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    def data_received(self, data: bytes) -> None:
        self._channel._received(data)

    def eof_received(self) -> bool:
        self._channel._received(b"")
        return False  # the transport closes

    def connection_lost(self, exc: Exception | None) -> None:
        self._channel._connection_lost(exc)

    def pause_writing(self) -> None:
        self._channel._writing_paused()

    def resume_writing(self) -> None:
        self._channel._writing_resumed()
