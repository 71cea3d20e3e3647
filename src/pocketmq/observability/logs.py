"""Where a process's log lines go and what they look like: levels, formats, files, rotation.

`configure_logging(settings)` is the one entry point; the CLI calls it once, after parsing its
flags. It installs handlers on the root logger (so asyncio's and grpc's lines land beside ours)
and sets levels; modules keep logging through `logging.getLogger(__name__)`.

Levels: a default level for the root logger plus levels per component. A component is a short
name from the table below (it sets the level of each logger it lists) or a full logger name
(`pocketmq.broker.send`). Python's inheritance applies: `broker=DEBUG` also makes the loggers
below `pocketmq.broker` (ha, dledger) DEBUG unless they are named too (`broker=DEBUG,ha=INFO`).

Formats: `text` (`2026-11-27 13:45:01,123 INFO  pocketmq.broker.send: topic created topic=T`),
`kv` (logfmt: `ts=2026-11-27T13:45:01.123Z level=INFO logger=... msg="topic created" topic=T`)
and `json` (one object per line: `ts`, `level`, `logger`, `msg`, the fields, `exc`). Fields come
from `extra={"fields": {...}}` or from `event(log, "topic created", topic=t)`. kv and json keep
every record on one line (a traceback becomes an escaped `exc` value); text prints tracebacks as
Python does. A field named like a fixed key (`ts`, `level`, `logger`, `msg`, `exc`, `stack`) is
written as `field_<name>` so it never hides the fixed one.

Files (only with `log_dir`): every line goes to `pocketmq.log` (RocketMQ's broker_default.log),
and a line from a pocketmq logger also goes to its component's file, chosen by the longest
matching logger-name prefix:

    component   file             loggers
    broker      broker.log       pocketmq.broker, pocketmq.container, pocketmq.cli
    ha          ha.log           pocketmq.broker.ha, pocketmq.broker.controlled
    raft        raft.log         pocketmq.raft, pocketmq.raftkv, pocketmq.broker.dledger
    store       store.log        pocketmq.store
    remoting    remoting.log     pocketmq.remoting
    controller  controller.log   pocketmq.controller
    proxy       proxy.log        pocketmq.proxy
    namesrv     namesrv.log      pocketmq.namesrv
    client      client.log       pocketmq.client, pocketmq.spark, pocketmq.admin
    acl         broker.log       pocketmq.acl
    audit       audit.log        pocketmq.audit

Other loggers (`pocketmq` itself, `pocketmq.up`, `pocketmq.runtime`, asyncio ...) go to
`pocketmq.log` only. A file is opened on its first line, so a component that never logs leaves
no file. Each file rotates when it has reached `max_bytes` (it may pass it by one line) or at
local midnight, whichever comes first; the old file is renamed `<file>.<YYYY-mm-dd_HH-MM-SS>`
(`.<n>` appended when a name is taken) and only the newest `backups` of them are kept.

Console: lines also go to stderr when no `log_dir` is set, when stderr is a terminal, or when
`console` forces it; a server started by a test with a log directory writes files only. As
`logging.basicConfig` does, the console is left alone when the root logger already has handlers
someone else installed (pytest, a program that runs the CLI in-process), unless forced.

Deliberately missing: asynchronous (queued) handlers, compression of old files, and retention
by age; re-configuring replaces the handlers this module installed and resets the levels of
the `pocketmq` loggers, and leaves other handlers (pytest's) alone.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import math
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, TextIO

LogFormat = Literal["text", "kv", "json"]

LOG_FORMATS: Final[tuple[LogFormat, ...]] = ("text", "kv", "json")
LEVEL_NAMES: Final = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_BYTES_DEFAULT: Final = 128 << 20
BACKUPS_DEFAULT: Final = 10
ALL_LINES_FILE: Final = "pocketmq.log"
TEXT_FORMAT: Final = "%(asctime)s %(levelname)-5s %(name)s: %(message)s"
LEVEL_SYNTAX: Final = (
    "expected LEVEL or LEVEL,COMPONENT=LEVEL,... e.g. INFO,store=DEBUG; LEVEL is one of "
    + ", ".join(LEVEL_NAMES)
)


@dataclass(frozen=True, slots=True)
class Component:
    """A part of pocketmq as an operator names it: its log file and the loggers it covers."""

    file: str
    loggers: tuple[str, ...]


COMPONENTS: Final[Mapping[str, Component]] = {
    "broker": Component("broker.log", ("pocketmq.broker", "pocketmq.container", "pocketmq.cli")),
    "ha": Component("ha.log", ("pocketmq.broker.ha", "pocketmq.broker.controlled")),
    "raft": Component("raft.log", ("pocketmq.raft", "pocketmq.raftkv", "pocketmq.broker.dledger")),
    "store": Component("store.log", ("pocketmq.store",)),
    "remoting": Component("remoting.log", ("pocketmq.remoting",)),
    "controller": Component("controller.log", ("pocketmq.controller",)),
    "proxy": Component("proxy.log", ("pocketmq.proxy",)),
    "namesrv": Component("namesrv.log", ("pocketmq.namesrv",)),
    "client": Component("client.log", ("pocketmq.client", "pocketmq.spark", "pocketmq.admin")),
    "acl": Component("broker.log", ("pocketmq.acl",)),
    "audit": Component("audit.log", ("pocketmq.audit",)),
}

_FILE_BY_LOGGER: Final = {
    logger: component.file for component in COMPONENTS.values() for logger in component.loggers
}
_FIXED_KEYS: Final = frozenset({"ts", "level", "logger", "msg", "exc", "stack"})
_HANDLER_PREFIX: Final = "pocketmq.observability."
_LOGGER_NAME = re.compile(r"pocketmq(\.[A-Za-z0-9_]+)*")
_KV_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-/]")
# A kv value is written bare only when a logfmt reader cannot mistake where it ends.
_KV_BARE = re.compile(r"[^\s\"=\\\x00-\x1f\x7f]+")
_ROTATED_SUFFIX = re.compile(r"(\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d)(?:\.(\d+))?")


class LogSetupError(Exception):
    """The log directory cannot be created or written; the message names it and says why."""


@dataclass(frozen=True, slots=True)
class LogLevels:
    """A default level plus levels for components (short names) or full logger names.

    `components` keeps the order given; a later entry for the same name wins.
    """

    default: int = logging.INFO
    components: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> LogLevels:
        """Reads `INFO` or `INFO,store=DEBUG,pocketmq.broker.send=WARNING` (any case).

        Raises:
            ValueError: one line quoting `text` and stating the syntax.
        """
        default: int | None = None
        components: list[tuple[str, int]] = []
        for item in text.split(","):
            name, equals, level_text = item.strip().rpartition("=")
            level = _level_number(level_text)
            component = _component_name(name.strip()) if equals else None
            if level is None:
                problem = f"unknown level {level_text.strip()!r}"
            elif equals and component is None:
                problem = f"unknown component {name.strip()!r}"
            elif not equals and default is not None:
                problem = "more than one default level"
            else:
                if component is None:
                    default = level
                else:
                    components.append((component, level))
                continue
            raise ValueError(f"invalid choice: {text!r} ({problem}; {LEVEL_SYNTAX})")
        return cls(logging.INFO if default is None else default, tuple(components))

    def described(self) -> str:
        """The canonical text of these levels, which `parse` reads back to an equal value."""
        items = [logging.getLevelName(self.default)]
        items += [f"{name}={logging.getLevelName(level)}" for name, level in self.components]
        return ",".join(items)

    def logger_levels(self) -> dict[str, int]:
        """Logger name -> level, short component names expanded; the root's is under ""."""
        levels = {"": self.default}
        for name, level in self.components:
            component = COMPONENTS.get(name)
            for logger in component.loggers if component else (name,):
                levels[logger] = level
        return levels


