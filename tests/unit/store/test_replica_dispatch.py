"""A replica's store: bytes copied from another log in arbitrary pieces (as the HA stream sends
them) give the same ConsumeQueue, and a record cut in two is dispatched once it is whole."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.runtime.clock import ManualClock
from pocketmq.store.message_store import MessageStore
from tests.unit.store.conftest import message, small_config


def _copy(source: MessageStore, replica: MessageStore, piece: int) -> None:
    offset = replica.max_phy_offset
    while offset < source.max_phy_offset:
        found = source.commit_log.view_from(offset)
        assert found is not None
        view, position = found
        try:
            data = bytes(view[position : position + piece])
        finally:
            view.release()
        replica.append_raw(offset, data)
        offset += len(data)
        # Dispatch after every piece: most end inside a record.
        replica.dispatch_now()


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3000), st.lists(st.integers(10, 2000), min_size=5, max_size=60))
def test_pieces_of_any_size_give_the_same_queues(
    tmp_path_factory: object, piece: int, sizes: list[int]
) -> None:
    root = Path(tmp_path_factory.mktemp("replica"))  # type: ignore[attr-defined]
    clock = ManualClock()
    source = MessageStore(small_config(root / "a"), clock=clock)
    replica = MessageStore(small_config(root / "b"), clock=clock)
    source.load()
    replica.load()
    try:
        for i, size in enumerate(sizes):
            source.put_messages_now([message(body=b"x" * size, queue_id=i % 3, keys=f"k{i}")])
        _copy(source, replica, piece)
        assert replica.max_phy_offset == source.max_phy_offset
        assert replica.dispatcher.reput_offset == source.dispatcher.reput_offset
        for queue_id in range(3):
            assert replica.get_max_offset_in_queue("TopicTest", queue_id) == (
                source.get_max_offset_in_queue("TopicTest", queue_id)
            )
        assert [m.body for m in replica.query_message("TopicTest", "k7", 10, 0, 1 << 62)] == [
            m.body for m in source.query_message("TopicTest", "k7", 10, 0, 1 << 62)
        ]
    finally:
        source.close()
        replica.close()
