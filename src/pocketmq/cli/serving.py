"""Shared plumbing of the server commands: config files, signals, the ready line."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from pocketmq.common.config import ConfigError, apply_properties, load_properties

log = logging.getLogger("pocketmq")


def apply_config_file(path: str | None, *configs: Any) -> None:
    """Applies a `.properties` file to each settings object; warns about unknown keys.

    Raises:
        ConfigError: a value of the wrong kind, or an unreadable file.
    """
    if not path:
        return
    properties = load_properties(path)
    unknown = set(properties)
    for config in configs:
        unknown &= set(apply_properties(config, properties))
    if unknown:
        log.warning("%s: keys not used by pocketmq: %s", path, ", ".join(sorted(unknown)))


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


def run_server(main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Runs a server's main coroutine; a configuration error exits with status 2."""
    from pocketmq.runtime import event_loop

    try:
        event_loop.run(main())
    except ConfigError as exc:
        log.error("configuration error: %s", exc)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