@dataclass(frozen=True, slots=True)
class LogSettings:
    """How a process logs; the CLI builds one from its `--log-*` flags.

    Attributes:
        level: the default level and the levels per component.
        format: "text", "kv" (logfmt) or "json".
        log_dir: where the files go; None writes to stderr only.
        max_bytes: a file rotates once it has reached this size.
        backups: how many rotated files of each kind are kept (1 or more).
        console: write to stderr too, even with a log_dir, a stderr that is no terminal, or
            root handlers installed by someone else.
    """

    level: LogLevels = field(default_factory=LogLevels)
    format: LogFormat = "text"
    log_dir: str | None = None
    max_bytes: int = MAX_BYTES_DEFAULT
    backups: int = BACKUPS_DEFAULT
    console: bool = False

    def __post_init__(self) -> None:
        if self.format not in LOG_FORMATS:
            raise ValueError(f"log format {self.format!r} is not one of {', '.join(LOG_FORMATS)}")
        if self.max_bytes < 1 or self.backups < 1:
            raise ValueError("max_bytes and backups must be 1 or more")


def configure_logging(settings: LogSettings, stderr: TextIO | None = None) -> None:
    """Installs this process's log handlers and levels, replacing any this function installed.

    Args:
        settings: levels, format, files and console.
        stderr: the console stream; `sys.stderr` unless a test passes its own (then the rule
            about handlers installed by others does not apply).

    Raises:
        LogSetupError: `settings.log_dir` cannot be created or written; nothing was changed.
            The CLI prints it as one line and exits.
    """
    stream = sys.stderr if stderr is None else stderr
    if settings.log_dir is not None:
        _prepare_directory(settings.log_dir)
    root = logging.getLogger()
    for handler in list(root.handlers):
        if _is_ours(handler):
            root.removeHandler(handler)
            handler.close()
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and _LOGGER_NAME.fullmatch(name):
            logger.setLevel(logging.NOTSET)
    for name, level in settings.level.logger_levels().items():
        logging.getLogger(name or None).setLevel(level)

    formatter = _formatter(settings.format)
    handlers: list[logging.Handler] = []
    if settings.log_dir is not None:
        handlers.append(
            SizeAndDayRotatingFileHandler(
                os.path.join(settings.log_dir, ALL_LINES_FILE), settings.max_bytes, settings.backups
            )
        )
        handlers.append(
            ComponentFilesHandler(settings.log_dir, settings.max_bytes, settings.backups)
        )
    hosted = stderr is None and any(not _is_ours(h) for h in root.handlers)
    if settings.console or (not hosted and (settings.log_dir is None or _is_terminal(stream))):
        handlers.append(logging.StreamHandler(stream))
    for handler in handlers:
        handler.set_name(_HANDLER_PREFIX + type(handler).__name__)
        handler.setFormatter(formatter)
        root.addHandler(handler)


