"""`pocketmq bench ...`: the benchmarks shipped with the package."""

from __future__ import annotations

import argparse
from typing import Any

from pocketmq.bench import consumer, producer, store


def register(commands: Any) -> None:
    """Adds `bench` and its workloads to the top-level sub-command set."""
    parser: argparse.ArgumentParser = commands.add_parser("bench", help="run a benchmark")
    workloads = parser.add_subparsers(dest="workload", metavar="WORKLOAD", required=True)
    store_parser = workloads.add_parser("store", help="storage engine append/read throughput")
    store.add_arguments(store_parser)
    store_parser.set_defaults(run=store.run_from_args)
    producer_parser = workloads.add_parser("producer", help="send load to a cluster")
    producer.add_arguments(producer_parser)
    producer_parser.set_defaults(run=producer.run_from_args)
    consumer_parser = workloads.add_parser("consumer", help="consume load from a cluster")
    consumer.add_arguments(consumer_parser)
    consumer_parser.set_defaults(run=consumer.run_from_args)
