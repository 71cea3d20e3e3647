"""`pocketmq controller -c controller.conf`, as RocketMQ's `mqcontroller`: one replica of the
controller group, serving on its `controllerDLegerPeers` address (and `listenPort` if set)."""

from __future__ import annotations

import argparse
from typing import Any

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
from pocketmq.controller.config import ControllerConfig, ControllerConfigError
from pocketmq.controller.service import ControllerServer
from pocketmq.observability import catalog
from pocketmq.observability.metrics_config import MetricsConfig
from pocketmq.observability.rpc import RpcLatency


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "controller", help="start a controller replica (RocketMQ's mqcontroller)"
    )
    parser.add_argument("-c", "--config", help="controller.conf with RocketMQ key names")
    parser.set_defaults(run=run)


def build_controller(config: ControllerConfig) -> ControllerServer:
    """The replica `config` describes.

    Raises:
        StartupError: a setting that cannot work (status 2), or a store path that cannot be
            written.
    """
    try:
        config.node_settings()
    except ControllerConfigError as exc:
        raise StartupError(str(exc), status=2) from None
    check_data_dir(str(config.store_path()), "set controllerStorePath to a writable directory")
    return ControllerServer(config)


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        config = ControllerConfig()
        metrics_config = MetricsConfig()
        apply_config_file(args.config, config, metrics_config)
        server = build_controller(config)
        host = server.address.rpartition(":")[0] or "127.0.0.1"
        source, exporter = process_metrics(
            metrics_config, "controller", "controller", "", config.self_id, host
        )
        server.node.server.observe = RpcLatency(source)
        source.observe(catalog.CONTROLLER_ELECTIONS, lambda: list(server.election_results.items()))

        async def start() -> str:
            try:
                await server.start()
            except OSError as exc:
                fix = "controllerDLegerPeers or listenPort"
                raise bind_failure(exc, "controller port", 0, fix) from None
            if server.extra_server is not None:
                server.extra_server.observe = server.node.server.observe
            with_metrics = await start_metrics(exporter)
            return f"controller {config.self_id}{with_metrics} ready at {server.address}"

        async def stop() -> None:
            await exporter.stop()
            await server.stop()

        await serve_until_signalled(start, stop)

    return run_server(main, "pocketmq controller")
