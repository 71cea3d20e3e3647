"""The asyncio remoting transport over real loopback sockets."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections.abc import Awaitable, Callable

import pytest

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.frame import decode_frame, encode_frame
from pocketmq.remoting.transport import (
    Channel,
    ChannelClosedError,
    RemotingClient,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
)
from pocketmq.testing import async_wait_until

ECHO = 9001
SLOW = 9002
BOOM = 9003


async def echo(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    return RemotingCommand.response_to(
        request, ResponseCode.SUCCESS, ext_fields=request.ext_fields, body=request.body
    )


async def slow(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    await asyncio.sleep(float(request.ext_fields["seconds"]))
    return RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark="slow done")


async def boom(request: RemotingCommand, channel: Channel) -> RemotingCommand:
    raise ValueError("bad header field")


EVERY_TEST_CODE = frozenset(range(ECHO - 1, SLOW + 200))
"""The codes these tests use: with `eager`, all of them start as they are decoded."""
MODES = pytest.mark.parametrize("eager", [False, True], ids=["tasks", "eager"])


def with_server(
    test: Callable[[RemotingServer, RemotingClient, str], Awaitable[None]],
    eager: bool = False,
) -> None:
    async def run() -> None:
        server = RemotingServer({ECHO: echo, SLOW: slow, BOOM: boom})
        server.eager = EVERY_TEST_CODE if eager else frozenset()
        port = await server.start()
        client = RemotingClient()
        try:
            await asyncio.wait_for(test(server, client, f"127.0.0.1:{port}"), 20)
        finally:
            await client.close()
            await server.stop(grace_s=0.5)

    asyncio.run(run())


@MODES
def test_request_response_round_trip(eager: bool) -> None:
    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        request = RemotingCommand.request(ECHO, {"k": "v"}, body=b"x" * 100_000)
        response = await client.invoke(address, request, 3)
        assert response.code == ResponseCode.SUCCESS
        assert response.ext_fields == {"k": "v"}
        assert response.body == b"x" * 100_000

    with_server(test, eager)


@MODES
def test_unknown_code_and_failing_handler_get_precise_codes(eager: bool) -> None:
    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        unknown = await client.invoke(address, RemotingCommand.request(12345), 3)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        assert unknown.remark == " request type 12345 not supported"
        failed = await client.invoke(address, RemotingCommand.request(BOOM), 3)
        assert failed.code == ResponseCode.SYSTEM_ERROR
        assert failed.remark is not None
        assert "bad header field" in failed.remark
        assert (await client.invoke(address, RemotingCommand.request(ECHO), 3)).code == 0

    with_server(test, eager)


@MODES
def test_slow_request_does_not_block_others_on_the_same_connection(eager: bool) -> None:
    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        held = asyncio.ensure_future(
            client.invoke(address, RemotingCommand.request(SLOW, {"seconds": "1.0"}), 5)
        )
        loop = asyncio.get_running_loop()
        start = loop.time()
        for _ in range(20):
            assert (await client.invoke(address, RemotingCommand.request(ECHO), 3)).code == 0
        assert loop.time() - start < 0.9
        assert not held.done()
        assert (await held).remark == "slow done"
        assert len(server.channels) == 1

    with_server(test, eager)


@MODES
def test_timeout_then_connection_still_usable(eager: bool) -> None:
    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        with pytest.raises(RemotingTimeoutError, match="within 100 ms"):
            await client.invoke(address, RemotingCommand.request(SLOW, {"seconds": "0.5"}), 0.1)
        assert (await client.invoke(address, RemotingCommand.request(ECHO), 3)).code == 0

    with_server(test, eager)


@MODES
def test_oneway_gets_no_response_but_runs(eager: bool) -> None:
    seen: list[str] = []

    async def record(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        seen.append(request.ext_fields["n"])
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        server.handlers[ECHO + 10] = record
        for n in range(5):
            await client.invoke_oneway(address, RemotingCommand.request(ECHO + 10, {"n": str(n)}))
        # A normal request after them: oneway requests were read before it on the stream.
        await client.invoke(address, RemotingCommand.request(ECHO), 3)
        await async_wait_until(lambda: len(seen) == 5, "5 oneway requests handled", poll_s=0.01)
        assert sorted(seen) == ["0", "1", "2", "3", "4"]

    with_server(test, eager)


@MODES
def test_what_was_written_before_a_close_still_reaches_the_peer(eager: bool) -> None:
    """Writes leave at the end of the event loop's turn; a close in that same turn (offset
    commits sent just before a consumer shuts down) sends them first."""
    seen: list[str] = []

    async def record(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        seen.append(request.ext_fields["n"])
        return None

    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        server.handlers[ECHO + 11] = record
        channel = await client.channel(address)
        for n in range(3):
            await channel.invoke_oneway(RemotingCommand.request(ECHO + 11, {"n": str(n)}))
        await channel.close()
        await async_wait_until(lambda: len(seen) == 3, "3 oneway requests handled", poll_s=0.01)
        assert seen == ["0", "1", "2"]

    with_server(test, eager)


def _round_trip_s(address: str, request: RemotingCommand) -> tuple[RemotingCommand, float]:
    """One request over a plain blocking socket (its own thread, beside the event loop):
    the answer and the seconds until all of it arrived."""
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        began = time.monotonic()
        sock.sendall(encode_frame(request))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            data += chunk
        return decode_frame(data), time.monotonic() - began


@MODES
def test_a_lone_request_is_answered_before_the_work_it_leaves_for_the_loop(eager: bool) -> None:
    """A store's put leaves dispatch to the loop's next callbacks; the answer to the only
    request in flight must not wait for them (a client sending one at a time would)."""
    blocked_s = 0.5

    async def leave_work(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        asyncio.get_running_loop().call_soon(time.sleep, blocked_s)  # blocks the whole loop
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark="stored")

    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        server.handlers[ECHO + 12] = leave_work
        request = RemotingCommand.request(ECHO + 12)
        request.opaque = 7
        answer, took_s = await asyncio.to_thread(_round_trip_s, address, request)
        assert (answer.remark, answer.opaque) == ("stored", 7)
        assert took_s < blocked_s * 0.8, f"the answer waited {took_s:.3f} s for later work"

    with_server(test, eager)


@MODES
def test_server_calls_the_client_back_on_the_same_connection(eager: bool) -> None:
    async def notified(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, remark="client here")

    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        client.handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] = notified
        await client.invoke(address, RemotingCommand.request(ECHO), 3)
        (channel,) = server.channels
        answer = await channel.invoke(
            RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED), 3
        )
        assert answer.remark == "client here"

    with_server(test, eager)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", -5),
        struct.pack(">i", 1 << 30) + b"\0" * 8,
        struct.pack(">ii", 20, 100) + b"\0" * 16,
        struct.pack(">ii", 12, 8) + b"not json",
        b"\xff" * 64,
    ],
    ids=["negative-length", "huge-length", "header-beyond-frame", "bad-json", "random"],
)
@MODES
def test_malformed_frame_closes_only_that_connection(garbage: bytes, eager: bool) -> None:
    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        await client.invoke(address, RemotingCommand.request(ECHO), 3)
        host, port = address.split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(garbage)
        await writer.drain()
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # the server closed it
        writer.close()
        # The well-behaved client on its own connection keeps being served.
        assert (await client.invoke(address, RemotingCommand.request(ECHO), 3)).code == 0

    with_server(test, eager)


def test_connect_error_names_the_address() -> None:
    async def run() -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        client = RemotingClient(connect_timeout_s=1)
        with pytest.raises(RemotingConnectError, match=f"127.0.0.1:{port}"):
            await client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(ECHO), 1)
        with pytest.raises(RemotingConnectError, match="host:port"):
            await client.invoke("nonsense", RemotingCommand.request(ECHO), 1)
        await client.close()

    asyncio.run(run())


@MODES
def test_stop_lets_in_flight_requests_finish(eager: bool) -> None:
    async def run() -> None:
        started = asyncio.Event()

        async def slow_once_started(request: RemotingCommand, channel: Channel) -> RemotingCommand:
            started.set()
            return await slow(request, channel)

        server = RemotingServer({SLOW: slow_once_started})
        server.eager = EVERY_TEST_CODE if eager else frozenset()
        port = await server.start()
        client = RemotingClient()
        held = asyncio.ensure_future(
            client.invoke(f"127.0.0.1:{port}", RemotingCommand.request(SLOW, {"seconds": "0.2"}), 5)
        )
        # The stop must find the request in its handler, however late a loaded machine runs it.
        await asyncio.wait_for(started.wait(), 5)
        await server.stop(grace_s=2)
        assert (await held).remark == "slow done"
        await client.close()

    asyncio.run(run())


@MODES
def test_peer_close_cancels_its_waiting_requests_but_finishes_oneway_ones(eager: bool) -> None:
    events: list[str] = []

    both_started = asyncio.Semaphore(0)

    async def hold(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        both_started.release()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            events.append("held request cancelled")
            raise
        return None

    async def commit(request: RemotingCommand, channel: Channel) -> RemotingCommand | None:
        both_started.release()
        await asyncio.sleep(0.1)
        events.append("oneway finished")
        return None

    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        server.handlers[SLOW + 100] = hold
        server.handlers[SLOW + 101] = commit
        channel = await client.channel(address)
        held = asyncio.ensure_future(channel.invoke(RemotingCommand.request(SLOW + 100), 30))
        await channel.invoke_oneway(RemotingCommand.request(SLOW + 101))
        for _ in range(2):
            await asyncio.wait_for(both_started.acquire(), 5)
        await client.close()
        with pytest.raises(ChannelClosedError):
            await held
        await async_wait_until(lambda: len(events) == 2, "both handlers finished", poll_s=0.02)
        assert sorted(events) == ["held request cancelled", "oneway finished"]

    with_server(test, eager)


def test_client_closes_idle_connections_and_reconnects_on_demand() -> None:
    async def run() -> None:
        server = RemotingServer({ECHO: echo})
        port = await server.start()
        address = f"127.0.0.1:{port}"
        client = RemotingClient(idle_timeout_s=0.2)
        try:
            first = await client.channel(address)
            await client.invoke(address, RemotingCommand.request(ECHO), 3)
            await async_wait_until(lambda: first.is_closed, "the idle connection closed")
            assert first.is_closed
            assert (await client.invoke(address, RemotingCommand.request(ECHO), 3)).code == 0
            assert await client.channel(address) is not first
        finally:
            await client.close()
            await server.stop()

    asyncio.run(run())


@MODES
def test_a_first_request_larger_than_a_read_arrives_whole(eager: bool) -> None:
    """The channel takes the transport over from the stream after its first read: bytes the
    stream held past that read must reach the decoder too."""

    async def test(server: RemotingServer, client: RemotingClient, address: str) -> None:
        body = bytes(range(256)) * (3 * 4096)  # 3 MiB, the first frame on the connection
        response = await client.invoke(address, RemotingCommand.request(ECHO, body=body), 10)
        assert response.code == ResponseCode.SUCCESS
        assert response.body == body
        again = await client.invoke(address, RemotingCommand.request(ECHO, {"n": "2"}), 3)
        assert again.ext_fields == {"n": "2"}

    with_server(test, eager)


@MODES
def test_past_max_in_flight_a_connection_is_not_read_until_a_request_ends(eager: bool) -> None:
    """Backpressure: with `max_in_flight` requests running, the rest wait unread (TCP pushes
    back on the peer) and start, in order, as the running ones end."""
    gate = asyncio.Event()
    started: list[str] = []
    running = [0, 0]  # now, most at once

    async def hold(request: RemotingCommand, channel: Channel) -> RemotingCommand:
        started.append(request.ext_fields["n"])
        running[0] += 1
        running[1] = max(running)
        await gate.wait()
        running[0] -= 1
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def run() -> None:
        server = RemotingServer({ECHO: echo, ECHO + 12: hold}, max_in_flight=2)
        server.eager = EVERY_TEST_CODE if eager else frozenset()
        port = await server.start()
        address = f"127.0.0.1:{port}"
        client, other = RemotingClient(), RemotingClient()
        try:
            calls = [
                asyncio.ensure_future(
                    client.invoke(address, RemotingCommand.request(ECHO + 12, {"n": str(n)}), 10)
                )
                for n in range(5)
            ]
            await async_wait_until(lambda: len(started) == 2, "two requests running")
            # Round trips on another connection: the server's loop has turned many times
            # since the five requests were written.
            for _ in range(5):
                await other.invoke(address, RemotingCommand.request(ECHO), 3)
            assert started == ["0", "1"]
            gate.set()
            answers = await asyncio.wait_for(asyncio.gather(*calls), 10)
            assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 5
            assert started == ["0", "1", "2", "3", "4"]
            assert running[1] == 2
        finally:
            await client.close()
            await other.close()
            await server.stop(grace_s=0.5)

    asyncio.run(run())
