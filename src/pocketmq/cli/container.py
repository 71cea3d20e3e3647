"""`pocketmq container -c broker-container.conf [-b a.conf:b.conf]`, as RocketMQ's
`mqbrokercontainer`: several brokers in one process (see `pocketmq.container`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pocketmq.cli.serving import apply_config_file, bind_failure, run_server, serve_until_signalled
from pocketmq.container.config import ContainerConfig
from pocketmq.container.server import BrokerContainer


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "container", help="start several brokers in one process (RocketMQ's mqbrokercontainer)"
    )
    parser.add_argument(
        "-c", "--config", help="broker-container.conf: listenPort, namesrvAddr, brokerConfigPaths"
    )
    parser.add_argument(
        "-b", "--brokerConfigFiles", help="broker properties files separated by ':' (overrides "
        "brokerConfigPaths)"
    )  # fmt: skip
    parser.add_argument("-n", "--namesrv", help="NameServer addresses, host:port;host:port")
    parser.add_argument("--port", type=int, help="listenPort (default 10811; 0 picks a free port)")
    parser.set_defaults(run=run)


def build_config(args: argparse.Namespace) -> ContainerConfig:
    """The container's settings: defaults, then the file, then the flags.

    Raises:
        ConfigError: a bad value in the file or the flags.
    """
    config = ContainerConfig()
    apply_config_file(args.config, config)
    if args.brokerConfigFiles is not None:
        config.broker_config_paths = args.brokerConfigFiles
    if args.namesrv is not None:
        config.namesrv_addr = args.namesrv
    if args.port is not None:
        config.listen_port = args.port
    config.check()
    return config


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        config = build_config(args)
        container = BrokerContainer(config)

        async def start() -> str:
            try:
                failures = await container.start()
            except OSError as exc:
                fix = "--port N or listenPort=N (0 picks a free port)"
                raise bind_failure(exc, "container port", config.listen_port, fix) from None
            for failure in failures:
                sys.stderr.write(f"pocketmq container: broker not started: {failure}\n")
            sys.stderr.flush()
            return f"container ready at 127.0.0.1:{container.port}"

        await serve_until_signalled(start, container.stop)

    return run_server(main, "pocketmq container")
