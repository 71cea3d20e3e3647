"""Entry point of the `pocketmq` command: one sub-command per part."""

from __future__ import annotations

import argparse
import logging
import sys

from pocketmq.cli import admin, bench, broker, namesrv, raftkv, up


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per part."""
    parser = argparse.ArgumentParser(
        prog="pocketmq", description="A light messaging system that speaks RocketMQ's protocols."
    )
    parser.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    up.register(commands)
    broker.register(commands)
    namesrv.register(commands)
    admin.register(commands)
    bench.register(commands)
    raftkv.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the `pocketmq` command; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
    )
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
