"""Sends JSON orders to a topic at a steady rate: random ones stamped with the current time, or
the orders of a JSON Lines file (`--replay`) as they are.

Each message body is one order, `{"orderId", "customer", "amount", "eventTime"}` (eventTime in
epoch milliseconds), and its key is the order id.

    python produce_orders.py -n 127.0.0.1:9876 --rate 20 --duration 300
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from topics import ensure_topics

from pocketmq.client import Message, Producer

CUSTOMERS = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")


def random_orders(seed: int | None, max_delay_ms: int) -> Iterator[dict[str, Any]]:
    """Orders stamped with the time they are made, up to `max_delay_ms` in the past (events
    reach a queue late and out of order)."""
    rng = random.Random(seed)
    prefix = uuid.uuid4().hex[:8]
    for number in itertools.count(1):
        yield {
            "orderId": f"{prefix}-{number}",
            "customer": rng.choice(CUSTOMERS),
            "amount": rng.randint(100, 25_000) / 100,
            "eventTime": int(time.time() * 1000) - rng.randint(0, max_delay_ms),
        }


def replayed_orders(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                order = json.loads(line)
                if not isinstance(order, dict):
                    raise SystemExit(f"{path}:{number}: not a JSON object")
                yield order


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "-n",
        "--namesrv",
        default=os.environ.get("NAMESRV_ADDR", "127.0.0.1:9876"),
        help="NameServer address(es) host:port;host:port (default: $NAMESRV_ADDR or %(default)s)",
    )
    parser.add_argument("-t", "--topic", default="Orders", help="topic (default: %(default)s)")
    parser.add_argument("-c", "--cluster", default="DefaultCluster", help="cluster for new topics")
    parser.add_argument("--queues", type=int, default=4, help="queues of a new topic (4)")
    parser.add_argument("--rate", type=float, default=10.0, help="orders per second; 0: no limit")
    parser.add_argument("--count", type=int, help="stop after this many orders")
    parser.add_argument("--duration", type=float, help="stop after this many seconds")
    parser.add_argument("--replay", type=Path, help="send the orders of this JSON Lines file")
    parser.add_argument("--max-delay-ms", type=int, default=2000, help="random orders' lateness")
    parser.add_argument("--seed", type=int, help="seed for random orders")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ensure_topics(args.namesrv, [args.topic], cluster=args.cluster, queues=args.queues)
    orders = (
        replayed_orders(args.replay) if args.replay else random_orders(args.seed, args.max_delay_ms)
    )
    if args.count is not None:
        orders = itertools.islice(orders, args.count)
    interval_s = 1 / args.rate if args.rate > 0 else 0.0
    started = time.monotonic()
    deadline = started + args.duration if args.duration else float("inf")
    sent = 0
    with Producer("spark-orders-producer", namesrv=args.namesrv) as producer:
        try:
            for order in orders:
                due = started + sent * interval_s  # a steady rate, not drifting with send time
                if max(due, time.monotonic()) >= deadline:
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                body = json.dumps(order, separators=(",", ":")).encode()
                key = order.get("orderId")
                producer.send(Message(args.topic, body, keys=None if key is None else str(key)))
                sent += 1
                if sent % 100 == 0:
                    sys.stderr.write(f"sent {sent} orders\n")
        except KeyboardInterrupt:
            pass
    sys.stdout.write(f"sent {sent} orders to {args.topic}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
