"""Starting `pocketmq` server commands as subprocesses and waiting until they serve.

A server prints one ready line (`pocketmq <what> ready at <ip:port>`) once it accepts requests;
`start_server_process` waits for it (never a fixed sleep), with a deadline, and on failure
raises with the process's log so the reason is in the test report.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.runtime.ports import free_port_run
from pocketmq.testing.waiting import wait_until

_READY = re.compile(r"^pocketmq .* ready at (\S+)$")


@dataclass
class ServerProcess:
    """A running server subprocess and the address it announced."""

    args: list[str]
    process: subprocess.Popen[str]
    address: str
    log_path: Path
    _reader: threading.Thread | None = field(default=None, repr=False)
    ready_line: str = ""
    """The whole ready line (`pocketmq up` names its proxy's port there too)."""

    def named_address(self, what: str) -> str:
        """The address the ready line names after `what` (`proxy` in `... proxy 127.0.0.1:8081`)."""
        match = re.search(rf"\b{re.escape(what)} (\S+?:\d+)", self.ready_line)
        if match is None:
            raise LookupError(f"no {what} address in the ready line {self.ready_line!r}")
        return match.group(1)

    @property
    def port(self) -> int:
        return int(self.address.rpartition(":")[2])

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown steps run."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._close_output()

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM and wait for a clean exit (SIGKILL after `timeout_s`); returns the code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self._close_output()
        return self.process.returncode

    def _close_output(self) -> None:
        """Lets the log copier reach the end of the output, then closes the pipe."""
        if self._reader is not None:
            self._reader.join(timeout=10)
        if self.process.stdout is not None and (
            self._reader is None or not self._reader.is_alive()
        ):
            self.process.stdout.close()


def start_server_process(
    args: Sequence[str],
    log_path: Path,
    *,
    timeout_s: float = 30.0,
    command_prefix: Sequence[str] = (),
) -> ServerProcess:
    """Runs `pocketmq <args>` and returns once it printed its ready line. `command_prefix`
    goes before the interpreter (`ip netns exec NAME` runs it in a network namespace).

    Raises:
        RuntimeError: the process exited or did not get ready within `timeout_s`; the message
            carries its log.
    """
    command = [*command_prefix, sys.executable, "-m", "pocketmq.cli.main", *args]
    # Both the child's stderr and the stdout copier append: a plain "w" descriptor keeps its
    # own offset and would write its next log line over the copied ready line.
    log_path.write_text("")
    log_file = log_path.open("a")
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=log_file,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    log_file.close()
    ready = threading.Event()
    found: list[str] = []

    def read_stdout() -> None:
        assert process.stdout is not None
        with log_path.open("a") as out:
            for line in process.stdout:
                out.write(line)
                out.flush()
                match = _READY.match(line.strip())
                if match and not ready.is_set():
                    found.extend((match.group(1), line.strip()))
                    ready.set()
        ready.set()

    reader = threading.Thread(target=read_stdout, daemon=True)
    reader.start()
    if not ready.wait(timeout_s) or not found:
        process.kill()
        process.wait(timeout=30)
        reader.join(timeout=10)
        if process.stdout is not None and not reader.is_alive():
            process.stdout.close()
        raise RuntimeError(
            f"pocketmq {' '.join(args)} did not get ready within {timeout_s} s "
            f"(exit code {process.returncode}); its log:\n{log_path.read_text(errors='replace')}"
        )
    return ServerProcess(list(args), process, found[0], log_path, reader, ready_line=found[1])


def wait_ports_free(*ports: int, timeout_s: float = 30.0) -> None:
    """Returns once each port of 127.0.0.1 can be bound again, as a server restarted on its
    old ports binds them (SO_REUSEADDR: the killed process's TIME_WAIT sockets do not count).
    After a kill, another process's outgoing connection can hold one of them for a while."""

    def free() -> bool:
        for port in ports:
            with socket.socket() as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    return False
        return True

    wait_until(free, f"ports {', '.join(map(str, ports))} free again", timeout_s=timeout_s)


def free_port() -> int:
    """A free port of 127.0.0.1 for a server to be started on (see `pocketmq.runtime.ports`)."""
    return free_port_run(1)


def free_port_pair() -> int:
    """A port p of 127.0.0.1 with p and p + 1 free: a broker's, and its HA service's."""
    return free_port_run(2)


def start_up_process(
    data_dir: Path,
    log_path: Path,
    *extra_args: str,
    timeout_s: float = 30.0,
    command_prefix: Sequence[str] = (),
) -> ServerProcess:
    """`pocketmq up` (a NameServer and a broker) on free loopback ports with its data in
    `data_dir`; `extra_args` go after, e.g. `-c broker.properties`. `.address` is the
    NameServer's. `command_prefix` as for `start_server_process`."""
    return start_server_process(
        [
            *("up", "--namesrv-port", "0", "--broker-port", "0", "--data-dir", str(data_dir)),
            *extra_args,
        ],
        log_path,
        timeout_s=timeout_s,
        command_prefix=command_prefix,
    )
