"""The Go conformance driver (`tests/interop/go`), built on the official Go client
`github.com/apache/rocketmq-client-go/v2`, and how to run it.

The binary is built once into the reference cache (see `reference.CACHE`), under a folder named
after a digest of the module's sources, with Go's module and build caches beside it, so that a
second run, or a CI job restoring that cache, starts at once. A failed fetch or build raises
`ReferenceUnavailable` naming the command to retry; it is never a skip.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.conformance.reference import CACHE, ROOT, ReferenceUnavailable

GO_DIR = ROOT / "tests" / "interop" / "go"
GO5_DIR = ROOT / "tests" / "interop" / "go5"
"""The gRPC driver on the official 5.x Go client (rocketmq-clients/golang/v5)."""
GO_CACHE = CACHE / "go"
# The first build fetches the client and its dependencies and compiles them all.
BUILD_TIMEOUT_S = 900


def _go_env() -> dict[str, str]:
    return dict(
        os.environ,
        GOPATH=str(GO_CACHE / "path"),
        GOMODCACHE=str(GO_CACHE / "mod"),
        GOCACHE=str(GO_CACHE / "build"),
    )


def _sources_digest(module: Path) -> str:
    digest = hashlib.sha256()
    for path in [module / "go.mod", module / "go.sum", *sorted(module.glob("*.go"))]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def go_driver(module: Path = GO_DIR) -> Path:
    """The driver binary of `module` (the 4.x client's by default), built on first use.

    Returns:
        The path of the executable, shared by every test of the session.

    Raises:
        ReferenceUnavailable: `go` is missing or the fetch or build failed; the message holds
            the command to run by hand.
    """
    target = CACHE / f"{module.name}-driver-{_sources_digest(module)}"
    binary = target / "driver"
    if (target / ".complete").exists():
        return binary
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    command = ["go", "build", "-o", str(binary), "."]
    retry = (
        f"cd {module} && GOPATH={GO_CACHE / 'path'} GOMODCACHE={GO_CACHE / 'mod'} "
        f"GOCACHE={GO_CACHE / 'build'} {' '.join(command)}"
    )
    try:
        done = subprocess.run(
            command,
            cwd=module,
            env=_go_env(),
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReferenceUnavailable(
            f"building the Go driver failed ({exc}); retry: {retry}"
        ) from None
    if done.returncode:
        raise ReferenceUnavailable(
            f"building the Go driver failed; retry: {retry}\n{done.stderr[-3000:]}"
        )
    (target / ".complete").touch()
    return binary


def run_go_driver(binary: Path, args: list[str], timeout_s: float = 120) -> dict[str, Any]:
    """Runs one scenario; returns the JSON transcript it prints as its last stdout line.

    Args:
        binary: from `go_driver()`.
        args: the scenario's sub-command and its arguments (NAMESRV TOPIC GROUP COUNT).
        timeout_s: the driver bounds its own waits; this is the backstop.

    Raises:
        AssertionError: the driver failed or printed no transcript; its stderr is attached.
    """
    with tempfile.TemporaryDirectory(prefix="go-driver-") as offsets:
        # Broadcasting consumers keep offsets in local files named after the client and the
        # group; a fresh folder per run keeps one server's offsets from leaking into the next.
        env = dict(os.environ, **{"rocketmq.client.localOffsetStoreDir": offsets})
        command = [str(binary), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise AssertionError(
            f"go driver {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    transcript: dict[str, Any] = json.loads(lines[-1])
    return transcript
