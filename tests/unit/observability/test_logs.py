"""Log levels per component, the text/kv/json formats, files per component and their rotation."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.cli.main import _admin_command_problem, build_parser, log_settings, main
from pocketmq.observability.logs import (
    JsonFormatter,
    KvFormatter,
    LogLevels,
    LogSettings,
    LogSetupError,
    SizeAndDayRotatingFileHandler,
    TextFormatter,
    configure_logging,
    event,
    file_for_logger,
)


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """Undoes what `configure_logging` did to the process-wide logging state."""
    root = logging.getLogger()
    handlers = list(root.handlers)
    root_level = root.level
    loggers = logging.Logger.manager.loggerDict
    levels = {name: lg.level for name, lg in loggers.items() if isinstance(lg, logging.Logger)}
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
            handler.close()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(root_level)
    for name, logger in list(loggers.items()):
        if isinstance(logger, logging.Logger):
            logger.setLevel(levels.get(name, logging.NOTSET))


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def record(
    message: str = "topic created",
    fields: dict[str, object] | None = None,
    name: str = "pocketmq.broker.send",
) -> logging.LogRecord:
    made = logging.LogRecord(name, logging.INFO, __file__, 1, message, None, None)
    made.created = 1795787101.123  # 2026-11-27T13:45:01.123Z
    made.msecs = 123.0
    if fields is not None:
        made.fields = fields
    return made


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def our_handlers() -> list[logging.Handler]:
    return [h for h in logging.getLogger().handlers if (h.name or "").startswith("pocketmq.")]


# -- levels ----------------------------------------------------------------------------------


def test_component_levels_set_their_loggers_and_the_rest_follow_the_default() -> None:
    levels = LogLevels.parse("WARNING,store=DEBUG,raft=ERROR,pocketmq.broker.send=ERROR")
    configure_logging(LogSettings(level=levels), stderr=io.StringIO())

    assert logging.getLogger("pocketmq.store.commitlog").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("pocketmq.remoting.transport").isEnabledFor(logging.INFO)
    assert logging.getLogger("pocketmq.remoting.transport").isEnabledFor(logging.WARNING)
    assert not logging.getLogger("pocketmq.broker.send").isEnabledFor(logging.WARNING)
    assert logging.getLogger("pocketmq.broker.pull").isEnabledFor(logging.WARNING)
    for name in ("pocketmq.raft.core", "pocketmq.raftkv.server", "pocketmq.broker.dledger.x"):
        assert not logging.getLogger(name).isEnabledFor(logging.WARNING), name


def test_reconfiguring_resets_levels_and_replaces_only_its_own_handlers() -> None:
    foreign = logging.NullHandler()
    logging.getLogger().addHandler(foreign)
    configure_logging(LogSettings(level=LogLevels.parse("INFO,store=DEBUG")), io.StringIO())
    configure_logging(LogSettings(level=LogLevels.parse("INFO")), io.StringIO())

    assert not logging.getLogger("pocketmq.store").isEnabledFor(logging.DEBUG)
    assert len(our_handlers()) == 1
    assert foreign in logging.getLogger().handlers


def test_levels_read_in_any_case_and_print_canonically() -> None:
    levels = LogLevels.parse("info, Store=debug ,pocketmq.broker.send=warning")
    assert levels.described() == "INFO,store=DEBUG,pocketmq.broker.send=WARNING"
    assert LogLevels.parse(levels.described()) == levels
    assert LogLevels.parse("store=DEBUG").default == logging.INFO


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("LOUD", "unknown level 'LOUD'"),
        ("INFO,stor=DEBUG", "unknown component 'stor'"),
        ("INFO,store=LOUD", "unknown level 'LOUD'"),
        ("INFO,WARNING", "more than one default level"),
        ("INFO,", "unknown level ''"),
        ("INFO,other.logger=DEBUG", "unknown component 'other.logger'"),
    ],
)
def test_a_bad_log_level_is_a_one_line_argparse_error(
    value: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--log-level", value, "up"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"pocketmq: error: argument --log-level: invalid choice: {value!r} (")
    assert problem in last
    assert "LEVEL,COMPONENT=LEVEL" in last


def test_the_parsed_log_level_stays_text_for_other_parts_of_the_cli() -> None:
    args = build_parser().parse_args(["--log-level", "debug,ha=info", "up"])
    assert args.log_level == "DEBUG,ha=INFO"


def test_the_flags_become_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POCKETMQ_LOG_DIR", str(tmp_path))
    args = build_parser().parse_args(
        ["--log-format", "kv", "--log-max-size", "2", "--log-backups", "3", "--log-console", "up"]
    )
    assert log_settings(args) == LogSettings(
        format="kv", log_dir=str(tmp_path), max_bytes=2 << 20, backups=3, console=True
    )
    assert log_settings(build_parser().parse_args(["--log-dir", "", "up"])).log_dir is None


def test_admin_command_check_steps_over_every_log_flag_value() -> None:
    words = ["--log-dir", "admin", "--log-format", "json", "--log-max-size", "1"]
    words += ["--log-backups", "2", "--log-level", "INFO", "--log-console"]
    assert _admin_command_problem([*words, "namesrv"]) is None
    assert "unknown command 'frobnicate'" in (
        _admin_command_problem([*words, "admin", "frobnicate"]) or ""
    )


# -- formats ---------------------------------------------------------------------------------


def test_kv_quotes_only_values_a_logfmt_reader_could_misread() -> None:
    fields: dict[str, object] = {
        "topic": "T1",
        "queues": 8,
        "spaced": "a b",
        "quoted": 'say "hi"',
        "slash": "c:\\dir",
        "equals": "k=v",
        "newline": "one\ntwo",
        "empty": "",
        "none": None,
        "flag": False,
        "bad key": "x",
        "level": "shadowed",
    }
    line = KvFormatter().format(record("topic created", fields))
    assert line == (
        "ts=2026-11-27T13:45:01.123Z level=INFO logger=pocketmq.broker.send "
        'msg="topic created" topic=T1 queues=8 spaced="a b" quoted="say \\"hi\\"" '
        'slash="c:\\\\dir" equals="k=v" newline="one\\ntwo" empty="" none=null flag=false '
        "bad_key=x field_level=shadowed"
    )


def test_json_lines_parse_and_carry_fields_and_a_one_line_exception() -> None:
    console = io.StringIO()
    configure_logging(LogSettings(format="json"), stderr=console)
    log = logging.getLogger("pocketmq.broker.send")
    log.info("topic %s created", "T1", extra={"fields": {"topic": "T1", "queues": 8}})
    event(log, "queue full", topic="T1", depth=1.5, ok=None)
    try:
        _ = 1 / 0
    except ZeroDivisionError:
        log.exception("send failed", extra={"fields": {"nan": float("nan")}})

    lines = console.getvalue().splitlines()
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert first["msg"] == "topic T1 created"
    assert (first["topic"], first["queues"], first["level"]) == ("T1", 8, "INFO")
    assert first["logger"] == "pocketmq.broker.send"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["ts"])
    assert (second["msg"], second["depth"], second["ok"]) == ("queue full", 1.5, None)
    assert "ZeroDivisionError: division by zero" in third["exc"]
    assert third["nan"] == "nan"


def test_json_fields_named_like_fixed_members_do_not_hide_them() -> None:
    line = JsonFormatter().format(record("m", {"msg": "x", "ts": 1}))
    assert json.loads(line) == {
        "ts": "2026-11-27T13:45:01.123Z",
        "level": "INFO",
        "logger": "pocketmq.broker.send",
        "msg": "m",
        "field_msg": "x",
        "field_ts": 1,
    }


def test_text_appends_fields_and_keeps_tracebacks_as_python_prints_them() -> None:
    console = io.StringIO()
    configure_logging(LogSettings(), stderr=console)
    log = logging.getLogger("pocketmq.store.commitlog")
    event(log, "segment created", file="00000000000000000000", size="1 GiB")
    try:
        raise ValueError("torn write")
    except ValueError:
        log.exception("recovery stopped")

    lines = console.getvalue().splitlines()
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO  pocketmq\.store\.commitlog: "
        r'segment created file=00000000000000000000 size="1 GiB"',
        lines[0],
    )
    assert lines[1].endswith("ERROR pocketmq.store.commitlog: recovery stopped")
    assert lines[2] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: torn write"


def test_text_without_fields_is_today_s_line() -> None:
    expected = logging.Formatter("%(asctime)s %(levelname)-5s %(name)s: %(message)s")
    assert TextFormatter().format(record()) == expected.format(record())


# -- files -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("logger", "file"),
    [
        ("pocketmq.broker.send", "broker.log"),
        ("pocketmq.broker", "broker.log"),
        ("pocketmq.container.server", "broker.log"),
        ("pocketmq.cli.serving", "broker.log"),
        ("pocketmq.acl.watcher", "broker.log"),
        ("pocketmq.broker.ha.master", "ha.log"),
        ("pocketmq.broker.controlled.replica", "ha.log"),
        ("pocketmq.broker.dledger.replica", "raft.log"),
        ("pocketmq.raft.core", "raft.log"),
        ("pocketmq.raftkv.server", "raft.log"),
        ("pocketmq.store.timer.wheel", "store.log"),
        ("pocketmq.remoting.transport", "remoting.log"),
        ("pocketmq.controller.service", "controller.log"),
        ("pocketmq.proxy.grpc", "proxy.log"),
        ("pocketmq.namesrv.server", "namesrv.log"),
        ("pocketmq.client.consumer.push", "client.log"),
        ("pocketmq.admin", "client.log"),
        ("pocketmq.audit", "audit.log"),
        ("pocketmq.raftish", None),
        ("pocketmq.up", None),
        ("pocketmq", None),
        ("asyncio", None),
    ],
)
def test_a_logger_name_picks_its_component_file(logger: str, file: str | None) -> None:
    assert file_for_logger(logger) == file


def test_lines_go_to_their_component_file_and_all_to_pocketmq_log(tmp_path: Path) -> None:
    configure_logging(LogSettings(format="kv", log_dir=str(tmp_path)), stderr=io.StringIO())
    assert os.listdir(tmp_path) == []  # opened on the first line only
    names = ["pocketmq.broker.send", "pocketmq.broker.ha.master", "pocketmq.store.commitlog"]
    names += ["pocketmq.audit", "pocketmq.up", "asyncio"]
    for name in names:
        logging.getLogger(name).warning("from %s", name)

    assert sorted(os.listdir(tmp_path)) == [
        "audit.log",
        "broker.log",
        "ha.log",
        "pocketmq.log",
        "store.log",
    ]
    assert [line.split(" logger=")[1] for line in read_lines(tmp_path / "pocketmq.log")] == [
        f'{name} msg="from {name}"' for name in names
    ]
    assert len(read_lines(tmp_path / "ha.log")) == 1
    assert "logger=pocketmq.broker.send " in read_lines(tmp_path / "broker.log")[0]
    assert "pocketmq.broker.ha" not in (tmp_path / "broker.log").read_text()


def test_the_console_is_off_with_a_log_dir_unless_a_terminal_or_forced(tmp_path: Path) -> None:
    log = logging.getLogger("pocketmq.broker")
    pipe, terminal, forced = io.StringIO(), Terminal(), io.StringIO()
    configure_logging(LogSettings(log_dir=str(tmp_path)), stderr=pipe)
    log.info("files only")
    configure_logging(LogSettings(log_dir=str(tmp_path)), stderr=terminal)
    log.info("on a terminal")
    configure_logging(LogSettings(log_dir=str(tmp_path), console=True), stderr=forced)
    log.info("forced")
    configure_logging(LogSettings(), stderr=pipe)
    log.info("no directory")

    assert pipe.getvalue().endswith("pocketmq.broker: no directory\n")
    assert "files only" not in pipe.getvalue()
    assert terminal.getvalue().endswith("on a terminal\n")
    assert forced.getvalue().endswith("forced\n")
    assert len(read_lines(tmp_path / "broker.log")) == 3


def test_a_console_set_up_by_the_host_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As logging.basicConfig: pytest or a program running the CLI in-process owns stderr."""
    console = io.StringIO()
    monkeypatch.setattr(sys, "stderr", console)
    logging.getLogger().addHandler(logging.NullHandler())
    configure_logging(LogSettings())
    logging.getLogger("pocketmq.broker").info("not on the console")
    configure_logging(LogSettings(console=True))
    logging.getLogger("pocketmq.broker").info("forced")

    assert console.getvalue().splitlines()[-1].endswith("pocketmq.broker: forced")
    assert "not on the console" not in console.getvalue()


