"""What must hold of a store after a crash: acknowledged messages intact, nothing garbage, queues
and index in agreement with the CommitLog. Shared by the SIGKILL and power-loss tests."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from pocketmq.common.stored_message import decode_record
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.dispatch import DispatchRequest, parse_dispatch
from pocketmq.store.message_store import MessageStore
from tests.fault.store_writer import QUEUES, TOPIC, config, expected_message

RECENT_KEYS_CHECKED = 500
OLDER_KEYS_CHECKED = 100


def commit_log_records(store: MessageStore) -> Iterator[DispatchRequest]:
    """Every record of the CommitLog, parsed with body CRCs checked."""
    offset = store.commit_log.min_offset
    for _ in range(10_000_000):
        if offset >= store.commit_log.max_offset:
            return
        found = store.commit_log.view_from(offset)
        assert found is not None
        view, position = found
        request = parse_dispatch(view, position, offset, check_crc=True)
        view.release()
        if request is None:
            offset = store.commit_log.next_file_offset(offset)
        else:
            offset += request.size
            yield request


def check_store(
    root: Path,
    acked: dict[int, int],
    fs: FileSystem = OS_FILE_SYSTEM,
    store_config: MessageStoreConfig | None = None,
) -> tuple[int, int]:
    """Opens the store as the next start would and checks it.

    Returns:
        The highest seq stored, and how many messages the store holds.
    """
    store = MessageStore(store_config or config(str(root)), fs=fs, disk_usage=lambda: 0.0)
    store.load()
    try:
        highest = -1
        stored: set[int] = set()
        for queue_id in range(QUEUES):
            offset = store.get_min_offset_in_queue(TOPIC, queue_id)
            for _ in range(100_000):
                result = store.get_message(TOPIC, queue_id, offset, 256)
                if not result.buffers:
                    break
                for queue_offset, raw in zip(result.queue_offsets, result.buffers, strict=True):
                    message = decode_record(raw)  # checks framing and body CRC
                    seq = int(message.properties["SEQ"])
                    expected = expected_message(seq)
                    assert message.body == expected.body, f"seq {seq} body differs"
                    assert message.queue_id == queue_id == expected.queue_id
                    assert message.queue_offset == queue_offset
                    assert message.born_timestamp == seq
                    stored.add(seq)
                    highest = max(highest, seq)
                offset = result.next_begin_offset
            assert offset == store.get_max_offset_in_queue(TOPIC, queue_id)
        records = 0
        for request in commit_log_records(store):
            records += 1
            position = store.get_commit_log_offset_in_queue(
                request.topic, request.queue_id, request.queue_offset
            )
            assert position == request.commit_log_offset, "queue and commit log disagree"
        assert records == len(stored), "a commit log record is missing from its queue"
        missing = set(acked) - stored
        assert not missing, f"acknowledged but lost: {sorted(missing)[:10]}"
        for seq, physical in acked.items():
            message = store.look_message_by_offset(physical)
            assert message is not None, f"no record at the acknowledged offset of seq {seq}"
            assert message.properties["SEQ"] == str(seq)
        # A power loss tears the newest index entries: check every recent key, and a sample
        # of the older ones.
        seqs = sorted(acked)
        recent, older = seqs[-RECENT_KEYS_CHECKED:], seqs[:-RECENT_KEYS_CHECKED]
        for seq in recent + random.sample(older, min(OLDER_KEYS_CHECKED, len(older))):
            found = store.query_message(TOPIC, f"k{seq}", 4)
            assert [m.properties["SEQ"] for m in found] == [str(seq)], f"index lost k{seq}"
        return highest, len(stored)
    finally:
        store.close()
