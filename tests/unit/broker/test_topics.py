"""The broker's topic table: validation, system topics, auto-creation, topics.json shape."""

from __future__ import annotations

import pytest

from pocketmq.broker.topics import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    TopicConfig,
    TopicError,
    TopicTable,
    validate_topic_name,
)

NOW = 1_700_000_000_000


def make_table(**kwargs: object) -> TopicTable:
    table = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a", **kwargs)  # type: ignore[arg-type]
    table.load(None, NOW)
    return table


@pytest.mark.parametrize("name", ["TopicTest", "%RETRY%group", "a|b", "x-y_z", "A" * 127])
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("A" * 128, "longer"),
        ("bad topic", "illegal"),
        ("a/b", "illegal"),
    ],
)
def test_illegal_topic_names_say_which_rule(name: str, rule: str) -> None:
    with pytest.raises(TopicError, match=rule):
        validate_topic_name(name)


def test_system_topics_and_tbw102_exist_at_start() -> None:
    table = make_table()
    tbw = table.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
    assert tbw is not None
    assert (tbw.perm, tbw.write_queue_nums) == (7, 8)
    assert table.get("SCHEDULE_TOPIC_XXXX") is not None
    assert table.get("DefaultCluster") is not None
    assert table.get("broker-a") is not None
    assert make_table(auto_create_topic_enable=False).get(AUTO_CREATE_TOPIC_KEY_TOPIC) is None


def test_auto_create_takes_tbw102_without_inherit() -> None:
    table = make_table()
    created = table.create_on_send("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, NOW)
    assert created is not None
    assert (created.read_queue_nums, created.write_queue_nums, created.perm) == (4, 4, 6)
    assert table.create_on_send("Other", "NoSuchDefault", 4, NOW) is None
    off = make_table(auto_create_topic_enable=False)
    assert off.create_on_send("NewTopic", AUTO_CREATE_TOPIC_KEY_TOPIC, 4, NOW) is None


def test_update_validates_and_bumps_data_version() -> None:
    table = make_table()
    before = table.data_version.counter
    table.update(TopicConfig("T", 4, 4), NOW + 1)
    assert table.data_version.counter == before + 1
    assert table.data_version.timestamp == NOW + 1
    with pytest.raises(TopicError, match="perm"):
        table.update(TopicConfig("T", 4, 4, perm=9), NOW)
    with pytest.raises(TopicError, match="queue count"):
        table.update(TopicConfig("T", 0, 4), NOW)
    assert table.delete("T", NOW)
    assert not table.delete("T", NOW)


def test_a_topic_takes_as_many_queues_as_rocketmq_users_make() -> None:
    table = make_table()
    table.update(TopicConfig("Wide", 20_000, 20_000), NOW)
    with pytest.raises(TopicError, match=r"1\.\.65536"):
        table.update(TopicConfig("Typo", 1_000_000, 8), NOW)


def test_queues_that_would_exhaust_open_files_are_warned_of(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pocketmq.broker import persistence

    monkeypatch.setattr(persistence.resource, "getrlimit", lambda _: (1024, 1024))
    table = make_table()
    check = persistence.OpenFilesCheck()
    table.update(TopicConfig("Fits", 256, 256), NOW)
    check.check(table)
    assert "ulimit" not in caplog.text
    table.update(TopicConfig("Wide", 2_000, 2_000), NOW)
    check.check(table)
    assert caplog.text.count("raise it (ulimit -n)") == 1
    # Said once when they go over, not again at each save after; again after going under.
    table.update(TopicConfig("More", 8, 8), NOW)
    check.check(table)
    assert caplog.text.count("raise it (ulimit -n)") == 1
    table.delete("Wide", NOW)
    check.check(table)
    table.update(TopicConfig("Wide", 2_000, 2_000), NOW)
    check.check(table)
    assert caplog.text.count("raise it (ulimit -n)") == 2


def test_the_open_files_count_of_changed_topics_matches_a_whole_count(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each journaled change counts only its topics again; the sum must stay the whole one."""
    from pocketmq.broker import persistence

    monkeypatch.setattr(persistence.resource, "getrlimit", lambda _: (1024, 1024))
    table = make_table()
    check = persistence.OpenFilesCheck()
    check.check(table)
    table.update(TopicConfig("Wide", 900, 900), NOW)
    check.check(table, ["Wide"])
    assert "ulimit" not in caplog.text
    table.update(TopicConfig("Other", 200, 100), NOW)
    check.check(table, ["Other"])
    assert caplog.text.count("raise it (ulimit -n)") == 1
    table.delete("Other", NOW)
    table.update(TopicConfig("Wide", 500, 500), NOW)
    check.check(table, ["Other", "Wide"])  # under again
    check.check(table, ["Wide"])  # the same change seen twice counts once
    table.update(TopicConfig("Small", 400, 400), NOW)
    check.check(table, ["Small"])
    assert caplog.text.count("raise it (ulimit -n)") == 1
    table.update(TopicConfig("Small", 600, 600), NOW)
    check.check(table, ["Small"])
    assert caplog.text.count("raise it (ulimit -n)") == 2


def test_changes_hold_the_named_topics_or_none_for_a_deleted_one() -> None:
    table = make_table()
    table.update(TopicConfig("Kept", 4, 4), NOW)
    table.update(TopicConfig("Gone", 4, 4), NOW)
    table.delete("Gone", NOW)
    changes = table.changes(["Kept", "Gone"])
    assert changes == {
        "dataVersion": table.data_version.to_json(),
        "topicConfigTable": {"Kept": table.snapshot()["topicConfigTable"]["Kept"], "Gone": None},
    }


def test_snapshot_round_trips_in_rocketmq_shape() -> None:
    table = make_table()
    table.update(TopicConfig("T", 4, 2, order=True, attributes={"+message.type": "FIFO"}), NOW)
    document = table.snapshot()
    assert document["topicConfigTable"]["T"] == {
        "attributes": {"+message.type": "FIFO"},
        "order": True,
        "perm": 6,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "T",
        "topicSysFlag": 0,
        "writeQueueNums": 2,
    }
    reloaded = TopicTable(cluster_name="DefaultCluster", broker_name="broker-a")
    reloaded.load(document, NOW)
    assert reloaded.get("T") == table.get("T")
    assert reloaded.data_version.counter > table.data_version.counter


def test_snapshots_follow_every_change_of_the_table() -> None:
    """Each snapshot reuses the documents of topics that did not change: it must still show
    every update, creation and deletion made in between, in name order."""
    table = make_table()
    for i in range(300):
        table.update(TopicConfig(f"T{i:03}", 4, 4), NOW)
    table.snapshot()
    table.update(TopicConfig("T001", 8, 8), NOW)
    table.create_on_send("Sent", "TBW102", 2, NOW)
    for i in range(100, 300):
        table.delete(f"T{i:03}", NOW)
    expected = {name: config.to_json() for name, config in sorted(table.topics.items())}
    for _ in range(2):
        document = table.snapshot()["topicConfigTable"]
        assert document == expected
        assert list(document) == list(expected)
    assert document["T001"]["writeQueueNums"] == 8
    assert "T200" not in document
