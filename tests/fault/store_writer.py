"""A writer process for the crash tests: appends with SYNC_FLUSH and reports every acknowledgement.

Run as `python store_writer.py ROOT FIRST_SEQ`. It recovers the store at ROOT, prints `READY`,
then appends deterministic messages (see `expected_message`) from several concurrent writers and
prints `ACK <seq> <physical offset>` for each put acknowledged as durable, until it is killed.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys

from pocketmq.common.properties import encode_properties
from pocketmq.store.api import MessageToStore, PutStatus
from pocketmq.store.config import FlushDiskType, MessageStoreConfig
from pocketmq.store.message_store import MessageStore

TOPIC = "CrashTest"
QUEUES = 4
WRITERS = 8
COMMIT_LOG_FILE_SIZE = 256 * 1024


def config(root: str) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=root,
        mapped_file_size_commit_log=COMMIT_LOG_FILE_SIZE,
        mapped_file_size_consume_queue=20 * 1000,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )


def expected_message(seq: int) -> MessageToStore:
    """The message with sequence number `seq`: content is a pure function of `seq`."""
    size = 50 + (seq * 7919) % 3000
    digest = hashlib.blake2b(seq.to_bytes(8, "big")).digest()
    body = (digest * (size // len(digest) + 1))[:size]
    properties = encode_properties({"KEYS": f"k{seq}", "UNIQ_KEY": f"U{seq:016d}", "SEQ": str(seq)})
    return MessageToStore(
        topic=TOPIC,
        body=body,
        properties=properties,
        queue_id=seq % QUEUES,
        born_timestamp=seq,
        born_host=("127.0.0.1", 4000 + seq % 100),
    )


async def main(root: str, first_seq: int) -> None:
    store = MessageStore(config(root))
    store.load()
    await store.start()
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    next_seq = first_seq

    async def writer() -> None:
        nonlocal next_seq
        while True:
            seq = next_seq
            next_seq += 1
            result = await store.put_message(expected_message(seq))
            if result.status is PutStatus.PUT_OK:
                sys.stdout.write(f"ACK {seq} {result.physical_offsets[0]}\n")
                sys.stdout.flush()

    await asyncio.gather(*(writer() for _ in range(WRITERS)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
