"""`pocketmq raftkv --id N --peers 1=host:port,...`: one node of the replicated key-value store
built on the Raft core; the example of using `pocketmq.raft`, and its test bed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pocketmq.cli.serving import run_server, serve_until_signalled
from pocketmq.common.config import ConfigError
from pocketmq.raft.node import NodeSettings
from pocketmq.raftkv.server import KeyValueServer


def register(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "raftkv", help="run one node of a Raft-replicated key-value store"
    )
    parser.add_argument("--id", type=int, required=True, help="this node's id (1, 2, ...)")
    parser.add_argument(
        "--peers", required=True, help="every node as id=host:port, comma-separated"
    )
    parser.add_argument("--data-dir", required=True, help="where the log and snapshots live")
    parser.add_argument("--tick-ms", type=int, default=100, help="Raft tick (default 100 ms)")
    parser.add_argument(
        "--no-batching", action="store_true", help="one command per append and fsync"
    )
    parser.set_defaults(run=run)


def parse_peers(text: str) -> dict[int, str]:
    peers: dict[int, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node_id, sep, address = item.partition("=")
        if not sep or not node_id.isdigit() or ":" not in address:
            raise ConfigError("--peers", item, "id=host:port")
        peers[int(node_id)] = address
    return peers


def run(args: argparse.Namespace) -> int:
    async def main() -> None:
        peers = parse_peers(args.peers)
        if args.id not in peers:
            raise ConfigError("--id", str(args.id), f"one of the --peers ids {sorted(peers)}")
        server = KeyValueServer(
            NodeSettings(
                node_id=args.id,
                peers=peers,
                directory=Path(args.data_dir),
                tick_ms=args.tick_ms,
                batching=not args.no_batching,
            )
        )

        async def start() -> str:
            await server.start()
            return f"raftkv node {args.id} ready at {peers[args.id]}"

        await serve_until_signalled(start, server.stop)

    return run_server(main)
