"""Helpers to run real pocketmq servers in tests: subprocesses on loopback with free ports."""

from pocketmq.testing.cluster import InProcessCluster, start_cluster
from pocketmq.testing.processes import ServerProcess, start_server_process

__all__ = ["InProcessCluster", "ServerProcess", "start_cluster", "start_server_process"]
