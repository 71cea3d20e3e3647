"""A durable JSON file: one document that survives a crash at any moment.

Brokers keep their metadata this way (topics, groups, offsets; see `store/metadata.py`), and the
NameServer its KV config. `JsonFile` owns the bytes of one such file and its companions:

- `<path>.tmp`: the next version while it is written; never read, so a torn one is harmless.
- `<path>.bak`: the version before the current one, read when `<path>` is missing or corrupt.

Invariant: at every instant, `<path>` or `<path>.bak` holds a complete version that `save` once
wrote (or that was there before). `save` writes and fsyncs the `.tmp` file, hard-links (or
copies) the current file aside, atomically renames `.tmp` over `<path>`, fsyncs the directory,
and only then renames the aside copy over `.bak`. Until the rename of `.tmp`, neither `<path>`
nor `.bak` has changed; after it, `<path>` is the new, fsynced version. (`.tmp` is removed
before it is written: a power loss during the rename may leave it a second name of `<path>`.)
A top-level value must be a JSON object or array, so no proper prefix of a saved file parses.

It does not know what the JSON means (its owner does, e.g. the broker's topic and offset tables)
and does not serialise concurrent writers across processes: one process owns each file.

All I/O is blocking. `save` of a big file (consumer offsets of many groups) costs a few
fsyncs; callers on the event loop run it in a thread (`await asyncio.to_thread(file.save,
data)`). Saves from several threads on one `JsonFile` are serialised by a lock.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any, Final

import orjson

from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem, write_file_durably

logger = logging.getLogger(__name__)


class MetadataError(ValueError):
    """Metadata files exist but none holds valid JSON: the broker must not start empty."""


class JsonFile:
    """A JSON document stored at `path`, with `.bak` as the crash fallback."""

    def __init__(self, path: str | os.PathLike[str], fs: FileSystem = OS_FILE_SYSTEM) -> None:
        self.path = Path(os.fspath(path))
        self._fs = fs
        self.backup_path = Path(f"{self.path}.bak")
        self.temp_path = Path(f"{self.path}.tmp")
        self._aside_path = Path(f"{self.path}.bak.tmp")
        self._lock = threading.Lock()
        # False once `load` found the main file corrupt: `save` then keeps the good `.bak`
        # instead of rotating the corrupt file into it.
        self._main_may_be_good = True

    def load(self) -> Any | None:
        """Reads the document: the main file, or `.bak` when the main one is missing or corrupt.

        A leftover `.tmp` file is never read. Falling back to `.bak` logs a WARNING naming both
        files; the caller carries on with the older version it returns.

        Returns:
            The parsed JSON value, or None when neither file exists (a fresh store).

        Raises:
            MetadataError: a file exists but neither parses. The operator restores one from a
                backup, or deletes both to start with empty metadata.
        """
        main_value, main_problem = _read_json(self._fs, self.path)
        if main_problem is None:
            self._main_may_be_good = True
            return main_value
        main_exists = not isinstance(main_problem, FileNotFoundError)
        self._main_may_be_good = not main_exists
        backup_value, backup_problem = _read_json(self._fs, self.backup_path)
        if backup_problem is None:
            logger.warning(
                "metadata file %s is %s; loaded the previous version from %s",
                self.path,
                _describe(main_problem),
                self.backup_path,
            )
            return backup_value
        backup_exists = not isinstance(backup_problem, FileNotFoundError)
        if not main_exists and not backup_exists:
            return None
        raise MetadataError(
            f"no readable metadata in {self.path} ({_describe(main_problem)}) or "
            f"{self.backup_path} ({_describe(backup_problem)}): restore one of them from a "
            f"backup, or delete both to start with empty metadata"
        )

    def save(self, data: Any) -> None:
        """Replaces the document with `data`, atomically and durably.

        Blocking: several writes and fsyncs. Run it off the event loop for big documents.

        Args:
            data: a JSON-serialisable dict or list.

        Raises:
            TypeError: `data` is not a dict or list, or holds something JSON cannot encode;
                nothing on disk has changed.
            OSError: the disk refused a write; `path` or `.bak` still holds the last good
                version, and `load` returns it.
        """
        if not isinstance(data, dict | list):
            # A torn prefix of a scalar (`12` of `123`) would parse; of an object it cannot.
            raise TypeError(f"metadata must be a JSON object or array, not {type(data).__name__}")
        self._write(encode_document(data))

    def _write(self, content: bytes) -> None:
        fs = self._fs
        with self._lock:
            fs.make_dirs(self.path.parent)
            # A power loss in the middle of the last save's rename may have left `.tmp` a
            # second name of the main file: written through, it would tear the main file.
            fs.remove(self.temp_path)
            write_file_durably(fs, self.temp_path, content)
            aside = self._main_may_be_good and self._set_main_aside()
            fs.rename(self.temp_path, self.path)
            fs.sync_directory(self.path.parent)
            self._main_may_be_good = True
            if aside:
                fs.rename(self._aside_path, self.backup_path)
                fs.sync_directory(self.path.parent)

    def _set_main_aside(self) -> bool:
        """Hard-links (or copies) the current main file to the aside path; False if none."""
        fs = self._fs
        fs.remove(self._aside_path)
        try:
            fs.link(self.path, self._aside_path)
        except FileNotFoundError:
            return False
        except OSError:
            # No hard links on this filesystem: a durable copy serves as well.
            try:
                content = fs.read_bytes(self.path)
            except FileNotFoundError:
                return False
            write_file_durably(fs, self._aside_path, content)
        return True


def _read_json(fs: FileSystem, path: Path) -> tuple[Any, Exception | None]:
    """(value, None) when `path` parses; (None, the reason) otherwise."""
    try:
        data = fs.read_bytes(path)
    except OSError as error:
        return None, error
    try:
        return json.loads(data), None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError
        return None, error


def _describe(problem: Exception | None) -> str:
    if isinstance(problem, FileNotFoundError):
        return "missing"
    if isinstance(problem, OSError):
        return f"unreadable: {problem.strerror or problem}"
    return f"not valid JSON: {problem}"


# What the standard encoder would make of anything else (a subclass of str or int, a
# dataclass, an integer over 64 bits) is left to it: the two write the same bytes for the rest,
# but for the exponent of a small float (`1.5e-7` against `1.5e-07`; metadata holds none).
_ORJSON_OPTIONS: Final = (
    orjson.OPT_INDENT_2
    | orjson.OPT_NON_STR_KEYS
    | orjson.OPT_APPEND_NEWLINE
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)


def encode_document(data: Any) -> bytes:
    """The document as `json.dumps(data, indent=2, ensure_ascii=False)` writes it, and a line
    end; orjson makes it about twenty times faster (a topics.json of thousands of topics is
    saved on every change of a topic)."""
    try:
        return orjson.dumps(data, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode()
