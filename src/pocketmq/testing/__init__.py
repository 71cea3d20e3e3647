"""Real pocketmq servers for tests: in-process or subprocess clusters on free loopback ports."""

from pocketmq.testing.cluster import InProcessCluster, start_cluster
from pocketmq.testing.processes import (
    ServerProcess,
    free_port_pair,
    start_server_process,
    start_up_process,
)

__all__ = [
    "InProcessCluster",
    "ServerProcess",
    "free_port_pair",
    "start_cluster",
    "start_server_process",
    "start_up_process",
]
