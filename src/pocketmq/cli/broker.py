"""`pocketmq broker -c broker.properties [-n host:port;host:port]`, as RocketMQ's `mqbroker`."""

from __future__ import annotations

import argparse
from typing import Any

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.server import BrokerConfigError, BrokerServer, advertised_ip
from pocketmq.cli.serving import (
    StartupError,
    apply_config_file,
    bind_failure,
    check_data_dir,
    process_metrics,
    run_server,
    serve_until_signalled,
    start_metrics,
)
from pocketmq.observability.metrics_config import MetricsConfig
from pocketmq.store.config import MessageStoreConfig


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "broker", help="start a broker (RocketMQ's mqbroker)"
    )
    parser.add_argument("-c", "--config", help="broker.properties with RocketMQ key names")
    parser.add_argument("-n", "--namesrv", help="NameServer addresses, host:port;host:port")
    parser.add_argument("--port", type=int, help="listenPort (0 picks a free port)")
    parser.add_argument("--data-dir", help="storePathRootDir")
    parser.set_defaults(run=run)


def broker_bind_failure(error: OSError, server: BrokerServer, what: str, fix: str) -> StartupError:
    """`bind_failure` for a broker: a DLedger broker's other listener is its DLedger port, which
    its own entry in dLegerPeers sets."""
    settings = server.dledger_settings
    second = None
    if settings is not None:
        second = ("DLedger port", f"dLegerPeers (the entry of {settings.self_id})")
    return bind_failure(error, what, server.config.listen_port, fix, second)


def build_configs(
    args: argparse.Namespace,
) -> tuple[BrokerConfig, MessageStoreConfig, MetricsConfig]:
    """The broker's settings: defaults, then the file, then the flags."""
    broker = BrokerConfig()
    store = MessageStoreConfig()
    metrics = MetricsConfig()
    apply_config_file(args.config, broker, store, metrics)
    if args.namesrv is not None:
        broker.namesrv_addr = args.namesrv
    if args.port is not None:
        broker.listen_port = args.port
    if args.data_dir is not None:
        store.store_path_root_dir = args.data_dir
    return broker, store, metrics


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        broker_config, store_config, metrics_config = build_configs(args)
        fix_dir = "--data-dir" if args.data_dir is not None else "storePathRootDir (or --data-dir)"
        check_data_dir(store_config.store_path_root_dir, f"choose another with {fix_dir}")
        try:
            source, exporter = process_metrics(
                metrics_config,
                "broker-meter",
                "broker",
                broker_config.broker_cluster_name,
                broker_config.broker_name,
                advertised_ip(broker_config),
            )
            server = BrokerServer(broker_config, store_config, metrics=source)
        except BrokerConfigError as exc:
            raise StartupError(str(exc), status=2) from None

        async def start() -> str:
            try:
                await server.start()
            except OSError as exc:
                fix = "--port N or listenPort=N (0 picks a free port)"
                raise broker_bind_failure(exc, server, "broker port", fix) from None
            metrics = await start_metrics(exporter)
            return f"broker {broker_config.broker_name}{metrics} ready at {server.address}"

        async def stop() -> None:
            await exporter.stop()
            await server.stop()

        await serve_until_signalled(start, stop)

    return run_server(main, "pocketmq broker")
