"""Recovery: clean and unclean reopen, torn tails cut at every byte, derived data rebuilt."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pocketmq.common.stored_message import decode_record
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import message, small_config

StoreFactory = Callable[..., MessageStore]


def fill(store: MessageStore, count: int, *, queues: int = 2) -> list[tuple[int, int]]:
    """Puts `count` messages; returns their (physical offset, size)."""
    placed = []
    for i in range(count):
        result = store.put_messages_now(
            [message(body=f"body-{i}".encode() * 20, queue_id=i % queues, keys=f"k{i}")]
        )
        assert result.ok
        placed.append((result.physical_offsets[0], result.wrote_bytes))
    return placed


def bodies(store: MessageStore, queue_id: int) -> list[bytes]:
    out: list[bytes] = []
    offset = 0
    for _ in range(1000):
        result = store.get_message("TopicTest", queue_id, offset, 64)
        if not result.buffers:
            break
        out.extend(decode_record(b).body for b in result.buffers)
        offset = result.next_begin_offset
    return out


def commit_log_file(store: MessageStore, offset: int) -> Path:
    mapped = store.commit_log.files.find(offset)
    assert mapped is not None
    return mapped.path


def test_unclean_stop_keeps_everything_written(open_store: StoreFactory) -> None:
    store = open_store()
    fill(store, 120)
    before = [bodies(store, 0), bodies(store, 1)]
    store.close()  # the abort marker stays, as after kill -9
    reopened = open_store()
    assert reopened.last_recovery is not None
    assert reopened.last_recovery.abnormal
    assert [bodies(reopened, 0), bodies(reopened, 1)] == before
    assert reopened.commit_log.queue_offsets.next_offset("TopicTest", 0) == 60
    assert [m.body for m in reopened.query_message("TopicTest", "k7", 5)] == [b"body-7" * 20]


@pytest.mark.parametrize("keep", [0, 1, 4, 7, 8, 20, 83, 84, 85, -1])
def test_torn_last_record_is_cut_and_the_rest_kept(open_store: StoreFactory, keep: int) -> None:
    """A record cut after `keep` bytes (as a power loss mid-write leaves it) is dropped."""
    store = open_store()
    placed = fill(store, 30)
    last_offset, last_size = placed[-1]
    path = commit_log_file(store, last_offset)
    mapped = store.commit_log.files.find(last_offset)
    assert mapped is not None
    position = last_offset - mapped.file_from_offset
    store.close()
    keep = last_size - 1 if keep < 0 else keep
    with path.open("r+b") as f:
        f.seek(position + keep)
        f.write(bytes(last_size - keep))
    reopened = open_store()
    assert reopened.max_phy_offset == last_offset
    assert reopened.get_max_offset_in_queue("TopicTest", 1) == 14  # message 29 (queue 1) gone
    assert bodies(reopened, 1) == [f"body-{i}".encode() * 20 for i in range(1, 29, 2)]
    # The cut bytes are zero again, so a later shorter record leaves nothing stale behind.
    assert mapped.path.read_bytes()[position : position + last_size] == bytes(last_size)
    again = reopened.put_messages_now([message(body=b"after", queue_id=1)])
    assert again.physical_offsets == [last_offset]
    assert again.queue_offset == 14


def test_corrupt_body_in_the_middle_cuts_from_there(open_store: StoreFactory) -> None:
    store = open_store()
    placed = fill(store, 10, queues=1)
    offset, size = placed[6]
    mapped = store.commit_log.files.find(offset)
    assert mapped is not None
    position = offset - mapped.file_from_offset
    store.close()
    with mapped.path.open("r+b") as f:
        f.seek(position + size - 40)
        f.write(b"\xff")
    reopened = open_store()
    assert reopened.max_phy_offset == offset
    assert len(bodies(reopened, 0)) == 6


def test_lost_consume_queue_is_rebuilt_from_the_commit_log(open_store: StoreFactory) -> None:
    store = open_store()
    fill(store, 40)
    expected = bodies(store, 0)
    store.close()
    shutil.rmtree(store.root / "consumequeue")
    shutil.rmtree(store.root / "index", ignore_errors=True)
    (store.root / "checkpoint").unlink(missing_ok=True)
    reopened = open_store()
    assert bodies(reopened, 0) == expected
    assert [m.body for m in reopened.query_message("TopicTest", "k3", 5)] == [b"body-3" * 20]


def test_a_tear_at_any_byte_of_the_last_record_cuts_exactly_that_record(tmp_path: Path) -> None:
    """Zeroing the last record from every byte position on (a torn write) loses only it."""
    template = tmp_path / "template"
    store = MessageStore(small_config(template))
    store.load()
    placed = fill(store, 12)
    last_offset, last_size = placed[-1]
    mapped = store.commit_log.files.find(last_offset)
    assert mapped is not None
    position = last_offset - mapped.file_from_offset
    file_name = mapped.path.name
    store.close()
    for keep in range(last_size):
        root = tmp_path / f"cut-{keep}"
        shutil.copytree(template, root)
        with (root / "commitlog" / file_name).open("r+b") as f:
            f.seek(position + keep)
            f.write(bytes(last_size - keep))
        reopened = MessageStore(small_config(root))
        reopened.load()
        try:
            assert reopened.max_phy_offset == last_offset, f"cut after {keep} bytes"
            assert reopened.get_max_offset_in_queue("TopicTest", 1) == 5
            assert reopened.get_max_offset_in_queue("TopicTest", 0) == 6
        finally:
            reopened.close()
        shutil.rmtree(root)


def test_consume_queue_entries_past_the_commit_log_end_are_dropped(
    open_store: StoreFactory,
) -> None:
    store = open_store()
    placed = fill(store, 10, queues=1)
    cut_at, _ = placed[7]
    store.close()
    # As if the queue had been flushed but the commit log tail was lost.
    for mapped in reversed(store.commit_log.files.files):
        if mapped.file_from_offset <= cut_at:
            with mapped.path.open("r+b") as f:
                f.seek(cut_at - mapped.file_from_offset)
                f.write(bytes(mapped.file_size - (cut_at - mapped.file_from_offset)))
            break
    reopened = open_store()
    assert reopened.get_max_offset_in_queue("TopicTest", 0) == 7
    assert reopened.put_messages_now([message()]).queue_offset == 7


def test_clean_shutdown_then_reopen_takes_the_normal_path(open_store: StoreFactory) -> None:
    store = open_store()
    fill(store, 50)
    asyncio.run(store.shutdown())
    assert not (store.root / "abort").exists()
    reopened = open_store()
    assert reopened.last_recovery is not None
    assert not reopened.last_recovery.abnormal
    assert reopened.get_max_offset_in_queue("TopicTest", 0) == 25
    assert (reopened.root / "abort").exists()
