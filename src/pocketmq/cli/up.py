"""`pocketmq up`: the all-in-one cluster on embedded defaults.

Today the all-in-one process runs the storage engine (recovered from `--data-dir`); the
NameServer and the broker's network side join it as they are built. It says so at start.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from pathlib import Path
from typing import Any

from pocketmq.common.config import ConfigError, apply_properties, load_properties
from pocketmq.runtime import event_loop
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

log = logging.getLogger("pocketmq.up")


def register(commands: Any) -> None:
    """Adds `up` to the top-level sub-command set."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "up", help="start the all-in-one cluster on embedded defaults"
    )
    parser.add_argument("--data-dir", default=".pocketmq", help="where data lives (./.pocketmq)")
    parser.add_argument(
        "-c", "--config", help="a broker.properties file with RocketMQ keys for anything else"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = MessageStoreConfig(store_path_root_dir=str(Path(args.data_dir) / "store"))
    if args.config:
        try:
            unknown = apply_properties(config, load_properties(args.config))
        except ConfigError as exc:
            log.error("%s: %s", args.config, exc)
            return 2
        if unknown:
            log.info("keys not used by the parts running today: %s", ", ".join(sorted(unknown)))
    with contextlib.suppress(KeyboardInterrupt):
        event_loop.run(_serve(config))
    return 0


async def _serve(config: MessageStoreConfig) -> None:
    store = MessageStore(config)
    result = store.load()
    await store.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    log.info(
        "ready: message store at %s (%s recovery, commit log %d bytes). The NameServer and "
        "broker network side are not part of this build yet; Ctrl-C stops.",
        config.store_path_root_dir,
        "abnormal" if result.abnormal else "normal",
        store.max_phy_offset,
    )
    try:
        await stop.wait()
    finally:
        log.info("stopping")
        await store.shutdown()
