"""Fixtures shared by the suites that run real pocketmq server processes on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from pocketmq.testing import ServerProcess, start_server_process
from pocketmq.testing.plugin import print_log_if_failed
from tests.integration.replication import BrokerGroup
from tests.server_logs import first_handler_failure

pytest_plugins = ["pytester"]  # the testing plugin's own tests run pytest on example suites

# The properties check results, not speed: on a busy two-core machine one example can take
# longer than hypothesis's default 200 ms deadline, which would fail a correct test.
settings.register_profile("pocketmq", deadline=None)
settings.load_profile("pocketmq")


@pytest.fixture(autouse=True)
def no_handler_failed(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test whose servers logged a request handler's exception (`server_logs`): read
    in the test's `tmp_path` once its servers stopped (this fixture is set up first, so torn
    down last)."""
    yield
    tmp_path = request.node.funcargs.get("tmp_path")
    failure = first_handler_failure(Path(tmp_path)) if tmp_path is not None else None
    if failure is not None:
        pytest.fail(f"a request handler raised: {failure}")


@pytest.fixture
def run_server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., ServerProcess]]:
    """Starts `pocketmq <args>`; every process is stopped at the end, its log shown on failure."""
    started: list[ServerProcess] = []

    def start(*args: str, name: str = "server") -> ServerProcess:
        server = start_server_process(list(args), tmp_path / f"{name}-{len(started)}.log")
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop(timeout_s=10)
        print_log_if_failed(request, f"log of pocketmq {' '.join(server.args)}", server.log)


@pytest.fixture
def broker_group(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BrokerGroup]:
    """A NameServer process, and master and slave brokers added and started by the test; their
    logs are printed when the test fails."""
    started = BrokerGroup(tmp_path)
    try:
        yield started
    finally:
        started.close()
        print_log_if_failed(request, "logs of the broker group", started.logs)
