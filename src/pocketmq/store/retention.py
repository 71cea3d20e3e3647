"""Retention: deleting old CommitLog files, then the queue and index entries that pointed at them.

RocketMQ's rules (`CleanCommitLogService`): a CommitLog file may go once it was last modified
more than `fileReservedTime` hours ago, and deletion runs at the hours of `deleteWhen`
(`"04"`, or several joined by `;`), or at any hour once disk use passes
`diskMaxUsedSpaceRatio` percent. Past the force ratio (`diskSpaceCleanForciblyRatio`, 85) files
go even if they are not expired yet, oldest first. The last (current) file is never deleted.

After the CommitLog's min offset moves, every ConsumeQueue drops the files that only point
below it and moves its min offset, and the index drops files that end below it.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)

DISK_SPACE_CLEAN_FORCIBLY_RATIO: Final = 85
DELETE_FILES_BATCH_MAX: Final = 10


def disk_used_percent(path: Path) -> float:
    """How full the file system holding `path` is, in percent."""
    usage = shutil.disk_usage(path)
    return 100.0 * usage.used / usage.total if usage.total else 0.0


def parse_delete_when(text: str) -> frozenset[int]:
    """The hours of `deleteWhen` ("04", "04;05"); bad parts are skipped with a warning."""
    hours = set()
    for part in text.split(";"):
        part = part.strip()
        if part.isdigit() and 0 <= int(part) < 24:
            hours.add(int(part))
        elif part:
            log.warning("deleteWhen: ignoring %r, expected an hour 00-23", part)
    return frozenset(hours)


@dataclass(frozen=True, slots=True)
class CleanResult:
    """What one retention pass did."""

    commit_log_files: int
    queue_files: int
    index_files: int
    reason: str


class RetentionPolicy:
    """Decides which CommitLog files to delete; the store applies the decision."""

    def __init__(
        self,
        *,
        clock: Clock,
        file_reserved_time_hours: float,
        delete_when: str,
        disk_max_used_space_ratio: int,
        disk_usage: Callable[[], float],
        local_hour: Callable[[int], int] | None = None,
    ) -> None:
        self._clock = clock
        self._reserved_ms = int(file_reserved_time_hours * 3_600_000)
        self._hours = parse_delete_when(delete_when)
        self._max_ratio = disk_max_used_space_ratio
        self._disk_usage = disk_usage
        self._local_hour = local_hour or (lambda now_ms: time.localtime(now_ms / 1000).tm_hour)

    def reason_to_clean(self) -> tuple[str, bool] | None:
        """Why this is a time to delete, and whether unexpired files may go too; or None."""
        used = self._disk_usage()
        if used >= DISK_SPACE_CLEAN_FORCIBLY_RATIO:
            return f"disk {used:.0f}% full (force ratio {DISK_SPACE_CLEAN_FORCIBLY_RATIO}%)", True
        if used >= self._max_ratio:
            return f"disk {used:.0f}% full (diskMaxUsedSpaceRatio {self._max_ratio}%)", False
        if self._local_hour(self._clock.now_ms()) in self._hours:
            return "deleteWhen hour", False
        return None

    def files_to_delete(self, files: list[tuple[Path, int]], *, force: bool) -> list[Path]:
        """The oldest files (path, mtime ms) to delete, never the last, at most a batch."""
        now = self._clock.now_ms()
        chosen: list[Path] = []
        for path, mtime_ms in files[:-1]:
            if len(chosen) >= DELETE_FILES_BATCH_MAX:
                break
            if now - mtime_ms >= self._reserved_ms or (force and not chosen):
                chosen.append(path)
            else:
                break  # files are in age order: the next ones are younger
        return chosen
