"""Real pocketmq servers for tests: in-process or subprocess clusters on free loopback ports."""

from pocketmq.testing.cluster import InProcessCluster, start_cluster
from pocketmq.testing.processes import ServerProcess, start_server_process

__all__ = ["InProcessCluster", "ServerProcess", "start_cluster", "start_server_process"]
