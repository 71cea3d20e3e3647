"""Finding where the CommitLog really ends after a stop, clean or not.

- Normal recovery (no `abort` marker: the last stop was clean): scan the last three files, as
  RocketMQ does; everything derived (queues, index) was flushed at the stop.
- Abnormal recovery (the `abort` marker survived: the process died): scan, with body CRCs, from
  a safe point: the newest file whose first record is no newer than the checkpoint's oldest
  timestamp. The first record that is torn, corrupt or stale ends the log: the rest is cut.
  Queues and index are then re-dispatched from the safe point (queues rewrite what they hold
from there on, the index ignores what it has).

Recovery marks nothing flushed: bytes found on disk after a crash may still sit only in the
page cache. The store syncs what it recovered before it serves (`MessageStore.load`).

A record is accepted only if its framing adds up, its magic code is known, its PHYSICALOFFSET
is where it lies (stale bytes from before a truncation never pass) and, in abnormal recovery,
its body CRC matches.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from pocketmq.common.stored_layout import LONG, peek_sys_flag, store_timestamp_pos
from pocketmq.common.stored_message import MessageDecodeError, peek_size_and_magic
from pocketmq.store.commitlog import CommitLog
from pocketmq.store.dispatch import RecordEnd, parse_dispatch
from pocketmq.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

NORMAL_RECOVERY_FILES: Final = 3
_ZERO_CHUNK: Final = bytes(64 * 1024)


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """Where the scan started (re-dispatch starts there too) and where the log ends."""

    abnormal: bool
    scan_start: int
    end_offset: int
    records: int
    torn_bytes_cleared: int


def recover_commit_log(
    commit_log: CommitLog, *, abnormal: bool, safe_timestamp: int
) -> RecoveryResult:
    """Sets the CommitLog's write position to the end of its last valid record."""
    files = commit_log.files.files
    if not files:
        return RecoveryResult(abnormal, 0, 0, 0, 0)
    if abnormal:
        start_index = _safe_point_index(files, safe_timestamp)
    else:
        start_index = max(0, len(files) - NORMAL_RECOVERY_FILES)
    scan_start = files[start_index].file_from_offset
    records = 0
    end_offset = scan_start
    index = start_index
    torn_at: tuple[MappedFile, int] | None = None
    while index < len(files):
        mapped = files[index]
        view = memoryview(mapped.buffer)
        pos = 0
        try:
            while pos < mapped.file_size:
                offset = mapped.file_from_offset + pos
                try:
                    request = parse_dispatch(view, pos, offset, check_crc=abnormal)
                except RecordEnd:
                    break
                except MessageDecodeError as exc:
                    log.warning("commit log ends at %d: %s; the rest is cut", offset, exc)
                    torn_at = (mapped, pos)
                    break
                if request is None:  # blank filler: the file is complete
                    pos = mapped.file_size
                    break
                pos += request.size
                records += 1
        finally:
            view.release()
        end_offset = mapped.file_from_offset + pos
        if pos < mapped.file_size:
            break
        index += 1
    cleared = _clear_torn_tail(*torn_at) if torn_at else 0
    _set_end(commit_log, end_offset)
    log.info(
        "%s recovery of the commit log: scanned %d records from %d, log ends at %d",
        "abnormal" if abnormal else "normal",
        records,
        scan_start,
        end_offset,
    )
    return RecoveryResult(abnormal, scan_start, end_offset, records, cleared)


def _safe_point_index(files: list[MappedFile], safe_timestamp: int) -> int:
    """The newest file whose first record was stored no later than `safe_timestamp`."""
    for index in range(len(files) - 1, -1, -1):
        mapped = files[index]
        try:
            size, _magic = peek_size_and_magic(mapped.buffer, 0)
        except MessageDecodeError:
            continue
        if size <= 0:
            continue
        first_timestamp = _first_store_timestamp(mapped)
        if first_timestamp is not None and 0 < first_timestamp <= safe_timestamp:
            return index
    return 0


def _first_store_timestamp(mapped: MappedFile) -> int | None:
    buf = mapped.buffer
    pos = store_timestamp_pos(peek_sys_flag(buf, 0))
    if pos + LONG.size > mapped.file_size:
        return None
    stamp: int = LONG.unpack_from(buf, pos)[0]
    return stamp


def _clear_torn_tail(mapped: MappedFile, position: int) -> int:
    """Zeroes the torn record and whatever follows it, up to the first all-zero chunk.

    Past the last record a file holds zeros (new files are sparse, truncation zeroes what it
    cuts), so the first zero chunk after the torn bytes ends the damage. Zeroing matters: a
    later append of a shorter record must not leave an old, valid-looking record behind it.
    """
    buf = mapped.buffer
    size = len(_ZERO_CHUNK)
    end = position
    while end < mapped.file_size:
        n = min(size, mapped.file_size - end)
        if end > position and buf[end : end + n] == _ZERO_CHUNK[:n]:
            break
        buf[end : end + n] = _ZERO_CHUNK[:n]
        end += n
    mapped.sync()  # the torn bytes must not come back after another power loss
    return end - position


def _set_end(commit_log: CommitLog, end_offset: int) -> None:
    """Marks files up to `end_offset` as written and removes the files after it."""
    queue = commit_log.files
    keep: list[MappedFile] = []
    for mapped in queue.files:
        if mapped.file_from_offset > end_offset or (mapped.file_from_offset == end_offset and keep):
            mapped.destroy()
            continue
        mapped.wrote_position = min(end_offset - mapped.file_from_offset, mapped.file_size)
        keep.append(mapped)
    if len(keep) < len(queue.files):
        queue.fs.sync_directory(queue.directory)
    queue.files = keep
