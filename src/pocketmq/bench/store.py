"""Storage engine benchmark: append and read throughput of the message store, no network.

Workloads (1 KiB messages by default), each on a fresh store in a temporary directory:
- append, one message per put, ASYNC_FLUSH;
- append, batches of 32, ASYNC_FLUSH: as message objects, and as a batch send's body (the way
  a producer's batch reaches the store through the broker);
- append under SYNC_FLUSH (group commit) with 1, 16 and 64 concurrent writers;
- read by queue (32 messages per read) of everything the batch run appended.
Each append run prints two lines: when the last put returned (the CommitLog append, and the
fsync for SYNC_FLUSH), and when the dispatcher had also built ConsumeQueue and index entries
for every message (it runs on the same event loop, as in a running broker).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass

from pocketmq.common.batch import encode_batch_body, scan_batch_body
from pocketmq.common.properties import encode_properties
from pocketmq.store.api import BatchToStore, GetStatus, MessageToStore
from pocketmq.store.config import FlushDiskType, MessageStoreConfig
from pocketmq.store.message_store import MessageStore

TOPIC = "BenchmarkTest"
QUEUES = 8


@dataclass
class Figure:
    """One benchmark line."""

    workload: str
    messages: int
    seconds: float

    @property
    def msgs_per_s(self) -> float:
        return self.messages / self.seconds if self.seconds else 0.0

    def line(self, size: int) -> str:
        mb_s = self.msgs_per_s * size / 1e6
        return (
            f"{self.workload:<34} {self.messages:>9,} msgs {self.seconds:>7.2f} s "
            f"{self.msgs_per_s:>11,.0f} msgs/s {mb_s:>8.1f} MB/s"
        )


def make_messages(count: int, size: int, queues: int = QUEUES) -> list[MessageToStore]:
    body = os.urandom(size)
    return [
        MessageToStore(
            topic=TOPIC,
            body=body,
            properties=encode_properties(
                {"TAGS": "TagA", "KEYS": f"key-{i}", "UNIQ_KEY": f"7F0000010001{i:020X}"}
            ),
            queue_id=i % queues,
            born_timestamp=1_700_000_000_000,
            born_host=("127.0.0.1", 50000),
        )
        for i in range(count)
    ]


async def _with_store(
    root: str, flush: FlushDiskType, work: Callable[[MessageStore], Awaitable[int]]
) -> tuple[int, float, float, MessageStore]:
    """Runs `work`; returns the count, the seconds until the last put returned, the seconds
    until every message was also dispatched (queues and index built), and the store."""
    config = MessageStoreConfig(store_path_root_dir=root, flush_disk_type=flush)
    store = MessageStore(config)
    store.load()
    await store.start()
    start = time.perf_counter()
    count = await work(store)
    appended = time.perf_counter() - start
    store.dispatch_now()
    dispatched = time.perf_counter() - start
    return count, appended, dispatched, store


async def append_single(store: MessageStore, messages: list[MessageToStore]) -> int:
    for message in messages:
        await store.put_message(message)
    return len(messages)


def by_batch(messages: list[MessageToStore], batch: int) -> list[list[MessageToStore]]:
    # A batch goes to one queue, as a producer's batch does.
    by_queue: dict[int, list[MessageToStore]] = {}
    for message in messages:
        by_queue.setdefault(message.queue_id, []).append(message)
    return [q[i : i + batch] for q in by_queue.values() for i in range(0, len(q), batch)]


async def append_batches(store: MessageStore, messages: list[MessageToStore], batch: int) -> int:
    for chunk in by_batch(messages, batch):
        await store.put_messages(chunk)
    return len(messages)


def batch_sends(
    messages: list[MessageToStore], batch: int
) -> list[tuple[MessageToStore, bytes, int]]:
    """The batches as a producer sends them: the first message (for what they share), the
    encoded body and the message count."""
    return [
        (chunk[0], encode_batch_body((m.flag, m.body, m.properties) for m in chunk), len(chunk))
        for chunk in by_batch(messages, batch)
    ]


async def append_sent(store: MessageStore, sends: list[tuple[MessageToStore, bytes, int]]) -> int:
    """Stores each batch send as the broker does: finds its entries, then writes them
    straight from its body."""
    for first, body, _count in sends:
        batch = BatchToStore(
            first.topic,
            first.queue_id,
            body,
            scan_batch_body(body),
            born_timestamp=first.born_timestamp,
            born_host=first.born_host,
        )
        await store.put_batch(batch)
    return sum(count for _, _, count in sends)


async def append_concurrent(
    store: MessageStore, messages: list[MessageToStore], writers: int
) -> int:
    per_writer = len(messages) // writers

    async def writer(part: list[MessageToStore]) -> None:
        for message in part:
            result = await store.put_message(message)
            assert result.ok, result.status

    await asyncio.gather(
        *(writer(messages[i * per_writer : (i + 1) * per_writer]) for i in range(writers))
    )
    return per_writer * writers


def read_all(store: MessageStore, queues: int, batch: int = 32) -> int:
    count = 0
    for queue_id in range(queues):
        offset = 0
        while True:
            result = store.get_message(TOPIC, queue_id, offset, batch)
            if result.status is not GetStatus.FOUND:
                break
            count += result.message_count
            offset = result.next_begin_offset
    return count


async def run(args: argparse.Namespace) -> list[Figure]:
    messages = make_messages(args.messages, args.size, args.queues)
    figures = []

    async def measure(
        name: str,
        flush: FlushDiskType,
        work: Callable[[MessageStore], Awaitable[int]],
        *,
        read_after: bool = False,
    ) -> None:
        with tempfile.TemporaryDirectory(prefix="pocketmq-bench-", dir=args.dir) as root:
            count, appended, dispatched, store = await _with_store(root, flush, work)
            figures.append(Figure(name, count, appended))
            print(figures[-1].line(args.size), flush=True)
            figures.append(Figure("  ... and dispatched", count, dispatched))
            print(figures[-1].line(args.size), flush=True)
            if read_after:
                start = time.perf_counter()
                read = read_all(store, args.queues)
                figures.append(
                    Figure("read by queue, 32 per read", read, time.perf_counter() - start)
                )
                print(figures[-1].line(args.size), flush=True)
            await store.shutdown()

    async_flush, sync_flush = FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH
    await measure("append single, ASYNC_FLUSH", async_flush, lambda s: append_single(s, messages))
    await measure(
        "append batch 32, ASYNC_FLUSH",
        async_flush,
        lambda s: append_batches(s, messages, 32),
        read_after=True,
    )
    sends = batch_sends(messages, 32)
    await measure(
        "append batch 32 as sent, ASYNC_FLUSH",
        async_flush,
        lambda s: append_sent(s, sends),
    )
    sync_messages = messages[: args.sync_messages]
    for writers in (1, 16, 64):
        part = sync_messages if writers > 1 else sync_messages[: len(sync_messages) // 4]

        def concurrent(
            store: MessageStore, writers: int = writers, part: list[MessageToStore] = part
        ) -> Awaitable[int]:
            return append_concurrent(store, part, writers)

        await measure(f"append SYNC_FLUSH, {writers} writers", sync_flush, concurrent)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Runs the store benchmark; prints one line per workload (or JSON with --json)."""
    parser = argparse.ArgumentParser(prog="pocketmq bench store", description=__doc__)
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=200_000, help="messages per append run")
    parser.add_argument(
        "--sync-messages",
        type=int,
        default=20_000,
        help="messages per SYNC_FLUSH run (a quarter of it for the single writer)",
    )
    parser.add_argument("--size", type=int, default=1024, help="body size in bytes")
    parser.add_argument(
        "--queues", type=int, default=QUEUES, help="queues the messages go to, round robin"
    )
    parser.add_argument("--dir", default=None, help="where the temporary stores go")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")


def run_from_args(args: argparse.Namespace) -> int:
    # One store per workload: its start and stop lines would drown the figures.
    logging.getLogger("pocketmq.store").setLevel(logging.WARNING)
    print(
        f"store benchmark: {args.messages:,} messages of {args.size} bytes "
        f"({args.sync_messages:,} under SYNC_FLUSH) across {args.queues:,} queues, "
        f"{os.cpu_count()} cores",
        flush=True,
    )
    figures = asyncio.run(run(args))
    if args.json:
        json.dump(
            [asdict(f) | {"msgs_per_s": round(f.msgs_per_s)} for f in figures], sys.stdout, indent=2
        )
        print()
    return 0
