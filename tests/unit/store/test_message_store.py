"""The message store end to end, driven synchronously: puts, reads by queue, offsets, lookups."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from pocketmq.common.java_hash import tags_code
from pocketmq.common.message_id import create_offset_msg_id, decode_offset_msg_id
from pocketmq.common.stored_message import decode_record
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import GetStatus, PutStatus
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import message

StoreFactory = Callable[..., MessageStore]


def put(store: MessageStore, *messages: object) -> list[int]:
    result = store.put_messages_now(list(messages))  # type: ignore[arg-type]
    assert result.ok, result
    return result.physical_offsets


def test_read_by_queue_returns_stored_records_in_order(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(30):
        put(store, message(body=f"m{i}".encode(), queue_id=i % 3))
    result = store.get_message("TopicTest", 1, 2, 5)
    assert result.status is GetStatus.FOUND
    bodies = [decode_record(b).body for b in result.buffers]
    assert bodies == [f"m{i}".encode() for i in (7, 10, 13, 16, 19)]
    assert result.queue_offsets == [2, 3, 4, 5, 6]
    assert result.total_bytes == sum(map(len, result.buffers))
    assert result.next_begin_offset == 7
    assert (result.min_offset, result.max_offset) == (0, 10)


def test_read_statuses_follow_rocketmq(open_store: StoreFactory) -> None:
    store = open_store()
    assert store.get_message("Nope", 0, 0, 1).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    put(store, message(), message())
    at_end = store.get_message("TopicTest", 0, 2, 1)
    assert (at_end.status, at_end.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 2)
    beyond = store.get_message("TopicTest", 0, 9, 1)
    assert (beyond.status, beyond.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 2)


def test_tag_filter_skips_other_tags_but_advances(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(10):
        put(store, message(body=bytes([i]), tags="TagA" if i % 2 else "TagB"))
    result = store.get_message("TopicTest", 0, 0, 100, tag_codes=frozenset({tags_code("TagA")}))
    assert [decode_record(b).body[0] for b in result.buffers] == [1, 3, 5, 7, 9]
    assert result.next_begin_offset == 10
    none = store.get_message("TopicTest", 0, 0, 100, tag_codes=frozenset({tags_code("TagC")}))
    assert none.status is GetStatus.NO_MATCHED_MESSAGE
    assert none.next_begin_offset == 10


def test_max_bytes_limits_a_read_but_returns_at_least_one(open_store: StoreFactory) -> None:
    store = open_store()
    for _ in range(5):
        put(store, message(body=b"x" * 1000))
    result = store.get_message("TopicTest", 0, 0, 5, max_bytes=2500)
    assert result.message_count == 2
    assert result.next_begin_offset == 2
    tiny = store.get_message("TopicTest", 0, 0, 5, max_bytes=10)
    assert tiny.message_count == 1


def test_reads_cross_commit_log_and_queue_files(open_store: StoreFactory) -> None:
    store = open_store()
    for i in range(200):
        put(store, message(body=i.to_bytes(2, "big") * 300))
    assert len(store.commit_log.files.files) > 2
    got = []
    offset = 0
    for _ in range(100):
        result = store.get_message("TopicTest", 0, offset, 32)
        if result.status is not GetStatus.FOUND:
            break
        got.extend(int.from_bytes(decode_record(b).body[:2], "big") for b in result.buffers)
        offset = result.next_begin_offset
    assert got == list(range(200))


def test_lookup_by_physical_offset_and_offset_msg_id(open_store: StoreFactory) -> None:
    store = open_store()
    (physical,) = put(store, message(body=b"find me"))
    msg_id = create_offset_msg_id(store.store_host, physical)
    host, offset = decode_offset_msg_id(msg_id)
    assert host == store.store_host
    found = store.look_message_by_offset(offset)
    assert found is not None
    assert found.body == b"find me"
    assert store.look_message_by_offset(offset + 3) is None
    assert store.look_message_by_offset(10**9) is None


def test_query_by_key_and_unique_id(open_store: StoreFactory) -> None:
    store = open_store()
    put(store, message(body=b"1", keys="order-1 user-9", uniq_key="U1"))
    put(store, message(body=b"2", keys="order-2", uniq_key="U2"))
    put(store, message(topic="Other", body=b"3", keys="order-1", uniq_key="U3"))
    assert [m.body for m in store.query_message("TopicTest", "order-1", 10)] == [b"1"]
    assert [m.body for m in store.query_message("TopicTest", "user-9", 10)] == [b"1"]
    assert [m.body for m in store.query_message("TopicTest", "U2", 10)] == [b"2"]
    assert [m.body for m in store.query_message("Other", "order-1", 10)] == [b"3"]
    assert store.query_message("TopicTest", "order-3", 10) == []


def test_search_offset_by_timestamp(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    start = clock.now_ms()
    for _ in range(10):
        put(store, message())
        clock.advance(1)
    assert store.get_offset_in_queue_by_time("TopicTest", 0, start - 5000) == 0
    assert store.get_offset_in_queue_by_time("TopicTest", 0, start + 3000) == 3
    assert store.get_offset_in_queue_by_time("TopicTest", 0, start + 2500) == 3
    assert store.get_offset_in_queue_by_time("TopicTest", 0, start + 99_000) == 10
    assert store.get_earliest_message_time("TopicTest", 0) == start
    assert store.get_message_store_timestamp("TopicTest", 0, 4) == start + 4000


def test_oversized_message_is_refused_and_store_keeps_serving(open_store: StoreFactory) -> None:
    store = open_store(max_message_size=100)
    result = store.put_messages_now([message(body=b"x" * 101)])
    assert result.status is PutStatus.MESSAGE_ILLEGAL
    put(store, message(body=b"ok"))
    assert store.get_max_offset_in_queue("TopicTest", 0) == 1


def test_async_put_and_clean_shutdown_reopen(open_store: StoreFactory) -> None:
    store = open_store()

    async def run() -> None:
        await store.start()
        results = await asyncio.gather(*(store.put_message(message(body=b"a")) for _ in range(20)))
        assert all(r.ok for r in results)
        await store.shutdown()

    asyncio.run(run())
    assert not (store.root / "abort").exists()
    reopened = open_store()
    assert reopened.get_max_offset_in_queue("TopicTest", 0) == 20
    assert reopened.commit_log.queue_offsets.next_offset("TopicTest", 0) == 20


def test_truncate_cuts_queues_and_keeps_offsets_consistent(open_store: StoreFactory) -> None:
    store = open_store()
    offsets = [put(store, message(body=bytes([i]) * 100))[0] for i in range(20)]
    store.truncate(offsets[12])
    assert store.get_max_offset_in_queue("TopicTest", 0) == 12
    (again,) = put(store, message(body=b"new"))
    assert again == offsets[12]
    record = store.get_message("TopicTest", 0, 12, 1).buffers[0]
    assert decode_record(record).body == b"new"
    assert decode_record(record).queue_offset == 12


def test_metadata_files_are_loaded_at_start_with_bak_fallback(open_store: StoreFactory) -> None:
    store = open_store()
    offsets = {"offsetTable": {"TopicTest@group": {"0": 12}}}
    store.metadata.consumer_offsets.save(offsets)
    store.metadata.consumer_offsets.save({"offsetTable": {"TopicTest@group": {"0": 13}}})
    store.metadata.topics.save({"topicConfigTable": {"TopicTest": {"readQueueNums": 8}}})
    store.close()
    (store.root / "config" / "consumerOffset.json").write_text('{"offsetTa')  # torn
    reopened = open_store()
    assert reopened.metadata_documents["consumerOffset.json"] == offsets
    assert reopened.metadata_documents["topics.json"]["topicConfigTable"]["TopicTest"] == {
        "readQueueNums": 8
    }
    assert "delayOffset.json" not in reopened.metadata_documents


def test_query_by_key_keeps_to_the_time_range(open_store: StoreFactory, clock: ManualClock) -> None:
    store = open_store()
    start = clock.now_ms()
    put(store, message(body=b"early", keys="k"))
    clock.advance(0.5)
    put(store, message(body=b"late", keys="k"))
    assert [
        m.body for m in store.query_message("TopicTest", "k", 10, start + 100, start + 900)
    ] == [b"late"]
    assert [m.body for m in store.query_message("TopicTest", "k", 10)] == [b"late", b"early"]