def test_a_missing_log_dir_is_created_private_to_the_group(tmp_path: Path) -> None:
    directory = tmp_path / "var" / "logs"
    configure_logging(LogSettings(log_dir=str(directory)), stderr=io.StringIO())
    umask = os.umask(0)
    os.umask(umask)
    assert directory.stat().st_mode & 0o777 == 0o750 & ~umask


def test_a_log_dir_that_cannot_be_created_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(LogSetupError, match=r"log directory .*a-file/logs cannot be used \("):
        configure_logging(LogSettings(log_dir=str(blocker / "logs")))

    assert main(["--log-dir", str(blocker / "logs"), "namesrv", "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"pocketmq namesrv: log directory {blocker / 'logs'} cannot be used (")
    assert err.endswith("; choose another with --log-dir DIR\n")


def test_size_rotation_keeps_exactly_the_newest_backups(tmp_path: Path) -> None:
    settings = LogSettings(format="kv", log_dir=str(tmp_path), max_bytes=300, backups=3)
    configure_logging(settings, stderr=io.StringIO())
    log = logging.getLogger("pocketmq.store.commitlog")
    for number in range(60):  # about 25 rotations, several within one second
        log.info("line", extra={"fields": {"n": number}})

    rotated = sorted(name for name in os.listdir(tmp_path) if name.startswith("store.log."))
    assert len(rotated) == 3
    assert all(
        re.fullmatch(r"store\.log\.\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(\.\d+)?", n) for n in rotated
    )
    assert len([n for n in os.listdir(tmp_path) if n.startswith("pocketmq.log.")]) == 3

    def key(name: str) -> tuple[str, int]:
        stamp, _, number = name.removeprefix("store.log.").partition(".")
        return stamp, int(number or 0)

    kept = [*sorted(rotated, key=key), "store.log"]
    numbers = [
        int(line.rpartition(" n=")[2]) for name in kept for line in read_lines(tmp_path / name)
    ]
    assert numbers == list(range(60 - len(numbers), 60))  # the newest lines, in order
    assert all(os.path.getsize(tmp_path / name) < 300 + 100 for name in kept)


def test_a_file_rotates_at_its_rollover_time_before_reaching_its_size(tmp_path: Path) -> None:
    configure_logging(LogSettings(log_dir=str(tmp_path)), stderr=io.StringIO())
    log = logging.getLogger("pocketmq.namesrv.server")
    log.info("yesterday")
    (handler,) = [h for h in our_handlers() if isinstance(h, SizeAndDayRotatingFileHandler)]
    handler.rolloverAt = int(time.time()) - 1  # as if midnight had just passed
    log.info("today")

    (rotated,) = [name for name in os.listdir(tmp_path) if name.startswith("pocketmq.log.")]
    assert read_lines(tmp_path / rotated)[0].endswith("yesterday")
    assert read_lines(tmp_path / "pocketmq.log")[0].endswith("today")
    assert handler.rolloverAt > time.time()  # the next one is at the next midnight


def test_a_namesrv_writes_json_lines_to_its_files(tmp_path: Path) -> None:
    """One real process, as an operator would start it: files only, as stderr is a pipe."""
    command = [sys.executable, "-m", "pocketmq.cli.main", "--log-dir", str(tmp_path)]
    command += ["--log-format", "json", "namesrv", "--port", "0"]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    try:
        assert process.stdout is not None
        assert "namesrv ready at" in process.stdout.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert err == ""

    everything = [json.loads(line) for line in read_lines(tmp_path / "pocketmq.log")]
    assert {"pocketmq.namesrv.server", "pocketmq"} <= {line["logger"] for line in everything}
    namesrv = [json.loads(line) for line in read_lines(tmp_path / "namesrv.log")]
    assert namesrv
    assert {line["logger"] for line in namesrv} == {"pocketmq.namesrv.server"}
