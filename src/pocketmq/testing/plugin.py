"""The pytest plugin: a real pocketmq cluster for any project's tests, in one line.

Installed with the package (entry point `pytest11`), so these fixtures are there as soon as
pocketmq is installed:

- `pocketmq_cluster`: a NameServer and a broker in this process, on free loopback ports
  (fast; one per test);
- `pocketmq_process_cluster`: the same as a `pocketmq up` subprocess (for crash tests: it can be
  killed with SIGKILL); its log is shown with a failed test's report.

Use `cluster.namesrv_addr` as the client's NameServer address.

A fixture's teardown can tell whether its test failed: the plugin keeps each phase's report on
the test item (`item.rep_setup`, `item.rep_call`, `item.rep_teardown`, the pattern of pytest's
documentation), and `has_failed(request.node)` says whether a test under that node failed so
far. `print_log_if_failed` prints a server log then; pytest shows it with the failure.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

from pocketmq.testing.cluster import InProcessCluster, start_cluster
from pocketmq.testing.processes import ServerProcess, start_up_process

_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keeps the report of each phase on the item, and marks the item and every node above it
    (module, class, session) as holding a failed test."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    if report.failed:
        for node in item.listchain():
            node.stash[_FAILED] = True
    return report


def has_failed(node: pytest.Item | pytest.Collector) -> bool:
    """Whether a test under `node` failed so far, in setup, call or teardown.

    In a function-scoped fixture's teardown, `has_failed(request.node)` is whether its test
    failed; for a module-scoped one, whether any test of the module that ran so far did.
    """
    return node.stash.get(_FAILED, False)


def print_log_if_failed(request: pytest.FixtureRequest, title: str, log: Callable[[], str]) -> None:
    """In a fixture's teardown: prints `log()` under `title` when the test failed.

    Printed in the teardown of a function-scoped fixture, it is part of the failed test's
    report ("Captured stdout teardown"); a passing test reads no log and shows nothing.
    """
    if has_failed(request.node):
        sys.stdout.write(f"--- {title}\n{log()}\n")


@pytest.fixture
def pocketmq_cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    """A NameServer and a broker running in this process on free ports."""
    cluster = start_cluster(tmp_path / "pocketmq-store")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pocketmq_process_cluster(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[ServerProcess]:
    """`pocketmq up` as a subprocess on free ports; `.address` is the NameServer's. Its log is
    printed when the test fails."""
    server = start_up_process(tmp_path / "pocketmq-up", tmp_path / "pocketmq-up.log")
    try:
        yield server
    finally:
        server.stop()
        print_log_if_failed(request, f"log of pocketmq {' '.join(server.args)}", server.log)
