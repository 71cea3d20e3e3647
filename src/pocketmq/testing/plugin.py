"""The pytest plugin: a real pocketmq cluster for any project's tests, in one line.

Installed with the package (entry point `pytest11`), so these fixtures are there as soon as
pocketmq is installed:

- `pocketmq_cluster`: a NameServer and a broker in this process, on free loopback ports
  (fast; one per test);
- `pocketmq_process_cluster`: the same as a `pocketmq up` subprocess (for crash tests: it can be
  killed with SIGKILL).

Use `cluster.namesrv_addr` as the client's NameServer address.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.testing.cluster import InProcessCluster, start_cluster
from pocketmq.testing.processes import ServerProcess, start_up_process


@pytest.fixture
def pocketmq_cluster(tmp_path: Path) -> Iterator[InProcessCluster]:
    """A NameServer and a broker running in this process on free ports."""
    cluster = start_cluster(tmp_path / "pocketmq-store")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def pocketmq_process_cluster(tmp_path: Path) -> Iterator[ServerProcess]:
    """`pocketmq up` as a subprocess on free ports; `.address` is the NameServer's."""
    server = start_up_process(tmp_path / "pocketmq-up", tmp_path / "pocketmq-up.log")
    try:
        yield server
    finally:
        server.stop()
