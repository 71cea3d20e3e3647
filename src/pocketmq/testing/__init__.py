"""Helpers to run real pocketmq servers in tests: subprocesses on loopback with free ports."""

from pocketmq.testing.processes import ServerProcess, start_server_process

__all__ = ["ServerProcess", "start_server_process"]
