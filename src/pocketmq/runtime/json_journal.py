"""A JSON document whose one big table changes a few entries at a time: `JournaledJsonFile`.

The broker's `topics.json` holds every topic, and a creation changes one of them. Rewriting the
whole file for each change (RocketMQ does) costs more with every entry there is; here a change
is appended to a journal beside the file and synced, which costs the same at any size, and the
file is rewritten now and then (`save`) with every change so far in it.

Files, beside the `JsonFile`'s own (`<path>`, `.bak`, `.tmp`):

- `<path>.journal.<n>`: a segment of changes, `n` the number of its first. One line a change:
  eight hex digits of the CRC-32 of the JSON that follows, a space, the JSON, a line end. A
  change is `{"seq": n, <field>: value, ..., <table>: {key: entry, or null for a removal}}`: its
  fields replace the document's, its entries the table's.
- The document in `<path>` carries `journalSequence`, the number of the last change it holds.

Invariants:

- A change `append` returned survives power loss: its segment was synced, and the directory
  when the segment was new.
- Only a change that `append` had not returned can be torn, and nothing after it in its segment
  was returned either: appends run one at a time, each synced before the next, and one that
  failed leaves its segment (the next change starts another). Reading a segment stops at its
  first line that fails its checksum or does not parse.
- `load` applies, in order, every change numbered after `journalSequence`; changes the file
  already holds are skipped, so a segment that a power loss brought back after its removal does
  no harm. Appends after a start go to a new segment, never after a tail that may be torn.
- `save` stamps the document with the last change appended and removes the segments it made
  redundant only once the file is durable. A clean stop that saves leaves no segment behind.
- When `load` falls back to `.bak` (the file is torn or gone), the changes between the two
  versions are lost with the file, as they would be without a journal; later ones apply.

Like `JsonFile`, it does not know what the document means, and callers run its blocking calls
off the event loop. The document given to `save` must hold every change appended before the
call: the caller takes it and saves it without an `append` in between.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from typing import Any, Final

import orjson

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileHandle, FileSystem
from pocketmq.runtime.json_file import JsonFile, encode_document

logger = logging.getLogger(__name__)

SEQUENCE_FIELD: Final = "journalSequence"
MIN_JOURNAL_BYTES: Final = 64 * 1024
"""A journal shorter than this never asks for a save, however small the file."""


class JournaledJsonFile(JsonFile):
    """A `JsonFile` whose `table` (a JSON object in the document) takes changes by `append`."""

    def __init__(
        self, path: str | os.PathLike[str], table: str, fs: FileSystem = OS_FILE_SYSTEM
    ) -> None:
        super().__init__(path, fs)
        self._table = table
        self._prefix = f"{self.path.name}.journal."
        self._journal_lock = threading.Lock()
        self._last_seq = 0
        self._segment: FileHandle | None = None
        self._segment_end = 0
        self._journal_bytes = 0
        self._file_bytes = 0

    @property
    def wants_save(self) -> bool:
        """True once the journal has grown past the file it journals: a `save` then costs less
        than the journal's growth, and a start reads no more than twice the file."""
        return self._journal_bytes > max(MIN_JOURNAL_BYTES, self._file_bytes)

    def load(self) -> Any | None:
        """The document as `JsonFile.load` reads it, with every later change applied (without
        `journalSequence`). None when neither the file nor a change exists.

        Raises:
            MetadataError: as `JsonFile.load`.
        """
        document = super().load()
        with self._journal_lock:
            self._last_seq = 0
            if isinstance(document, dict):
                base = document.pop(SEQUENCE_FIELD, 0)
                self._last_seq = base if isinstance(base, int) else 0
            applied = 0
            changes = self._read_journal()
            for change in changes:
                if change["seq"] <= self._last_seq:
                    continue  # the file holds it
                if not isinstance(document, dict):
                    document = {}
                _apply(document, self._table, change)
                self._last_seq = change["seq"]
                applied += 1
            if changes:
                logger.info("%s: applied %d of its %d journaled changes (the others it held)",
                            self.path, applied, len(changes))  # fmt: skip
            self._close_segment()
        return document

    def append(self, change: dict[str, Any]) -> None:
        """Adds one change (fields of the document, and entries of the table, None to remove
        one) and returns once it is durable.

        Raises:
            OSError: the disk refused it; the change may or may not survive, and the next one
                starts a new segment.
        """
        with self._journal_lock:
            seq = self._last_seq + 1
            body = orjson.dumps({"seq": seq, **change})
            line = b"%08x %s\n" % (zlib.crc32(body), body)
            try:
                if self._segment is None:
                    self._open_segment(seq)
                assert self._segment is not None
                self._segment.pwrite(line, self._segment_end)
                self._segment.sync()
                if self._segment_end == 0:
                    self._fs.sync_directory(self.path.parent)
            except BaseException:
                # Its number is spent (its bytes may be on disk): the next change, numbered
                # after it, starts a segment of its own.
                self._last_seq = seq
                self._close_segment()
                raise
            self._segment_end += len(line)
            self._journal_bytes += len(line)
            self._last_seq = seq

    def save(self, data: Any) -> None:
        """Writes `data` (holding every change appended so far) as the whole file, then removes
        the journal segments it makes redundant.

        Raises:
            TypeError, OSError: as `JsonFile.save`; the journal then stays as it was.
        """
        if not isinstance(data, dict):
            raise TypeError(f"a journaled document is a JSON object, not {type(data).__name__}")
        with self._journal_lock:
            stamp = self._last_seq
            self._close_segment()  # the next change starts a segment this save leaves alone
            content = encode_document({**data, SEQUENCE_FIELD: stamp})
            self._write(content)
            self._file_bytes = len(content)
            self._journal_bytes = 0
            for first, name in self._segments():
                if first <= stamp:
                    self._fs.remove(self.path.parent / name)

    def _segments(self) -> list[tuple[int, str]]:
        """(first change's number, file name) of each segment, in order."""
        prefix = len(self._prefix)
        return sorted(
            (int(name[prefix:]), name)
            for name in self._fs.list_dir(self.path.parent)
            if name.startswith(self._prefix) and name[prefix:].isdigit()
        )

    def _read_journal(self) -> list[dict[str, Any]]:
        """Every whole change of every segment, in order. Syncs what it read, the names in the
        directory too, so that nothing loaded now is lost by a power loss later: it may come
        from the page cache of a process that died before its sync (a change not yet synced,
        a new segment or a renamed file whose name was not)."""
        if self._fs.is_dir(self.path.parent):
            self._fs.sync_directory(self.path.parent)
        changes: list[dict[str, Any]] = []
        for _, name in self._segments():
            path = self.path.parent / name
            content = self._fs.read_bytes(path)
            read, end = _parse_segment(content)
            if end < len(content):
                logger.warning("%s: the change at byte %d is torn (its append had not returned); "
                               "ignored with the %d bytes after it", path, end,
                               len(content) - end)  # fmt: skip
            handle = self._fs.open(path)
            try:
                handle.sync()
            finally:
                handle.close()
            changes.extend(read)
        return changes

    def _open_segment(self, seq: int) -> None:
        self._fs.make_dirs(self.path.parent)
        handle = self._fs.open(self.path.parent / f"{self._prefix}{seq}", create=True)
        # A segment of this name left by a power loss holds no change that counts: a whole one
        # would have numbered this change after it.
        handle.truncate(0)
        self._segment = handle
        self._segment_end = 0

    def _close_segment(self) -> None:
        if self._segment is not None:
            self._segment.close()
            self._segment = None


def _parse_segment(content: bytes) -> tuple[list[dict[str, Any]], int]:
    """The whole changes at the start of a segment, and where the first that is not whole
    starts (the length of `content` when all are)."""
    changes = []
    start = 0
    while (end := content.find(b"\n", start)) >= 0:
        line = content[start:end]
        if len(line) < 10 or line[8:9] != b" ":
            break
        body = line[9:]
        try:
            if int(line[:8], 16) != zlib.crc32(body):
                break
            change = orjson.loads(body)
        except ValueError:
            break
        if not isinstance(change, dict) or not isinstance(change.get("seq"), int):
            break
        changes.append(change)
        start = end + 1
    return changes, start


def _apply(document: dict[str, Any], table_name: str, change: dict[str, Any]) -> None:
    table = document.get(table_name)
    if not isinstance(table, dict):
        table = document[table_name] = {}
    for field, value in change.items():
        if field == table_name and isinstance(value, dict):
            for key, entry in value.items():
                if entry is None:
                    table.pop(key, None)
                else:
                    table[key] = entry
        elif field != "seq":
            document[field] = value
