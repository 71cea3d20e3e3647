"""Epochs of a broker group in controller mode: where two replicas' CommitLogs stop agreeing
(RocketMQ's `AutoSwitchHAClient` truncation), and the epoch file each replica keeps.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pocketmq.broker.ha.epochs import FILE_NAME, EpochEntry, EpochFile, consistent_point, ends

E = EpochEntry


def test_each_epoch_ends_where_the_next_begins_and_the_last_at_the_head() -> None:
    assert ends([E(1, 0), E(2, 100), E(4, 250)], 400) == [100, 250, 400]


@pytest.mark.parametrize(
    ("mine", "my_max", "theirs", "their_max", "point"),
    [
        pytest.param(
            [E(1, 0), E(2, 100)], 300, [E(1, 0), E(2, 100)], 300, 300, id="same-history"
        ),
        pytest.param(
            [E(1, 0), E(2, 100)], 250, [E(1, 0), E(2, 100)], 400, 250, id="slave-behind"
        ),
        # The old master wrote past what the new one (same epoch) holds: those bytes go.
        pytest.param(
            [E(1, 0), E(2, 100)], 350, [E(1, 0), E(2, 100)], 300, 300,
            id="slave-ahead-in-the-same-epoch",
        ),
        # The slave led epoch 2, which the master never saw; the master's epoch 3 started
        # inside what the slave holds of epoch 1: cut to where epoch 3 starts.
        pytest.param(
            [E(1, 0), E(2, 150)], 200, [E(1, 0), E(3, 120)], 500, 120,
            id="slave-epoch-the-master-never-had",
        ),
        # ... or the slave's own epoch 2 started first: cut to where epoch 1 ended here.
        pytest.param(
            [E(1, 0), E(2, 100)], 180, [E(1, 0), E(3, 130)], 500, 100,
            id="slave-epoch-started-first",
        ),
        # Same epoch number, another start: a different term's bytes, not common.
        pytest.param(
            [E(1, 0), E(2, 90)], 180, [E(1, 0), E(2, 100)], 500, 90, id="same-epoch-other-start"
        ),
        pytest.param([E(2, 0)], 100, [E(1, 0), E(3, 50)], 200, None, id="no-common-epoch"),
    ],
)  # fmt: skip
def test_consistent_point(
    mine: list[EpochEntry], my_max: int, theirs: list[EpochEntry], their_max: int,
    point: int | None,
) -> None:  # fmt: skip
    assert consistent_point(mine, my_max, theirs, their_max) == point


def epoch_file(tmp_path: Path) -> EpochFile:
    epochs = EpochFile(tmp_path / FILE_NAME)
    epochs.load()
    return epochs


def test_a_new_epoch_file_is_empty(tmp_path: Path) -> None:
    epochs = epoch_file(tmp_path)
    assert (epochs.entries, epochs.last_epoch) == ([], 0)


def test_a_replica_without_epochs_lists_none_on_the_wire(tmp_path: Path) -> None:
    # GET_BROKER_EPOCH_CACHE and the replica's status ask this of a broker that has not
    # served or followed any master yet.
    assert epoch_file(tmp_path).to_wire(0) == []


def test_a_master_without_epochs_shares_none() -> None:
    assert consistent_point([E(1, 0)], 100, [], 0) is None


def test_begin_appends_an_epoch_and_survives_a_restart(tmp_path: Path) -> None:
    epochs = epoch_file(tmp_path)
    epochs.begin(1, 0)
    epochs.begin(3, 4096)
    assert epochs.entries == [E(1, 0), E(3, 4096)]
    assert epochs.last_epoch == 3
    assert epoch_file(tmp_path).entries == [E(1, 0), E(3, 4096)]


def test_begin_replaces_epochs_it_outlives(tmp_path: Path) -> None:
    epochs = epoch_file(tmp_path)
    epochs.begin(1, 0)
    epochs.begin(2, 100)
    epochs.begin(4, 300)  # adopted from a master, never reached here
    epochs.begin(3, 200)
    assert epochs.entries == [E(1, 0), E(2, 100), E(3, 200)]
    epochs.begin(3, 250)  # the same term begun again (a restart before any write)
    assert epochs.entries == [E(1, 0), E(2, 100), E(3, 250)]
    epochs.begin(5, 150)  # the CommitLog was cut back below epoch 3's start
    assert epochs.entries == [E(1, 0), E(2, 100), E(5, 150)]
    assert epoch_file(tmp_path).entries == [E(1, 0), E(2, 100), E(5, 150)]


def test_adopt_after_a_cut_takes_the_masters_epochs_from_the_point_on(tmp_path: Path) -> None:
    epochs = epoch_file(tmp_path)
    epochs.begin(1, 0)
    epochs.begin(2, 100)  # led epoch 2, which the new master never saw
    theirs = [E(1, 0), E(3, 100)]
    point = consistent_point(epochs.entries, 180, theirs, 300)
    assert point == 100
    epochs.adopt(theirs, point)
    assert epochs.entries == [E(1, 0), E(3, 100)]
    assert epoch_file(tmp_path).entries == [E(1, 0), E(3, 100)]


def test_adopt_keeps_a_shared_history_and_appends_newer_epochs(tmp_path: Path) -> None:
    epochs = epoch_file(tmp_path)
    epochs.begin(1, 0)
    epochs.begin(3, 100)
    theirs = [E(1, 0), E(3, 100), E(4, 400)]
    point = consistent_point(epochs.entries, 150, theirs, 500)
    assert point == 150
    epochs.adopt(theirs, point)
    assert epochs.entries == theirs
    epochs.adopt(theirs, point)  # nothing new: nothing saved, nothing changed
    assert epoch_file(tmp_path).entries == theirs


def test_an_adopted_epoch_not_yet_streamed_gives_way_to_a_newer_master(tmp_path: Path) -> None:
    epochs = epoch_file(tmp_path)
    epochs.begin(1, 0)
    epochs.adopt([E(1, 0), E(4, 400)], 150)  # holds 150 bytes; epoch 4 starts at 400
    theirs = [E(1, 0), E(5, 300)]
    point = consistent_point(epochs.entries, 150, theirs, 600)
    assert point is not None
    assert point >= 150  # the 150 bytes of epoch 1 are common: nothing is cut
    epochs.adopt(theirs, point)
    assert epochs.entries == [E(1, 0), E(5, 300)]


def test_to_wire_ends_each_epoch_where_the_next_starts_and_the_last_at_the_head(
    tmp_path: Path,
) -> None:
    epochs = epoch_file(tmp_path)
    epochs.begin(1, 0)
    epochs.begin(2, 1024)
    assert epochs.to_wire(4096) == [
        {"endOffset": 1024, "epoch": 1, "startOffset": 0},
        {"endOffset": 4096, "epoch": 2, "startOffset": 1024},
    ]
