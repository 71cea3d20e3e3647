"""The systems under comparison as servers on loopback, each with its data in a temporary
directory: installed from Debian's packages when missing, started, stopped by PID.

pocketmq: `pocketmq up` (ASYNC_FLUSH or SYNC_FLUSH). Redis: `redis-server` with an append-only
file, `appendfsync everysec` or `always`. NATS: `nats-server -js` (JetStream, file storage).
RabbitMQ: `rabbitmq-server` with its own node name, ports and directories (epmd on loopback).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pocketmq.testing import start_server_process
from pocketmq.testing.proc_stat import proc_stat

PACKAGES = {"redis": "redis-server", "nats": "nats-server", "rabbitmq": "rabbitmq-server"}
COMMANDS = {
    "redis": "redis-server",
    "nats": "nats-server",
    "rabbitmq": "/usr/lib/rabbitmq/bin/rabbitmq-server",
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def ensure_installed(systems: list[str]) -> None:
    """Installs the Debian packages of the systems whose server is missing."""
    missing = [
        PACKAGES[s]
        for s in systems
        if s in PACKAGES and not (shutil.which(COMMANDS[s]) or Path(COMMANDS[s]).exists())
    ]
    if not missing:
        return
    print(f"installing {', '.join(missing)} from Debian's packages ...", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive", "RUNLEVEL": "1"}
    # policy-rc.d 101 keeps the packages from starting their services on installation.
    policy = Path("/usr/sbin/policy-rc.d")
    created = not policy.exists()
    if created:
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    try:
        subprocess.run(["apt-get", "update", "-q"], check=True, env=env, capture_output=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-q", *missing], check=True, env=env, capture_output=True
        )
    finally:
        if created:
            policy.unlink()


def wait_for_port(port: int, timeout_s: float, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout_s} s")


@dataclass
class Server:
    """A started server: where it listens and the processes to stop."""

    name: str
    address: str
    processes: list[subprocess.Popen[Any]] = field(default_factory=list)
    pids_for_cpu: list[int] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        """User + system CPU of the server's processes so far (from /proc)."""
        total = 0.0
        for pid in self.pids_for_cpu:
            try:
                total += proc_stat(pid).cpu_s
            except OSError:
                continue
        return total

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def start_pocketmq(work: Path, flush: str) -> Server:
    config = work / "broker.properties"
    config.write_text(f"flushDiskType={flush}\n")
    # Free ports chosen by the server itself (the ready line names them): ports probed here
    # and passed in can be taken before the server binds them, its HA port (broker + 1) too.
    up = start_server_process(
        ["--log-level", "WARNING", "up", "--namesrv-port", "0", "--broker-port", "0",
         "--data-dir", str(work / "data"), "-c", str(config)],
        work / "pocketmq.log", timeout_s=60,
    )  # fmt: skip
    # The broker registers with the NameServer before the ready line.
    return Server("pocketmq", up.address, [up.process], [up.process.pid])


def start_redis(work: Path, fsync: str) -> Server:
    port = free_port()
    log = (work / "redis.log").open("wb")
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", str(work),
         "--appendonly", "yes", "--appendfsync", fsync, "--save", "", "--daemonize", "no"],
        stdout=log, stderr=log,
    )  # fmt: skip
    wait_for_port(port, 30, process)
    return Server("redis", f"redis://127.0.0.1:{port}", [process], [process.pid])


def start_nats(work: Path) -> Server:
    port = free_port()
    log = (work / "nats.log").open("wb")
    process = subprocess.Popen(
        ["nats-server", "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(work / "js"),
         "--http_port", "0"],
        stdout=log, stderr=log,
    )  # fmt: skip
    wait_for_port(port, 30, process)
    return Server("nats", f"nats://127.0.0.1:{port}", [process], [process.pid])


def start_rabbitmq(work: Path) -> Server:
    port, dist_port, epmd_port = free_port(), free_port(), free_port()
    node = f"pocketmq-bench-{port}@localhost"
    env = {
        **os.environ,
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_EPMD_PORT": str(epmd_port),
        "RABBITMQ_MNESIA_BASE": str(work / "mnesia"),
        "RABBITMQ_LOG_BASE": str(work / "log"),
        "RABBITMQ_CONFIG_FILE": str(work / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(work / "enabled_plugins"),
        "RABBITMQ_PID_FILE": str(work / "rabbitmq.pid"),
        "HOME": str(work),
    }
    (work / "rabbitmq.conf").write_text("loopback_users = none\nmanagement.tcp.port = 0\n")
    (work / "enabled_plugins").write_text("[].\n")
    log = (work / "rabbitmq.out").open("wb")
    # Our own epmd, in the foreground on loopback: Erlang would otherwise leave a daemon behind.
    epmd = subprocess.Popen(
        [shutil.which("epmd") or "/usr/bin/epmd", "-port", str(epmd_port), "-address",
         "127.0.0.1"],
        stdout=log, stderr=log,
    )  # fmt: skip
    wait_for_port(epmd_port, 10, epmd)
    process = subprocess.Popen([COMMANDS["rabbitmq"]], env=env, stdout=log, stderr=log)
    wait_for_port(port, 120, process)
    beam = _children_named(process.pid, "beam")
    return Server(
        "rabbitmq",
        f"amqp://guest:guest@127.0.0.1:{port}/",
        [epmd, process],
        beam or [process.pid],
    )


def _children_named(pid: int, prefix: str) -> list[int]:
    """Descendants of `pid` whose command starts with `prefix` (RabbitMQ's Erlang VM)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = proc_stat(entry.name)
        except (OSError, ValueError):
            continue
        if stat.name.startswith(prefix) and _descends(stat.parent, pid):
            found.append(int(entry.name))
    return found


def _descends(pid: int, ancestor: int) -> bool:
    for _ in range(20):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            pid = proc_stat(pid).parent
        except (OSError, ValueError):
            return False
    return False
