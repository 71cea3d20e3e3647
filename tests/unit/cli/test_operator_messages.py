"""What the CLI says about commands it lacks, and which topics count as system topics."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pocketmq.cli.admin import check_command_name
from pocketmq.cli.main import COMMANDS, build_parser, main
from pocketmq.cli.mqadmin_commands import MQADMIN_COMMANDS
from pocketmq.common.topic_names import is_system_topic


@pytest.mark.parametrize("command", ["updateAclConfig", "statsAll", "copyUser", "haStatus"])
def test_an_mqadmin_command_is_not_supported_yet_unless_pocketmq_has_it(command: str) -> None:
    line = check_command_name([command, "-n", "x"])
    if command in ("haStatus", "updateAclConfig"):  # pocketmq has these
        assert line is None
    else:
        assert line == f"pocketmq admin: {command} is not supported yet"


def test_every_pocketmq_admin_command_is_an_mqadmin_command_or_pocketmq_s_own() -> None:
    assert check_command_name(["updateTopic"]) is None
    assert check_command_name(["-h"]) is None
    assert check_command_name([]) is None
    assert "updateTopic" in MQADMIN_COMMANDS


def test_another_word_is_an_unknown_command() -> None:
    assert check_command_name(["frobnicate"]) == (
        "pocketmq admin: unknown command 'frobnicate' (pocketmq admin --help lists the commands)"
    )


def test_log_level_is_a_choice_in_any_case() -> None:
    assert build_parser().parse_args(["--log-level", "debug", "up"]).log_level == "DEBUG"


@pytest.mark.parametrize(
    "topic",
    [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "BenchmarkTest",
        "CHECKPOINT_TOPIC",
        "rmq_sys_wheel_timer",
        "rmq_sys_SYNC_BROKER_MEMBER_broker-a",
    ],
)
def test_system_topics_are_recognised(topic: str) -> None:
    assert is_system_topic(topic)


@pytest.mark.parametrize("topic", ["Orders", "%RETRY%group", "%DLQ%group", "TBW1020"])
def test_ordinary_topics_are_not_system_topics(topic: str) -> None:
    assert not is_system_topic(topic)


def test_a_command_imports_only_its_own_part() -> None:
    """`pocketmq admin ...` and `pocketmq namesrv` start without importing the broker, the
    store or the proxy (half the start-up time); `--help` still lists every command."""
    probe = (
        "import sys\n"
        "from pocketmq.cli.main import COMMANDS, build_parser\n"
        "build_parser('admin').parse_args(['admin', 'topicList'])\n"
        "build_parser('namesrv').parse_args(['namesrv', '--port', '0'])\n"
        "heavy = ('pocketmq.broker.server', 'pocketmq.store.message_store', 'pocketmq.proxy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "listed = build_parser().format_help()\n"
        "print(all(f'    {name} ' in listed for name in COMMANDS))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.split("\n")[:2] == ["[]", "True"]


def test_help_before_a_command_is_the_top_level_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help", "admin"])
    listed = capsys.readouterr().out
    assert all(f"    {name} " in listed for name in COMMANDS)
