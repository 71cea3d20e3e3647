"""`pocketmq proxy`: the RocketMQ 5.x gRPC proxy in front of a cluster (cluster mode), as
RocketMQ's `mqproxy`: `-c rmq-proxy.json` (RocketMQ's keys), `-n` for the NameServers."""

from __future__ import annotations

import argparse
import os
from typing import Any

from pocketmq.cli.serving import (
    StartupError,
    bind_failure,
    process_metrics,
    run_server,
    serve_until_signalled,
    start_metrics,
)
from pocketmq.common.config import ConfigError, apply_properties
from pocketmq.observability import catalog
from pocketmq.observability.metrics_config import MetricsConfig
from pocketmq.proxy.config import ProxyConfig, read_proxy_file
from pocketmq.proxy.server import ProxyServer
from pocketmq.remoting import tls
from pocketmq.remoting.tls import TlsConfigError


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "proxy", help="start the 5.x gRPC proxy in front of a cluster"
    )
    parser.add_argument("-c", "--config", help="rmq-proxy.json (RocketMQ's proxy keys)")
    parser.add_argument("-n", "--namesrv", help="NameServers, separated by ';'")
    parser.add_argument("--grpc-port", type=int, help="grpcServerPort (0 picks a free port)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        config = ProxyConfig()
        metrics_config = MetricsConfig()
        properties = read_proxy_file(args.config) if args.config else {}
        apply_properties(config, properties)
        apply_properties(metrics_config, properties)
        # Its connections to brokers and NameServers follow the file's `tls.*` keys too.
        tls.configure(tls.TlsConfig.from_properties(properties))
        if args.namesrv:
            config.namesrv_addr = args.namesrv
        elif not config.namesrv_addr and os.environ.get("NAMESRV_ADDR"):
            config.namesrv_addr = os.environ["NAMESRV_ADDR"]
        if args.grpc_port is not None:
            config.grpc_server_port = args.grpc_port
        if not config.namesrv_addresses():
            raise ConfigError(
                "namesrvAddr", "", "set: pass -n host:9876, NAMESRV_ADDR, or namesrvAddr in -c"
            )
        server = ProxyServer(config)
        host = "127.0.0.1" if config.bind_address == "0.0.0.0" else config.bind_address
        source, exporter = process_metrics(
            metrics_config, "proxy-meter", "proxy", config.rocketmq_cluster_name, "proxy", host
        )
        source.observe(catalog.PROXY_UP, lambda: [(("cluster",), 1.0 if server.port else 0.0)])

        async def start() -> str:
            try:
                port = await server.start()
            except TlsConfigError as exc:
                raise StartupError(str(exc), status=2) from None
            except OSError as exc:
                raise bind_failure(
                    exc, "proxy gRPC port", config.grpc_server_port, "--grpc-port N"
                ) from None
            with_metrics = await start_metrics(exporter)
            return (
                f"proxy: gRPC {config.bind_address}:{port}{with_metrics} in front of NameServers "
                f"{config.namesrv_addr}; ready at 127.0.0.1:{port}"
            )

        async def stop() -> None:
            await exporter.stop()
            await server.stop()

        await serve_until_signalled(start, stop)

    return run_server(main, "pocketmq proxy")
