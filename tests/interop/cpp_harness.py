"""The unmodified official RocketMQ C++ client (PyPI `rocketmq==0.4.4`) in a virtualenv of its own.

It installs as `import rocketmq`, as the 5.x Python client does, so it cannot share our
environment: the first test that needs it creates a virtualenv in a cache under
`~/.cache/pocketmq-interop/` (override with `POCKETMQ_INTEROP_CACHE`), kept between runs and
never in the repository, and drives the client through the scripts in `scripts/`, one
subprocess each, reading JSON lines from their stdout. The interop and the conformance tests
both start their drivers here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("POCKETMQ_INTEROP_CACHE", Path.home() / ".cache" / "pocketmq-interop"))
VENV = CACHE / "cpp"
SCRIPTS = Path(__file__).with_name("scripts")
CPP_CLIENT = "rocketmq==0.4.4"


def ensure_cpp_client() -> Path:
    """The C++ client's Python, installed on first use."""
    return ensure_client_venv(VENV, CPP_CLIENT, "import rocketmq.client")


def ensure_client_venv(venv: Path, requirement: str, check_code: str) -> Path:
    """A virtualenv at `venv` holding `requirement` (installed on first use, then kept); its
    Python. `check_code` must run in it once installed."""
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists():
        return python
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", requirement],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode:
        raise RuntimeError(f"could not install {requirement}: {install.stderr[-2000:]}")
    check = subprocess.run([str(python), "-c", check_code], capture_output=True, text=True)
    if check.returncode:
        raise RuntimeError(f"{requirement} installed but does not load: {check.stderr[-2000:]}")
    stamp.touch()
    return python


class Driver:
    """One script of `scripts/` running in the C++ client's environment."""

    def __init__(
        self,
        python: Path,
        script: str,
        args: list[str],
        log_dir: Path,
        command: list[str] | None = None,
    ) -> None:
        """Runs `python scripts/<script> args`, or `command args` when given (a Java main)."""
        self.name = script
        self.stderr_path = log_dir / f"{script}-{time.monotonic_ns()}.stderr"
        home = log_dir / f"home-{time.monotonic_ns()}"
        home.mkdir()
        # Its own HOME: the C++ client keeps logs and broadcasting offsets there, which must
        # not carry over between tests; NAMESRV_ADDR would override nothing but confuse.
        environment = {
            key: value
            for key, value in os.environ.items()
            if key not in ("NAMESRV_ADDR", "ROCKETMQ_HOME", "PYTHONPATH", "VIRTUAL_ENV")
        }
        environment["HOME"] = str(home)
        if command is None:
            command = [str(python), "-u", str(SCRIPTS / script)]
        self.process = subprocess.Popen(
            [*command, *args],
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("w"),
            text=True,
            cwd=log_dir,  # the C++ client writes its own log files next to it
        )
        self.lines: list[dict[str, Any]] = []
        self.unparsed: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
                # The C++ library may print a line of its own; a message line that fails to
                # parse is a driver bug, and the report of a missing message shows it.
                self.unparsed.append(raw.rstrip("\n")[:300])
                continue
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, key: str, timeout_s: float) -> dict[str, Any]:
        """The first output line holding `key`; fails with the driver's stderr after timeout."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for line in self.lines:
                    if key in line:
                        return line
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (
                    self.process.poll() is not None and not self._reader.is_alive()
                ):
                    raise AssertionError(
                        f"{self.name}: no {key!r} line within {timeout_s} s "
                        f"(exit {self.process.poll()}); stderr:\n{self.stderr()}"
                    )
                self._changed.wait(min(remaining, 0.5))

    def messages(self) -> list[dict[str, Any]]:
        return self.messages_by("body")

    def messages_by(self, key: str) -> list[dict[str, Any]]:
        """The output lines holding `key` (a driver's per-message lines)."""
        with self._changed:
            return [line for line in self.lines if key in line]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def finish(self, timeout_s: float = 60, *, stop: bool = True) -> dict[str, Any]:
        """Waits for the summary line and the exit; with `stop`, first closes stdin, which
        tells a consumer to stop now rather than when it has its expected count."""
        if stop and self.process.stdin and not self.process.stdin.closed:
            self.process.stdin.close()
        summary = self.wait_for("summary", timeout_s)
        self.process.wait(timeout=timeout_s)
        return summary

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)


@contextmanager
def drivers(python: Path, log_dir: Path) -> Iterator[Any]:
    """Yields `start("cpp_produce.py", [args])`, which starts a driver; all are killed after."""
    started: list[Driver] = []
    log_dir.mkdir(parents=True, exist_ok=True)

    def start(script: str, args: list[str], command: list[str] | None = None) -> Driver:
        driver = Driver(python, script, args, log_dir, command)
        started.append(driver)
        return driver

    try:
        yield start
    finally:
        for driver in started:
            driver.kill()


def bodies(*consumers: Driver) -> list[str]:
    return [line["body"] for consumer in consumers for line in consumer.messages()]


class MessagesMissingError(AssertionError):
    """Consumers did not receive every expected message in time."""


def queue_offsets(consumer: Driver) -> dict[int, list[int]]:
    offsets: dict[int, list[int]] = {}
    for line in consumer.messages():
        offsets.setdefault(line["queue_id"], []).append(line["queue_offset"])
    return offsets


def wait_for_bodies(expected: set[str], timeout_s: float, *consumers: Driver) -> None:
    """Waits until the consumers together received every body in `expected`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if set(bodies(*consumers)) >= expected:
            return
        time.sleep(0.2)
    missing = sorted(expected - set(bodies(*consumers)))
    placement = [
        {q: (min(o), max(o), len(o)) for q, o in sorted(queue_offsets(c).items())}
        for c in consumers
    ]
    raise MessagesMissingError(
        f"{len(missing)} of {len(expected)} messages not received in {timeout_s} s: "
        f"{missing[:20]}; per consumer, queue -> (first, last, count) offsets: {placement}; "
        f"output lines that were not JSON: {[c.unparsed[:5] for c in consumers]}"
    )
