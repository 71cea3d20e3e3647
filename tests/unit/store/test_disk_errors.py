"""A failing disk: the store refuses writes with a clear status and never acknowledges what it
could not sync; reads keep working; a restart recovers (on `SimulatedDisk`)."""

from __future__ import annotations

import asyncio
import errno
from pathlib import Path

from pocketmq.common.stored_message import decode_record
from pocketmq.store.api import Durability, PutResult, PutStatus
from pocketmq.store.config import FlushDiskType
from pocketmq.store.message_store import MessageStore
from pocketmq.testing.simulated_disk import SimulatedDisk
from tests.unit.store.conftest import COMMIT_LOG_FILE_SIZE, message, small_config

ROOT = Path("/disk-errors/store")


def new_store(disk: SimulatedDisk, flush: FlushDiskType = FlushDiskType.SYNC_FLUSH) -> MessageStore:
    config = small_config(ROOT, flush_disk_type=flush, flush_interval_commit_log_ms=10)
    store = MessageStore(config, fs=disk, disk_usage=lambda: 0.0)
    store.load()
    return store


def test_a_failed_sync_is_never_acknowledged_and_later_puts_are_refused() -> None:
    disk = SimulatedDisk()

    async def run() -> tuple[PutResult, list[PutResult], PutResult, bytes]:
        store = new_store(disk)
        await store.start()
        first = await store.put_message(message(body=b"durable"))
        disk.fail("sync", errno.EIO, path_part="commitlog")
        failed = await asyncio.gather(*(store.put_message(message(body=b"x")) for _ in range(3)))
        disk.clear_faults()  # a later sync would succeed, and still proves nothing
        refused = await store.put_message(message(body=b"after"))
        read = store.get_message("TopicTest", 0, 0, 1)
        body = decode_record(read.buffers[0]).body
        await store.shutdown()
        return first, failed, refused, body

    first, failed, refused, body = asyncio.run(run())
    assert first.durability is Durability.FLUSHED
    for result in failed:
        assert result.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert result.durability is Durability.IN_MEMORY
        assert "disk failed (Input/output error)" in result.remark
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "refuses writes until it is restarted" in refused.remark
    assert body == b"durable"  # reads are still served

    disk.reboot()
    store = new_store(disk)  # not a clean stop: recovered, synced again, writable
    assert store.last_recovery is not None
    assert store.last_recovery.abnormal
    assert store.put_messages_now([message(body=b"again")]).status is PutStatus.PUT_OK
    store.close()


def test_no_space_for_the_next_commit_log_file_refuses_the_put_and_keeps_serving() -> None:
    disk = SimulatedDisk()

    async def run() -> tuple[list[PutResult], PutResult, PutResult]:
        store = new_store(disk)
        await store.start()
        body = b"b" * 4000
        stored = [await store.put_message(message(body=body))]  # the first file exists
        disk.fail("create", errno.ENOSPC, path_part="commitlog", count=1_000)
        for _ in range(2 * COMMIT_LOG_FILE_SIZE // len(body)):
            result = await store.put_message(message(body=body))
            stored.append(result)
            if result.status is not PutStatus.PUT_OK:
                break
        disk.clear_faults()
        again = await store.put_message(message(body=body))
        last = stored[-1]
        await store.shutdown()
        return stored[:-1], last, again

    ok, refused, again = asyncio.run(run())
    assert ok
    assert all(r.durability is Durability.FLUSHED for r in ok)
    assert refused.status is PutStatus.CREATE_MAPPED_FILE_FAILED
    assert "No space left on device" in refused.remark
    assert again.status is PutStatus.PUT_OK  # space came back: nothing to recover from
    disk.reboot()
    store = new_store(disk)
    assert store.get_max_offset_in_queue("TopicTest", 0) == len(ok) + 1
    store.close()


def test_a_failed_background_flush_makes_the_store_refuse_writes() -> None:
    disk = SimulatedDisk()

    async def run() -> PutResult:
        store = new_store(disk, FlushDiskType.ASYNC_FLUSH)
        await store.start()
        await store.put_message(message())  # the first file exists
        disk.fail("sync", errno.EIO, path_part="commitlog", count=1_000)
        await store.put_message(message())
        for _ in range(500):  # the flusher runs every 10 ms: at most 5 s
            if store.disk_error is not None:
                break
            await asyncio.sleep(0.01)
        refused = await store.put_message(message())
        await store.shutdown()
        return refused

    assert asyncio.run(run()).status is PutStatus.SERVICE_NOT_AVAILABLE


def test_a_queue_file_that_cannot_be_made_stops_writes_and_recovery_dispatches_the_rest() -> None:
    disk = SimulatedDisk()

    async def run() -> tuple[PutResult, PutResult]:
        store = new_store(disk)
        await store.start()
        await store.put_message(message(body=b"first"))
        store.dispatch_now()
        disk.fail("create", errno.ENOSPC, path_part="consumequeue", count=1_000)
        stored = await store.put_message(message(body=b"second", queue_id=1))  # a new queue
        for _ in range(500):  # dispatch runs on the loop right after the put: at most 5 s
            if store.disk_error is not None:
                break
            await asyncio.sleep(0.01)
        refused = await store.put_message(message(body=b"third"))
        await store.shutdown()
        return stored, refused

    stored, refused = asyncio.run(run())
    assert stored.durability is Durability.FLUSHED  # in the CommitLog, not yet in its queue
    assert refused.status is PutStatus.SERVICE_NOT_AVAILABLE
    assert "No space left on device" in refused.remark
    disk.clear_faults()
    disk.reboot()
    store = new_store(disk)
    result = store.get_message("TopicTest", 1, 0, 10)
    assert [decode_record(b).body for b in result.buffers] == [b"second"]
    store.close()


def test_a_slow_disk_answers_flush_timeout_never_flushed() -> None:
    disk = SimulatedDisk()

    async def run() -> PutResult:
        config = small_config(ROOT, flush_disk_type=FlushDiskType.SYNC_FLUSH)
        config.sync_flush_timeout_ms = 50
        store = MessageStore(config, fs=disk, disk_usage=lambda: 0.0)
        store.load()
        await store.start()
        await store.put_message(message())  # the first file exists
        disk.sync_delay_s = 0.3
        slow = await store.put_message(message())
        disk.sync_delay_s = 0.0
        await store.shutdown()
        return slow

    slow = asyncio.run(run())
    assert slow.status is PutStatus.FLUSH_DISK_TIMEOUT
    assert slow.durability is Durability.IN_MEMORY
