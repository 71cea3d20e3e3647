"""Entry point of the `pocketmq` command: one sub-command per part."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import sys
from typing import Final

import pocketmq
from pocketmq.cli import admin, bench, broker, container, controller, namesrv, proxy, raftkv, up

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def package_version() -> str:
    """The installed distribution's version, or the source tree's when it is not installed."""
    try:
        return importlib.metadata.version("pocketmq")
    except importlib.metadata.PackageNotFoundError:
        return pocketmq.__version__


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per part."""
    parser = argparse.ArgumentParser(
        prog="pocketmq", description="A light messaging system that speaks RocketMQ's protocols."
    )
    parser.add_argument("--version", action="version", version=f"pocketmq {package_version()}")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=LOG_LEVELS,
        help="DEBUG, INFO, WARNING or ERROR (default INFO)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    up.register(commands)
    broker.register(commands)
    container.register(commands)
    namesrv.register(commands)
    controller.register(commands)
    proxy.register(commands)
    admin.register(commands)
    bench.register(commands)
    raftkv.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs the `pocketmq` command; returns the process exit code."""
    parser = build_parser()
    words = sys.argv[1:] if argv is None else argv
    problem = _admin_command_problem(words)
    if problem is not None:
        sys.stderr.write(problem + "\n")
        return 2
    args = parser.parse_args(words)
    if args.command is None:
        parser.print_help()
        return 2
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
    )
    code: int = args.run(args)
    return code


def _admin_command_problem(words: list[str]) -> str | None:
    """`admin.check_command_name` for the words after `admin`, when that is the command."""
    index = 0
    while index < len(words) and words[index].startswith("-"):
        index += 2 if words[index] == "--log-level" else 1
    if index < len(words) and words[index] == "admin":
        return admin.check_command_name(words[index + 1 :])
    return None


if __name__ == "__main__":
    sys.exit(main())
