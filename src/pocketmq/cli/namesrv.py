"""`pocketmq namesrv [-c namesrv.properties] [--port N]`, as RocketMQ's `mqnamesrv`; with
`enableControllerInNamesrv=true` the file also configures a controller replica that runs in
the same process (RocketMQ's embedded controller)."""

from __future__ import annotations

import argparse
import socket
from typing import Any

from pocketmq.cli.controller import build_controller
from pocketmq.cli.serving import (
    apply_config_file,
    bind_failure,
    process_metrics,
    run_server,
    serve_until_signalled,
    start_metrics,
)
from pocketmq.controller.config import ControllerConfig
from pocketmq.namesrv.server import NamesrvConfig, NamesrvServer
from pocketmq.observability.metrics_config import MetricsConfig
from pocketmq.observability.rpc import RpcLatency


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "namesrv", help="start a NameServer (RocketMQ's mqnamesrv)"
    )
    parser.add_argument("-c", "--config", help="namesrv.properties with RocketMQ key names")
    parser.add_argument("--port", type=int, help="listenPort (default 9876; 0 picks a free port)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        config = NamesrvConfig()
        controller_config = ControllerConfig()
        metrics_config = MetricsConfig()
        apply_config_file(args.config, config, controller_config, metrics_config)
        if args.port is not None:
            config.listen_port = args.port
        server = NamesrvServer(config)
        host = "127.0.0.1" if config.bind_address == "0.0.0.0" else config.bind_address
        source, exporter = process_metrics(
            metrics_config, "namesrv-meter", "nameserver", "", socket.gethostname(), host
        )
        server.server.observe = RpcLatency(source)
        controller = (
            build_controller(controller_config) if config.enable_controller_in_namesrv else None
        )

        async def start() -> str:
            try:
                port = await server.start()
            except OSError as exc:
                fix = "--port N or listenPort=N (0 picks a free port)"
                raise bind_failure(exc, "NameServer port", config.listen_port, fix) from None
            if controller is not None:
                try:
                    await controller.start()
                except OSError as exc:
                    await server.stop()
                    raise bind_failure(exc, "controller port", 0, "controllerDLegerPeers") from None
                with_metrics = await start_metrics(exporter)
                return (
                    f"namesrv with controller {controller_config.self_id}{with_metrics} ready at "
                    f"127.0.0.1:{port}"
                )
            with_metrics = await start_metrics(exporter)
            return f"namesrv{with_metrics} ready at 127.0.0.1:{port}"

        async def stop() -> None:
            await exporter.stop()
            if controller is not None:
                await controller.stop()
            await server.stop()

        await serve_until_signalled(start, stop)

    return run_server(main, "pocketmq namesrv")
