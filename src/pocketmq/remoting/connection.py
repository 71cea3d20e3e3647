"""One remoting connection as a pure state machine: bytes in, events out; commands in, bytes out.

`RemotingConnection` owns what one TCP connection needs beyond framing: the opaque counter for
requests we send, the table of requests still waiting for a response, and the end-of-stream
and failure states. It does no I/O; the asyncio transport feeds it received bytes and writes
the bytes it returns (STYLE.md section 2).

Both ends may send requests on one connection (a broker calls its clients back), so every
connection both answers and asks. Invariants:

* Opaques we assign are non-negative, increase by one, wrap at 2**31, and skip any opaque
  still pending, so two pending requests never share one.
* A response matches the pending request with its opaque and removes it; a response for an
  unknown opaque (a late reply after `forget`) is counted and dropped, not an error.
* After a `RemoteProtocolError` the connection is dead: every later call raises it again.
* Frames are sent JSON with a 0 serialize byte unless configured otherwise, because the C++
  client reads the header word as a plain length (rocketmq-wire.md section 0.1).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final, NoReturn

from pocketmq.common.codes import SerializeType
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import LocalProtocolError, RemoteProtocolError
from pocketmq.remoting.frame import FRAME_BYTES_MAX_DEFAULT, FrameDecoder, encode_frame

OPAQUE_LIMIT: Final = 1 << 31
"""Opaques we assign stay in [0, OPAQUE_LIMIT): non-negative 32-bit ints, as the C++ client's."""


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """The peer sent a request; answer it with `send_response` unless it is oneway."""

    command: RemotingCommand


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    """The peer answered `request`, which we sent with `send_request`."""

    command: RemotingCommand
    request: RemotingCommand


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The peer closed the stream at a frame boundary; no more events follow.

    Requests still in `pending_opaques` will never be answered; the caller fails them.
    """


Event = RequestReceived | ResponseReceived | ConnectionClosed


class RemotingConnection:
    """The sans-IO core of one remoting connection (client or server side alike).

    Usage::

        conn = RemotingConnection()
        conn.receive_data(chunk)            # b"" when the peer closed
        for event in conn.events():
            ...
        transport.write(conn.send_request(command))
    """

    __slots__ = (
        "_closed_reported",
        "_decoder",
        "_error",
        "_frame_bytes_max",
        "_next_opaque",
        "_peer_closed",
        "_pending",
        "_serialize_type",
        "_unmatched_responses_dropped",
    )

    def __init__(
        self,
        *,
        frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT,
        serialize_type: SerializeType = SerializeType.JSON,
        opaque_start: int = 0,
    ) -> None:
        """Create a connection.

        Args:
            frame_bytes_max: The largest frame, length prefix included, accepted from the peer
                and allowed to be sent.
            serialize_type: Header serialization of every frame we send. Keep JSON for any
                connection a C++ client may use.
            opaque_start: The first opaque `send_request` assigns (tests use it to reach the
                wrap-around).

        Raises:
            LocalProtocolError: `frame_bytes_max` is too small or `opaque_start` out of range.
        """
        if not 0 <= opaque_start < OPAQUE_LIMIT:
            raise LocalProtocolError(f"opaque_start={opaque_start} is outside [0, 2**31)")
        self._decoder = FrameDecoder(frame_bytes_max)
        self._frame_bytes_max = frame_bytes_max
        self._serialize_type = SerializeType(serialize_type)
        self._next_opaque = opaque_start
        self._pending: dict[int, RemotingCommand] = {}
        self._unmatched_responses_dropped = 0
        self._peer_closed = False
        self._closed_reported = False
        self._error: str | None = None

    # -- state -------------------------------------------------------------------------------

    @property
    def pending_opaques(self) -> frozenset[int]:
        """Opaques of requests sent and not yet answered or forgotten."""
        return frozenset(self._pending)

    @property
    def unmatched_responses_dropped(self) -> int:
        """Responses dropped because no pending request had their opaque."""
        return self._unmatched_responses_dropped

    @property
    def peer_closed(self) -> bool:
        """Whether `receive_data(b"")` reported the end of the peer's stream."""
        return self._peer_closed

    @property
    def failed(self) -> bool:
        """Whether the peer sent invalid bytes; the connection must then be closed."""
        return self._error is not None

    # -- receiving ---------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Hand over bytes read from the socket; `events()` decodes them.

        Args:
            data: The bytes read; `b""` means the peer closed its side.

        Raises:
            RemoteProtocolError: The connection already failed.
            LocalProtocolError: Non-empty data after the end of the stream.
        """
        self._raise_if_failed()
        if self._peer_closed:
            if data:
                raise LocalProtocolError(
                    f"received {len(data)} bytes after the peer closed the connection"
                )
            return
        if not data:
            self._peer_closed = True
            return
        self._decoder.feed(data)

    @property
    def buffered_bytes(self) -> int:
        """Bytes received and not yet decoded into an event (more requests, or a part of one)."""
        return self._decoder.buffered_bytes

    def events(self) -> Iterator[Event]:
        """Decode the buffered bytes into events; the iterator ends when the bytes run out.

        `ConnectionClosed` comes once, after the last complete frame, when the peer closed.

        Returns:
            An iterator of `RequestReceived`, `ResponseReceived` and `ConnectionClosed`.

        Raises:
            RemoteProtocolError: Now if the connection already failed; during iteration if the
                peer sent invalid bytes or closed the stream in the middle of a frame.
        """
        self._raise_if_failed()
        return self._events()

    def _events(self) -> Iterator[Event]:
        while True:
            self._raise_if_failed()
            try:
                command = self._decoder.next_command()
            except RemoteProtocolError as error:
                self._fail(str(error))
            if command is None:
                break
            if not command.is_response:
                yield RequestReceived(command)
                continue
            request = self._pending.pop(command.opaque, None)
            if request is None:
                # A late reply to a request the caller already gave up on (`forget`).
                self._unmatched_responses_dropped += 1
                continue
            yield ResponseReceived(command, request)
        if self._peer_closed and not self._closed_reported:
            if self._decoder.buffered_bytes:
                self._fail(
                    f"peer closed the connection in the middle of a frame "
                    f"({self._decoder.buffered_bytes} bytes of it received)"
                )
            self._closed_reported = True
            yield ConnectionClosed()

    # -- sending -----------------------------------------------------------------------------

    def send_request(self, command: RemotingCommand) -> bytes:
        """Assign the next opaque to `command`, remember it unless oneway, and encode it.

        Args:
            command: A request; its `opaque` is overwritten with the assigned one.

        Returns:
            The frame bytes to write. Match the reply by `command.opaque`.

        Raises:
            RemoteProtocolError: The connection already failed.
            LocalProtocolError: `command` is a response, the peer closed the connection, or the
                command cannot be encoded within `frame_bytes_max`.
        """
        self._raise_if_failed()
        if command.is_response:
            raise LocalProtocolError(
                f"send_request got a response (code {int(command.code)}); use send_response"
            )
        if self._peer_closed:
            raise LocalProtocolError(
                "cannot send a request: the peer closed the connection, no reply can arrive"
            )
        command.opaque = self._take_opaque()
        data = self._encode(command)
        if not command.is_oneway:
            self._pending[command.opaque] = command
        return data

    def send_response(self, command: RemotingCommand) -> bytes:
        """Encode a response to a request we received.

        Allowed after the peer closed (in-flight handlers may finish); the transport decides
        whether the bytes can still be written.

        Args:
            command: A response, usually from `RemotingCommand.response_to`.

        Returns:
            The frame bytes to write.

        Raises:
            RemoteProtocolError: The connection already failed.
            LocalProtocolError: `command` is not a response or cannot be encoded.
        """
        self._raise_if_failed()
        if not command.is_response:
            raise LocalProtocolError(
                f"send_response got a request (code {int(command.code)}); use send_request"
            )
        return self._encode(command)

    def forget(self, opaque: int) -> RemotingCommand | None:
        """Stop waiting for the response to `opaque` (its timeout expired).

        A response that arrives later is dropped and counted in `unmatched_responses_dropped`.

        Returns:
            The forgotten request, or None if `opaque` was not pending.
        """
        return self._pending.pop(opaque, None)

    # -- internals ---------------------------------------------------------------------------

    def _take_opaque(self) -> int:
        # Among len(pending) + 1 consecutive opaques at least one is free (pigeonhole).
        for _ in range(len(self._pending) + 1):
            opaque = self._next_opaque
            self._next_opaque = (opaque + 1) % OPAQUE_LIMIT
            if opaque not in self._pending:
                return opaque
        raise AssertionError("no free opaque among len(pending) + 1 candidates")

    def _encode(self, command: RemotingCommand) -> bytes:
        data = encode_frame(command, self._serialize_type)
        if len(data) > self._frame_bytes_max:
            raise LocalProtocolError(
                f"frame of {len(data)} bytes (body {len(command.body)}) exceeds "
                f"frame_bytes_max={self._frame_bytes_max}"
            )
        return data

    def _fail(self, message: str) -> NoReturn:
        self._error = message
        raise RemoteProtocolError(message)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise RemoteProtocolError(self._error)
