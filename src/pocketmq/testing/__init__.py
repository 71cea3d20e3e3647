"""What tests of code that uses pocketmq need: real servers (in-process or subprocess clusters on
free loopback ports), clients started for a block, a recording listener, and bounded waits."""

from pocketmq.testing.cluster import InProcessCluster, start_cluster
from pocketmq.testing.lifecycle import started
from pocketmq.testing.processes import (
    ServerProcess,
    free_port,
    free_port_pair,
    start_server_process,
    start_up_process,
    wait_ports_free,
)
from pocketmq.testing.recorder import MessageRecorder
from pocketmq.testing.waiting import DEFAULT_WAIT_S, async_wait_until, wait_until

__all__ = [
    "DEFAULT_WAIT_S",
    "InProcessCluster",
    "MessageRecorder",
    "ServerProcess",
    "async_wait_until",
    "free_port",
    "free_port_pair",
    "start_cluster",
    "start_server_process",
    "start_up_process",
    "started",
    "wait_ports_free",
    "wait_until",
]
