"""A private network of Linux network namespaces for partition tests: a bridge in the root
namespace, one namespace per server joined to it by a veth pair, each server's link cut and
healed by name, and pocketmq servers started inside a namespace.

Everything it creates carries a per-run random prefix and lives in a /24 of 10.213.0.0/16 that
no interface of the machine uses, so parallel runs and the machine's own network never meet.
`close` removes every link and namespace it made, and is safe to call after a half-finished
setup. Servers in the root namespace (a NameServer, the test's clients) reach the namespaces
through the bridge's address, `gateway`.

Cutting a link brings the root-side end of the server's veth down: the server loses every
peer, the NameServer and the root namespace's clients at once (a symmetric partition), while
processes inside its own namespace still reach it at its address. Deliberately missing:
asymmetric partitions, loss and delay (those live in the Raft simulation).
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pocketmq.testing import ServerProcess, start_server_process

"""The line every pocketmq server prints once it serves (as `pocketmq.testing` expects)."""

IP_TIMEOUT_S = 10.0
"""`ip` answers in milliseconds; the limit only keeps a wedged call from hanging a test."""


class NamespacesUnavailable(RuntimeError):
    """This machine cannot create network namespaces for us; the message says why."""


@dataclass(frozen=True, slots=True)
class Host:
    """A network namespace with one address on the bridge."""

    namespace: str
    address: str
    link: str
    """The root-side end of its veth: down means cut off from everything but itself."""

    def argv(self, command: Sequence[str]) -> list[str]:
        """`command` run inside this namespace (`ip netns exec` execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace, *command]


def _ip(*args: str) -> None:
    completed = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
    )
    if completed.returncode != 0:
        raise NamespacesUnavailable(f"ip {' '.join(args)}: {completed.stderr.strip()}")


def _subnet_in_use(prefix: str) -> bool:
    completed = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"],
        capture_output=True,
        text=True,
        timeout=IP_TIMEOUT_S,
        check=False,
    )
    return f" {prefix}." in completed.stdout


class NamespaceNetwork:
    """Build it, `add_host` per server, `cut`/`heal` during the test, `close` in teardown.

    Raises:
        NamespacesUnavailable: from the constructor or `add_host` when not root, `ip` is
            missing or the kernel refuses; the caller skips. What was created is kept for
            `close`.
    """

    def __init__(self) -> None:
        if os.geteuid() != 0:
            raise NamespacesUnavailable("network namespaces need root")
        if shutil.which("ip") is None:
            raise NamespacesUnavailable("the `ip` command (iproute2) is not installed")
        # Linux interface names hold 15 bytes: "pq" + 6 hex + a 2-byte suffix fits.
        self.prefix = "pq" + secrets.token_hex(3)
        self.hosts: list[Host] = []
        self._namespaces: list[str] = []
        self._links: list[str] = []
        self.subnet = next(
            (
                candidate
                for candidate in (f"10.213.{random.randrange(256)}" for _ in range(16))
                if not _subnet_in_use(candidate)
            ),
            None,
        )
        if self.subnet is None:
            raise NamespacesUnavailable("no free /24 in 10.213.0.0/16")
        self.gateway = f"{self.subnet}.1"
        self.bridge = f"{self.prefix}br"
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._links.append(self.bridge)
            _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
        except NamespacesUnavailable:
            self.close()  # the caller has no object to close yet
            raise

    def add_host(self, label: str) -> Host:
        """A new namespace `<prefix>-<label>` at the next address, joined to the bridge."""
        number = len(self.hosts)
        namespace = f"{self.prefix}-{label}"
        outer, inner = f"{self.prefix}h{number}", f"{self.prefix}v{number}"
        _ip("netns", "add", namespace)
        self._namespaces.append(namespace)
        _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self._links.append(outer)
        _ip("link", "set", inner, "netns", namespace)
        _ip("link", "set", outer, "master", self.bridge)
        _ip("link", "set", outer, "up")
        address = f"{self.subnet}.{10 + number}"
        _ip("-n", namespace, "link", "set", "lo", "up")
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", inner)
        _ip("-n", namespace, "link", "set", inner, "up")
        host = Host(namespace, address, outer)
        self.hosts.append(host)
        return host

    def cut(self, host: Host) -> None:
        _ip("link", "set", host.link, "down")

    def heal(self, host: Host) -> None:
        _ip("link", "set", host.link, "up")

    def close(self) -> list[str]:
        """Deletes every link and namespace this network made, in reverse; returns what could
        not be deleted (empty when all went). Stop the processes inside first: a namespace
        with a live process in it outlives its name."""
        failures = []
        for link in reversed(self._links):
            try:
                _ip("link", "del", link)
            except NamespacesUnavailable as exc:
                failures.append(str(exc))
        for namespace in reversed(self._namespaces):
            try:
                _ip("netns", "del", namespace)
            except NamespacesUnavailable as exc:
                failures.append(str(exc))
        self._links.clear()
        self._namespaces.clear()
        return failures


def start_server_in(
    host: Host, args: Sequence[str], log_path: Path, *, timeout_s: float = 30.0
) -> ServerProcess:
    """`pocketmq.testing.start_server_process`, run inside `host`'s namespace."""
    return start_server_process(args, log_path, timeout_s=timeout_s, command_prefix=host.argv([]))