def event(
    logger: logging.Logger, message: str, /, level: int = logging.INFO, **fields: object
) -> None:
    """Logs `message` with structured fields: `event(log, "topic created", topic=t, queues=8)`.

    Like `logger.log(level, message, extra={"fields": fields})`, except that `message` is
    taken as it is, never %-formatted. A field cannot be named `level`.
    """
    if logger.isEnabledFor(level):
        logger.log(level, "%s", message, extra={"fields": fields}, stacklevel=2)


def file_for_logger(name: str) -> str | None:
    """The component file for logger `name` (longest prefix in the table), or None."""
    while name:
        found = _FILE_BY_LOGGER.get(name)
        if found is not None:
            return found
        name = name.rpartition(".")[0]
    return None


class SizeAndDayRotatingFileHandler(logging.handlers.TimedRotatingFileHandler):
    """A file that rotates at local midnight or once it has reached `max_bytes`.

    The rotated name starts with the file's own (`broker.log.2026-11-27_13-45-01`) and carries
    the time of the rotation, so names sort in rotation order and retention can find them.
    """

    def __init__(self, path: str, max_bytes: int, backups: int) -> None:
        super().__init__(path, when="midnight", backupCount=backups, encoding="utf-8", delay=True)
        self.max_bytes = max_bytes

    def shouldRollover(self, record: logging.LogRecord) -> int:
        if super().shouldRollover(record):
            return True
        return self.stream is not None and self.stream.tell() >= self.max_bytes

    def rotation_filename(self, default_name: str) -> str:
        # The base class names the file after the day it started, which two size rotations in
        # one day would share: name it after now, numbered past any file of the same second
        # (past, not into a gap that retention left, so names keep sorting in rotation order).
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        taken = [number for found, number, _ in self._rotated() if found == stamp]
        if not taken:
            return f"{self.baseFilename}.{stamp}"
        return f"{self.baseFilename}.{stamp}.{max(taken) + 1}"

    def getFilesToDelete(self) -> list[str]:
        directory = os.path.dirname(self.baseFilename)
        rotated = sorted(self._rotated())
        surplus = len(rotated) - self.backupCount
        return [os.path.join(directory, name) for *_, name in rotated[: max(surplus, 0)]]

    def _rotated(self) -> list[tuple[str, int, str]]:
        """(time stamp, number, file name) of each rotated file of this one."""
        directory, base = os.path.split(self.baseFilename)
        rotated = []
        for name in os.listdir(directory):
            found = _ROTATED_SUFFIX.fullmatch(name[len(base) + 1 :])
            if name.startswith(base + ".") and found:
                rotated.append((found.group(1), int(found.group(2) or 0), name))
        return rotated


