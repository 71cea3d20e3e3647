"""`pocketmq namesrv [-c namesrv.properties] [--port N]`, as RocketMQ's `mqnamesrv`."""

from __future__ import annotations

import argparse
from typing import Any

from pocketmq.cli.serving import (
    apply_config_file,
    bind_failure,
    run_server,
    serve_until_signalled,
)
from pocketmq.namesrv.server import NamesrvConfig, NamesrvServer


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
        apply_config_file(args.config, config)
        if args.port is not None:
            config.listen_port = args.port
        server = NamesrvServer(config)

        async def start() -> str:
            try:
                port = await server.start()
            except OSError as exc:
                fix = "--port N or listenPort=N (0 picks a free port)"
                raise bind_failure(exc, "NameServer port", config.listen_port, fix) from None
            return f"namesrv ready at 127.0.0.1:{port}"

        await serve_until_signalled(start, server.stop)

    return run_server(main, "pocketmq namesrv")
