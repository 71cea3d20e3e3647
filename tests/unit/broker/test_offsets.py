"""Consumer offsets: commit, query, removal, consumerOffset.json in RocketMQ's shape."""

from __future__ import annotations

from pocketmq.broker.offsets import ConsumerOffsetTable


def test_commit_query_and_snapshot_round_trip() -> None:
    table = ConsumerOffsetTable()
    assert table.query("g", "T", 0) is None
    table.commit("g", "T", 0, 12)
    table.commit("g", "T", 3, 7)
    table.commit("g2", "T", 0, 1)
    assert table.query("g", "T", 0) == 12
    document = table.snapshot()
    assert document == {"offsetTable": {"T@g": {"0": 12, "3": 7}, "T@g2": {"0": 1}}}
    reloaded = ConsumerOffsetTable()
    reloaded.load(document)
    assert reloaded.queues("g", "T") == {0: 12, 3: 7}
    assert reloaded.groups_of_topic("T") == {"g", "g2"}


def test_fastjson_numeric_keys_and_malformed_entries_load() -> None:
    table = ConsumerOffsetTable()
    table.load({"offsetTable": {"%RETRY%g@g": {0: 5}, "no-separator": {"0": 1}, "T@g": "x"}})
    assert table.query("g", "%RETRY%g", 0) == 5
    assert table.topics_of_group("g") == {"%RETRY%g"}


def test_removing_a_group_or_topic() -> None:
    table = ConsumerOffsetTable()
    table.commit("g", "A", 0, 1)
    table.commit("g", "B", 0, 1)
    table.commit("h", "A", 0, 1)
    table.remove_group("g")
    assert table.topics_of_group("g") == set()
    table.remove_topic("A")
    assert table.groups_of_topic("A") == set()


def test_a_slave_knows_which_progress_only_it_has() -> None:
    slave = ConsumerOffsetTable()
    master_document = {"offsetTable": {"T@g": {"0": 10, "1": 7}}}
    slave.replace_all(master_document)
    assert slave.ahead_of(master_document) == []  # a copy is not progress of its own
    slave.commit("g", "T", 0, 15)  # a consumer read from the slave while the master was away
    slave.commit("g", "T", 1, 5)  # behind the master: nothing to hand back
    slave.commit("h", "T", 0, 3)  # a group the master never saw
    assert slave.ahead_of(master_document) == [("g", "T", 0, 15), ("h", "T", 0, 3)]
    slave.replace_all({"offsetTable": {"T@g": {"0": 15, "1": 7}, "T@h": {"0": 3}}})
    assert slave.ahead_of(master_document) == []
