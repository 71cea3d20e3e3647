"""`pocketmq up`: a NameServer and one broker in one process, on embedded defaults.

Cluster `DefaultCluster`, broker `broker-a`, data under `./.pocketmq` (or `--data-dir`),
`--namesrv-port` / `--broker-port` to move them (0 picks free ports), `-c broker.properties`
for anything else (for example `flushDiskType=SYNC_FLUSH`). Unlike a plain broker, timer
messages may be recalled (`recallMessageEnable=true`). One "ready" line gives the
addresses; Ctrl-C stops both cleanly.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.server import BrokerConfigError, BrokerServer
from pocketmq.cli.serving import apply_config_file, run_server, serve_until_signalled
from pocketmq.namesrv.server import NamesrvConfig, NamesrvServer
from pocketmq.store.config import MessageStoreConfig

log = logging.getLogger("pocketmq.up")


def register(commands: Any) -> None:
    """Adds `up` to the top-level sub-command set."""
    parser: argparse.ArgumentParser = commands.add_parser(
        "up", help="start a NameServer and a broker in one process (embedded defaults)"
    )
    parser.add_argument("--data-dir", default=".pocketmq", help="where data lives (./.pocketmq)")
    parser.add_argument("--namesrv-port", type=int, default=9876, help="0 picks a free port")
    parser.add_argument("--broker-port", type=int, default=10911, help="0 picks a free port")
    parser.add_argument(
        "-c", "--config", help="a broker.properties file with RocketMQ keys for anything else"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        namesrv_config = NamesrvConfig(
            listen_port=args.namesrv_port,
            bind_address="127.0.0.1",
            kv_config_path=str(Path(args.data_dir) / "namesrv" / "kvConfig.json"),
        )
        # A development cluster lets producers recall timer messages; a config file may say no.
        broker_config = BrokerConfig(
            bind_address="127.0.0.1", broker_ip1="127.0.0.1", recall_message_enable=True
        )
        store_config = MessageStoreConfig()
        apply_config_file(args.config, broker_config, store_config)
        broker_config.listen_port = args.broker_port
        store_config.store_path_root_dir = str(Path(args.data_dir) / "broker-a")
        namesrv = NamesrvServer(namesrv_config)
        broker: BrokerServer | None = None

        async def start() -> str:
            nonlocal broker
            port = await namesrv.start()
            broker_config.namesrv_addr = f"127.0.0.1:{port}"
            try:
                broker = BrokerServer(broker_config, store_config)
            except BrokerConfigError as exc:
                log.error("%s", exc)
                raise SystemExit(2) from exc
            await broker.start()
            return (
                f"up: NameServer 127.0.0.1:{port}, broker {broker_config.broker_name} "
                f"{broker.address}, data in {args.data_dir}; Ctrl-C stops; ready at "
                f"127.0.0.1:{port}"
            )

        async def stop() -> None:
            if broker is not None:
                await broker.stop()
            await namesrv.stop()

        await serve_until_signalled(start, stop)

    return run_server(main)
