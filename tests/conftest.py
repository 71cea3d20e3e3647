"""Fixtures shared by the suites that run real pocketmq server processes on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pocketmq.testing import ServerProcess, start_server_process
from tests.integration.replication import BrokerGroup


@pytest.fixture
def run_server(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Starts `pocketmq <args>`; every process is stopped at the end, its log shown on failure."""
    started: list[ServerProcess] = []

    def start(*args: str, name: str = "server") -> ServerProcess:
        server = start_server_process(list(args), tmp_path / f"{name}-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(timeout_s=10)
        print(f"--- log of pocketmq {' '.join(server.args)}\n{server.log()}")  # noqa: T201


@pytest.fixture
def broker_group(tmp_path: Path) -> Iterator[BrokerGroup]:
    """A NameServer process, and master and slave brokers added and started by the test; their
    logs are printed when the test fails."""
    started = BrokerGroup(tmp_path)
    try:
        yield started
    except BaseException:
        print(started.logs())  # noqa: T201  (shown by pytest on failure)
        raise
    finally:
        started.close()