class ComponentFilesHandler(logging.Handler):
    """Sends each record to its component's file (see the module docstring's table).

    One handler instead of one per file with a filter: a record costs one lookup, and a file
    handler is made only when its component first logs.
    """

    def __init__(self, directory: str, max_bytes: int, backups: int) -> None:
        super().__init__()
        self._directory = directory
        self._max_bytes = max_bytes
        self._backups = backups
        self._files: dict[str, SizeAndDayRotatingFileHandler] = {}
        self._file_by_logger: dict[str, str | None] = {}

    def emit(self, record: logging.LogRecord) -> None:
        name = record.name
        if name not in self._file_by_logger:
            self._file_by_logger[name] = file_for_logger(name)
        file = self._file_by_logger[name]
        if file is None:
            return
        handler = self._files.get(file)
        if handler is None:
            path = os.path.join(self._directory, file)
            handler = SizeAndDayRotatingFileHandler(path, self._max_bytes, self._backups)
            handler.setFormatter(self.formatter)
            self._files[file] = handler
        handler.handle(record)

    def setFormatter(self, fmt: logging.Formatter | None) -> None:
        super().setFormatter(fmt)
        for handler in self._files.values():
            handler.setFormatter(fmt)

    def close(self) -> None:
        self.acquire()
        try:
            for handler in self._files.values():
                handler.close()
            self._files.clear()
        finally:
            self.release()
        super().close()


class TextFormatter(logging.Formatter):
    """Today's text lines, with the record's fields appended as ` key=value`."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:
        line = super().formatMessage(record)
        fields = _fields(record)
        if not fields:
            return line
        return line + " " + " ".join(f"{_kv_key(k)}={_kv_value(v)}" for k, v in fields.items())


class KvFormatter(logging.Formatter):
    """logfmt: `ts=... level=... logger=... msg="..." key=value ...`, always one line."""

    def format(self, record: logging.LogRecord) -> str:
        pairs = _members(self, record)
        return " ".join(f"{_kv_key(key)}={_kv_value(value)}" for key, value in pairs.items())


class JsonFormatter(logging.Formatter):
    """One JSON object per line with the same members as kv."""

    def format(self, record: logging.LogRecord) -> str:
        members = {key: _json_value(value) for key, value in _members(self, record).items()}
        return json.dumps(members, ensure_ascii=False, default=str)


def _members(formatter: logging.Formatter, record: logging.LogRecord) -> dict[str, object]:
    """The fixed members, then the fields, then the exception and stack when there are any."""
    seconds = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
    members: dict[str, object] = {
        "ts": f"{seconds}.{int(record.msecs):03d}Z",
        "level": record.levelname,
        "logger": record.name,
        "msg": record.getMessage(),
    }
    for key, value in _fields(record).items():
        members[f"field_{key}" if key in _FIXED_KEYS else key] = value
    if record.exc_info and not record.exc_text:  # cached on the record as Formatter does
        record.exc_text = formatter.formatException(record.exc_info)
    if record.exc_text:
        members["exc"] = record.exc_text
    if record.stack_info:
        members["stack"] = formatter.formatStack(record.stack_info)
    return members


def _fields(record: logging.LogRecord) -> Mapping[str, object]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


def _kv_key(key: object) -> str:
    return _KV_KEY_UNSAFE.sub("_", str(key)) or "_"


def _kv_value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else str(value)
    if _KV_BARE.fullmatch(text):
        return text
    return json.dumps(text, ensure_ascii=False)  # quotes, backslashes and newlines escaped


def _json_value(value: object) -> object:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # json.dumps would write NaN, which JSON readers reject
    return value


def _formatter(log_format: LogFormat) -> logging.Formatter:
    if log_format == "kv":
        return KvFormatter()
    if log_format == "json":
        return JsonFormatter()
    return TextFormatter()


def _level_number(text: str) -> int | None:
    name = text.strip().upper()
    return logging.getLevelNamesMapping()[name] if name in LEVEL_NAMES else None


def _component_name(name: str) -> str | None:
    if name.lower() in COMPONENTS:
        return name.lower()
    return name if _LOGGER_NAME.fullmatch(name) else None


def _prepare_directory(path: str) -> None:
    try:
        os.makedirs(path, mode=0o750, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as error:
        reason = error.strerror or str(error)
        raise LogSetupError(f"log directory {path} cannot be used ({reason})") from None


def _is_ours(handler: logging.Handler) -> bool:
    return (handler.name or "").startswith(_HANDLER_PREFIX)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False
