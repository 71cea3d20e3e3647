"""A NameServer that cannot be reached is one clear line from every call that needs it, not a
traceback of asyncio internals: `ConnectionFailedError` naming the address, what happened and
what to check, with the low-level error chained as its cause. (Consumers start without one and
keep retrying, as the Java client does.)"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

import pocketmq.client as blocking
import pocketmq.client.aio as aio
from pocketmq.client import ConnectionFailedError
from pocketmq.client.errors import connection_problem
from pocketmq.remoting.transport import RemotingConnectError


@pytest.fixture
def closed_address() -> str:
    """A loopback port nothing listens on: bound for a moment, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"127.0.0.1:{port}"


def expected_message(address: str) -> str:
    return (
        f"no NameServer answers: cannot reach {address}: connection refused; is it running? "
        "check the namesrv address"
    )


def assert_clear(error: ConnectionFailedError, address: str) -> None:
    assert str(error) == expected_message(address)
    assert "\n" not in str(error)
    causes: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None and len(causes) < 10:
        causes.append(cause)
        cause = cause.__cause__
    assert any(isinstance(c, ConnectionRefusedError) for c in causes), causes


async def _aio_send(address: str) -> None:
    producer = aio.Producer("p", namesrv=address)
    await producer.start()
    try:
        await producer.send(aio.Message("Nowhere", b"x"))
    finally:
        await producer.close()


def _blocking_send(address: str) -> None:
    with blocking.Producer("p", namesrv=address) as producer:
        producer.send(blocking.Message("Nowhere", b"x"))


ASYNC_CASES: dict[str, Callable[[str], Any]] = {
    "send": _aio_send,
}
BLOCKING_CASES: dict[str, Callable[[str], None]] = {
    "send": _blocking_send,
}


@pytest.mark.parametrize("case", sorted(ASYNC_CASES))
def test_asyncio_clients_say_the_namesrv_cannot_be_reached(case: str, closed_address: str) -> None:
    with pytest.raises(ConnectionFailedError) as raised:
        asyncio.run(ASYNC_CASES[case](closed_address))
    assert_clear(raised.value, closed_address)


@pytest.mark.parametrize("case", sorted(BLOCKING_CASES))
def test_blocking_clients_say_the_namesrv_cannot_be_reached(case: str, closed_address: str) -> None:
    with pytest.raises(ConnectionFailedError) as raised:
        BLOCKING_CASES[case](closed_address)
    assert_clear(raised.value, closed_address)


def test_every_namesrv_tried_is_named(closed_address: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        other = f"127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(ConnectionFailedError) as raised:
        asyncio.run(_aio_send(f"{closed_address};{other}"))
    message = str(raised.value)
    assert message.startswith("no NameServer answers: ")
    assert f"cannot reach {closed_address}: connection refused" in message
    assert f"cannot reach {other}: connection refused" in message
    assert message.endswith("are they running? check the namesrv address")


def test_the_admin_cli_still_says_it_in_one_line(closed_address: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", "admin", "topicList", "-n", closed_address],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode != 0
    lines = completed.stderr.strip().splitlines()
    assert len(lines) == 1, completed.stderr
    assert "no NameServer answers" in lines[0]
    assert f"cannot reach {closed_address}: connection refused" in lines[0]
    assert "Traceback" not in completed.stderr + completed.stdout


@pytest.mark.parametrize(
    ("low_level", "words"),
    [
        (ConnectionRefusedError(111, "Connection refused"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "host name not found"),
        (TimeoutError(), "no answer in time"),
        (ConnectionResetError(104, "Connection reset by peer"), "connection reset"),
        (OSError(113, "No route to host"), "no route to host"),
    ],
)
def test_the_reason_is_said_in_words(low_level: OSError, words: str) -> None:
    wrapped = RemotingConnectError("cannot connect to h:1")
    wrapped.__cause__ = low_level  # as the transport chains it
    assert connection_problem(wrapped) == words
