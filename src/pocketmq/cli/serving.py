"""Shared plumbing of the server commands: config files, signals, the ready line.

A startup problem an operator can fix (a bad setting, a port in use, a data directory that
cannot be written) ends the command with one line on stderr that says what to do, never with a
traceback: the commands raise `StartupError` (or `ConfigError`) and `run_server` prints it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pocketmq.common.config import ConfigError, apply_properties, load_properties
from pocketmq.observability.exporter import MetricsExporter, source_for
from pocketmq.observability.metrics_config import MetricsConfig
from pocketmq.observability.registry import MetricsHub, MetricSource
from pocketmq.remoting import tls

log = logging.getLogger("pocketmq")

_BIND_ADDRESS_PORT = re.compile(r"\(\s*'[^']*',\s*(\d+)\s*\)")


class StartupError(Exception):
    """A server cannot start for a reason the operator can fix; the message says how.
    `status` is the exit status: 2 for a setting that can never work, 1 otherwise."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def bind_failure(
    error: OSError, what: str, port: int, fix: str, second: tuple[str, str] | None = None
) -> StartupError:
    """The one-line startup error for a listener that could not be opened.

    Args:
        error: what `start` raised.
        what: which listener, e.g. "NameServer port".
        port: the port that was asked for.
        fix: how to move it, e.g. "--namesrv-port N (0 picks a free port)".
        second: what a server's other listener is and how to move it, when the failed port is
            not `port` (a broker's HA port, moved with `fix`, unless named here).
    """
    described = _port_in_use(error, what, port, fix, second)
    if described is None:
        described = f"{what} {port}: cannot start ({error.strerror or error})"
    return StartupError(described)


def _port_in_use(
    error: OSError, what: str, port: int, fix: str, second: tuple[str, str] | None
) -> str | None:
    """The one line for a port already in use (see `bind_failure`), or None for other errors."""
    if error.errno != errno.EADDRINUSE and "address already in use" not in str(error):
        return None
    found = _BIND_ADDRESS_PORT.search(str(error))
    actual = int(found.group(1)) if found else port
    if port and actual != port:  # a broker also listens on listenPort + 1 for its slaves
        other, other_fix = second or ("HA port", fix)
        in_use = f"its {other} {actual} is already in use"
        return f"{what} {port}: {in_use}; choose another with {other_fix}"
    return f"{what} {actual} is already in use; choose another with {fix}"


def check_data_dir(path: str, fix: str) -> None:
    """Creates `path` if needed and proves a file can be written there.

    Raises:
        StartupError: naming the directory, the OS's reason and `fix`.
    """
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise StartupError(f"data directory {path} is not writable ({reason}); {fix}") from None


def apply_config_file(path: str | None, *configs: Any) -> dict[str, str]:
    """Applies a `.properties` file to each settings object; warns about unknown keys.

    Returns:
        The file's properties (empty without a file), so a command can tell which settings
        the file chose.

    Raises:
        ConfigError: a value of the wrong kind or out of range, an unreadable file, or TLS
            settings that cannot work.
    """
    properties = load_properties(path) if path else {}
    unknown = {name for name in properties if not name.startswith("tls.")}
    for config in configs:
        unknown &= set(apply_properties(config, properties))
    # Every listener and outgoing connection of the process follows the file's `tls.*` keys.
    tls.configure(tls.TlsConfig.from_properties(properties))
    if unknown:
        log.warning("%s: keys not used by pocketmq: %s", path, ", ".join(sorted(unknown)))
    return properties


def process_metrics(
    config: MetricsConfig, scope: str, node_type: str, cluster: str, node_id: str, host: str
) -> tuple[MetricSource, MetricsExporter]:
    """A server's metric source (labelled as RocketMQ labels that kind of node) and the
    exporter `config` chooses for it; `host` serves Prometheus when the config names none."""
    hub = MetricsHub()
    source = source_for(config, scope, node_type, cluster, node_id)
    hub.add(source)
    return source, MetricsExporter(config, hub, host)


async def start_metrics(exporter: MetricsExporter) -> str:
    """Starts a server's metrics exporter; returns ` (metrics host:port)` for its ready line
    when it serves Prometheus, else "".

    Raises:
        StartupError: the Prometheus port cannot be bound.
    """
    try:
        await exporter.start()
    except OSError as exc:
        port = exporter.config.prom_port
        fix = "metricsPromExporterPort=N (0 picks a free port)"
        raise bind_failure(exc, "metrics port", port, fix) from None
    endpoint = exporter.endpoint
    return f" (metrics {endpoint.host}:{endpoint.port})" if endpoint is not None else ""


def announce_ready(what: str) -> None:
    """The one line that says a server is up; tools and tests wait for it."""
    sys.stdout.write(f"pocketmq {what}\n")
    sys.stdout.flush()


async def serve_until_signalled(
    start: Callable[[], Awaitable[str]], stop: Callable[[], Awaitable[None]]
) -> None:
    """Starts a server, prints its ready line, and stops it on SIGINT or SIGTERM."""
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stopping.set)
    try:
        announce_ready(await start())
        await stopping.wait()
        log.info("stopping")
    finally:
        await stop()


def run_server(main: Callable[[], Coroutine[Any, Any, None]], name: str = "pocketmq") -> int:
    """Runs a server's main coroutine.

    A configuration error exits with status 2, another startup problem with status 1; either
    prints one line, `<name>: <what is wrong and what to do>`, on stderr.
    """
    from pocketmq.runtime import event_loop
    from pocketmq.runtime.memory import keep_freed_memory

    keep_freed_memory()  # servers decode and build frames of up to MiB a request
    try:
        event_loop.run(main())
    except ConfigError as exc:
        _say(name, f"configuration error: {exc}")
        return 2
    except StartupError as exc:
        _say(name, str(exc))
        return exc.status
    except KeyboardInterrupt:
        pass
    return 0


def _say(name: str, line: str) -> None:
    sys.stdout.flush()
    sys.stderr.write(f"{name}: {line}\n")
    sys.stderr.flush()
