"""The unmodified official RocketMQ C++ client (PyPI `rocketmq==0.4.4`) in a virtualenv of its own.

It installs as `import rocketmq`, as the 5.x Python client does, so it cannot share our
environment: the first interop test creates `.venv-interop/cpp` at the repository root (kept
between runs) and drives the client through the scripts in `scripts/`, one subprocess each,
reading JSON lines from their stdout.
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
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-interop" / "cpp"
SCRIPTS = Path(__file__).with_name("scripts")
CPP_CLIENT = "rocketmq==0.4.4"


def ensure_cpp_client() -> Path:
    """The C++ client's Python, installed on first use."""
    python = VENV / "bin" / "python"
    stamp = VENV / ".installed"
    if stamp.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", CPP_CLIENT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if install.returncode:
        raise RuntimeError(f"could not install {CPP_CLIENT}: {install.stderr[-2000:]}")
    check = subprocess.run(
        [str(python), "-c", "import rocketmq.client"], capture_output=True, text=True
    )
    if check.returncode:
        raise RuntimeError(f"{CPP_CLIENT} installed but does not load: {check.stderr[-2000:]}")
    stamp.touch()
    return python


class Driver:
    """One script of `scripts/` running in the C++ client's environment."""

    def __init__(self, python: Path, script: str, args: list[str], log_dir: Path) -> None:
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
        self.process = subprocess.Popen(
            [str(python), "-u", str(SCRIPTS / script), *args],
            env=environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("w"),
            text=True,
            cwd=log_dir,  # the C++ client writes its own log files next to it
        )
        self.lines: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            try:
                line = json.loads(raw)
            except ValueError:
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


@pytest.fixture(scope="session")
def cpp_python() -> Path:
    return ensure_cpp_client()


@pytest.fixture
def cpp(cpp_python: Path, tmp_path: Path) -> Iterator[Any]:
    """Starts drivers: `cpp("cpp_produce.py", [args])`; all are killed at the end."""
    started: list[Driver] = []
    log_dir = tmp_path / "cpp"
    log_dir.mkdir()

    def start(script: str, args: list[str]) -> Driver:
        driver = Driver(cpp_python, script, args, log_dir)
        started.append(driver)
        return driver

    yield start
    for driver in started:
        driver.kill()
