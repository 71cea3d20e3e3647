"""Epochs of a broker group in controller mode: each master term starts an epoch at the
CommitLog offset where its writes begin, recorded on every replica (RocketMQ's
`EpochFileCache`, kept here as `<storePathRootDir>/epochFileCheckpoint`, crash-safe JSON).

Two replicas agree on their CommitLogs up to the end of the last epoch both hold with the same
start offset: before a replica follows a master it cuts its own log back to that point
(`consistent_point`), which removes what an old master wrote but never had acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.runtime.json_file import JsonFile

log = logging.getLogger(__name__)

FILE_NAME = "epochFileCheckpoint"


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def ends(entries: Sequence[EpochEntry], max_offset: int) -> list[int]:
    """Where each epoch's bytes end: the next epoch's start, the last one at `max_offset`."""
    if not entries:
        return []
    return [entry.start_offset for entry in entries[1:]] + [max_offset]


def consistent_point(
    mine: Sequence[EpochEntry],
    my_max: int,
    theirs: Sequence[EpochEntry],
    their_max: int,
) -> int | None:
    """The offset up to which two replicas hold the same bytes, or None when they share no
    epoch. Walks this replica's epochs from the newest: the first one the other holds with the
    same start is common, and both hold its bytes up to where the shorter of the two ends."""
    their_end = dict(zip((e.epoch for e in theirs), ends(theirs, their_max), strict=True))
    their_start = {e.epoch: e.start_offset for e in theirs}
    for entry, my_end in reversed(list(zip(mine, ends(mine, my_max), strict=True))):
        if their_start.get(entry.epoch) == entry.start_offset:
            return min(my_end, their_end[entry.epoch])
    return None


class EpochFile:
    """This replica's epochs, oldest first; every change is saved before it returns."""

    def __init__(self, path: Path, fs: FileSystem = OS_FILE_SYSTEM) -> None:
        self._file = JsonFile(path, fs)
        self.entries: list[EpochEntry] = []

    def load(self) -> None:
        document = self._file.load() or {}
        self.entries = [EpochEntry(int(e), int(s)) for e, s in document.get("epochs", [])]

    def _save(self) -> None:
        self._file.save({"epochs": [[e.epoch, e.start_offset] for e in self.entries]})

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def begin(self, epoch: int, start_offset: int) -> None:
        """This replica masters `epoch` from `start_offset`: entries of that epoch or later
        (from a term it never served in full) are replaced."""
        kept = [e for e in self.entries if e.epoch < epoch and e.start_offset <= start_offset]
        self.entries = [*kept, EpochEntry(epoch, start_offset)]
        self._save()
        log.info("epoch %d begins at CommitLog offset %d", epoch, start_offset)

    def adopt(self, theirs: Sequence[EpochEntry], point: int) -> None:
        """After cutting back to `point`: keeps this replica's epochs that start before it and
        takes the master's from there on (they describe what it streams next)."""
        kept = [e for e in self.entries if e.start_offset < point]
        known = {e.epoch for e in kept}
        newest = kept[-1].epoch if kept else 0
        later = [e for e in theirs if e.epoch not in known and e.epoch > newest]
        entries = [*kept, *later]
        if entries != self.entries:
            self.entries = entries
            self._save()

    def to_wire(self, max_offset: int) -> list[dict[str, int]]:
        """RocketMQ's `EpochEntry` list (GET_BROKER_EPOCH_CACHE): the last ends at the head."""
        return [
            {"endOffset": end, "epoch": e.epoch, "startOffset": e.start_offset}
            for e, end in zip(self.entries, ends(self.entries, max_offset), strict=True)
        ]
