"""`pocketmq up`: a NameServer and one broker in one process, on embedded defaults.

Cluster `DefaultCluster`, broker `broker-a`, data under `./.pocketmq` (or `--data-dir`),
`--namesrv-port` / `--broker-port` to move them (0 picks free ports), `-c broker.properties`
for anything else (for example `flushDiskType=SYNC_FLUSH`). Unlike a plain broker, timer
messages may be recalled (`recallMessageEnable=true`). `--slaves N` adds N slaves of broker-a
in the same process (`--sync` makes the master a SYNC_MASTER): a local Master/Slave pair. One
"ready" line gives the addresses; Ctrl-C stops everything cleanly.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

from pocketmq.broker.config import BrokerConfig, BrokerRole
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
    parser.add_argument(
        "--slaves", type=int, default=0, help="also run this many slaves of broker-a (0)"
    )
    parser.add_argument(
        "--sync", action="store_true", help="with slaves: SYNC_MASTER (a send waits for a slave)"
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
        if args.slaves < 0:
            log.error("--slaves must be 0 or more, got %d", args.slaves)
            raise SystemExit(2)
        if args.slaves and args.sync:
            broker_config.broker_role = BrokerRole.SYNC_MASTER
        namesrv = NamesrvServer(namesrv_config)
        brokers: list[BrokerServer] = []

        async def start() -> str:
            port = await namesrv.start()
            broker_config.namesrv_addr = f"127.0.0.1:{port}"
            configs = [(broker_config, store_config)]
            configs += [
                _slave_configs(broker_config, store_config, i, args.data_dir)
                for i in range(1, args.slaves + 1)
            ]
            for config, store in configs:
                try:
                    broker = BrokerServer(config, store)
                except BrokerConfigError as exc:
                    log.error("%s", exc)
                    raise SystemExit(2) from exc
                await broker.start()
                brokers.append(broker)
            slaves = "".join(f", slave {b.config.broker_id} {b.address}" for b in brokers[1:])
            return (
                f"up: NameServer 127.0.0.1:{port}, broker {broker_config.broker_name} "
                f"{brokers[0].address} ({broker_config.broker_role.value}){slaves}, data in "
                f"{args.data_dir}; Ctrl-C stops; ready at 127.0.0.1:{port}"
            )

        async def stop() -> None:
            for broker in reversed(brokers):
                await broker.stop()
            await namesrv.stop()

        await serve_until_signalled(start, stop)

    return run_server(main)


def _slave_configs(
    master: BrokerConfig, master_store: MessageStoreConfig, broker_id: int, data_dir: str
) -> tuple[BrokerConfig, MessageStoreConfig]:
    """Slave `broker_id` of the master: its own ports (10 apart from the master's, or free
    ones) and data directory, the master's other settings."""
    config = replace(
        master,
        broker_id=broker_id,
        broker_role=BrokerRole.SLAVE,
        listen_port=master.listen_port + 10 * broker_id if master.listen_port else 0,
    )
    store = replace(
        master_store,
        store_path_root_dir=str(Path(data_dir) / f"{master.broker_name}-s{broker_id}"),
        ha_listen_port=-1,
    )
    return config, store
