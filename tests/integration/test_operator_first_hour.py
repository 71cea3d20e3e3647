"""An operator's first hour: what `pocketmq` says when something is set up wrong.

Every case runs the real CLI in a subprocess (`python -m pocketmq.cli.main ...`) and checks
the exact line it prints, its exit status, and that the one shared `pocketmq up` (started from
a RocketMQ-style `broker.properties`) still serves afterwards.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import pocketmq
from pocketmq.client.admin import AdminClient
from pocketmq.common.route import QueueData
from pocketmq.testing import ServerProcess
from pocketmq.testing.processes import free_port_pair, start_server_process
from pocketmq.testing.waiting import wait_until

CLI_TIMEOUT_S = 30
FILE_NAMESRV = "10.9.9.9:9876"


@dataclass
class Shared:
    """`pocketmq up -c broker.properties`, started once for the module."""

    up: ServerProcess
    broker_port: int
    store_dir: Path
    config: Path
    tmp: Path

    @property
    def namesrv(self) -> str:
        return self.up.address


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    tmp = tmp_path_factory.mktemp("operator")
    broker_port = free_port_pair()
    store_dir = tmp / "store-from-file"
    config = tmp / "broker.properties"
    config.write_text(
        "brokerName=broker-ops\n"
        f"listenPort={broker_port}\n"
        f"storePathRootDir={store_dir}\n"
        f"namesrvAddr={FILE_NAMESRV}\n"
    )
    # No --data-dir, so the file's storePathRootDir counts; the NameServer's data goes to
    # ./.pocketmq, which is the temporary directory here.
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp)
        up = start_server_process(["up", "--namesrv-port", "0", "-c", str(config)], tmp / "up.log")
    try:
        yield Shared(up, broker_port, store_dir, config, tmp)
    finally:
        up.stop(timeout_s=10)


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pocketmq.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        cwd=cwd,
    )


def admin_json(namesrv: str, *args: str) -> Any:
    result = cli("admin", *args, "-n", namesrv, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def one_line(result: subprocess.CompletedProcess[str], code: int) -> str:
    """The single stderr line of a failed command (no traceback, nothing else)."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def error_lines(result: subprocess.CompletedProcess[str], code: int) -> list[str]:
    """A failed server command's stderr lines at ERROR level or printed bare (no log prefix)."""
    assert result.returncode == code, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    return [line for line in lines if not line[:4].isdigit()]


def assert_unharmed(shared: Shared) -> None:
    """The shared NameServer still routes broker-ops at the port the file gave it."""

    async def groups() -> dict[str, dict[int, str]]:
        async with AdminClient([shared.namesrv], timeout_s=10) as admin:
            info = await admin.cluster_info()
        return {name: dict(data.broker_addrs) for name, data in info.broker_addr_table.items()}

    assert asyncio.run(groups()) == {"broker-ops": {0: f"127.0.0.1:{shared.broker_port}"}}
    assert shared.up.process.poll() is None


# -- 1. broker.properties is honoured ----------------------------------------------------------


def test_up_honours_listen_port_broker_name_and_store_dir_from_the_file(shared: Shared) -> None:
    assert_unharmed(shared)
    assert (shared.store_dir / "commitlog").is_dir() or any(shared.store_dir.iterdir())
    assert (shared.tmp / ".pocketmq" / "namesrv").is_dir()


def test_up_warns_once_that_it_overrides_the_files_namesrv_addr(shared: Shared) -> None:
    warnings = [line for line in shared.up.log().splitlines() if "namesrvAddr" in line]
    assert len(warnings) == 1, warnings
    assert "WARNING" in warnings[0]
    assert (
        f"{shared.config}: namesrvAddr={FILE_NAMESRV} is overridden: pocketmq up runs its own "
        f"NameServer, using namesrvAddr={shared.namesrv}"
    ) in warnings[0]


# -- 2. startup problems: one line, non-zero exit ----------------------------------------------


def test_up_with_its_namesrv_port_in_use_says_which_flag_moves_it(shared: Shared) -> None:
    port = shared.up.port
    result = cli("up", "--namesrv-port", str(port), "--broker-port", "0",
                 "--data-dir", str(shared.tmp / "second"))  # fmt: skip
    assert error_lines(result, 1) == [
        f"pocketmq up: NameServer port {port} is already in use; choose another with "
        "--namesrv-port N (0 picks a free port)"
    ]
    assert_unharmed(shared)


def test_up_with_its_broker_port_in_use_says_which_flag_moves_it(shared: Shared) -> None:
    port = shared.broker_port
    result = cli("up", "--namesrv-port", "0", "--broker-port", str(port),
                 "--data-dir", str(shared.tmp / "third"))  # fmt: skip
    assert error_lines(result, 1) == [
        f"pocketmq up: broker broker-a port {port} is already in use; choose another with "
        "--broker-port N (0 picks a free port)"
    ]
    assert_unharmed(shared)


def test_namesrv_and_broker_with_ports_in_use_say_which_setting_moves_them(
    shared: Shared,
) -> None:
    port = shared.up.port
    assert error_lines(cli("namesrv", "--port", str(port)), 1) == [
        f"pocketmq namesrv: NameServer port {port} is already in use; choose another with "
        "--port N or listenPort=N (0 picks a free port)"
    ]
    result = cli("broker", "-n", shared.namesrv, "--port", str(shared.broker_port),
                 "--data-dir", str(shared.tmp / "fourth"))  # fmt: skip
    assert error_lines(result, 1) == [
        f"pocketmq broker: broker port {shared.broker_port} is already in use; choose another "
        "with --port N or listenPort=N (0 picks a free port)"
    ]
    assert_unharmed(shared)


def test_a_dledger_broker_with_its_dledger_port_in_use_says_which_setting_moves_it(
    shared: Shared,
) -> None:
    """The broker port is free, its DLedger port is not: the line names the DLedger port and
    dLegerPeers, and stopping what had started is no traceback."""
    taken = shared.up.port
    config = shared.tmp / "dledger-port-taken.properties"
    config.write_text(
        "enableDLegerCommitLog=true\ndLegerGroup=broker-d\ndLegerSelfId=n0\n"
        f"dLegerPeers=n0-127.0.0.1:{taken}\n"
    )
    port = free_port_pair()
    result = cli("broker", "-c", str(config), "-n", shared.namesrv, "--port", str(port),
                 "--data-dir", str(shared.tmp / "dledger-port-taken"))  # fmt: skip
    assert error_lines(result, 1) == [
        f"pocketmq broker: broker port {port}: its DLedger port {taken} is already in use; "
        "choose another with dLegerPeers (the entry of n0)"
    ]
    assert_unharmed(shared)


def test_a_data_dir_that_cannot_be_written_is_one_line(shared: Shared) -> None:
    a_file = shared.tmp / "a-file"
    a_file.write_text("not a directory")
    result = cli("up", "--namesrv-port", "0", "--broker-port", "0",
                 "--data-dir", str(a_file / "data"))  # fmt: skip
    assert one_line(result, 1) == (
        f"pocketmq up: data directory {a_file / 'data' / 'namesrv'} is not writable "
        "(Not a directory); choose another with --data-dir"
    )
    result = cli("broker", "-n", shared.namesrv, "--port", "0", "--data-dir", str(a_file / "b"))
    assert one_line(result, 1) == (
        f"pocketmq broker: data directory {a_file / 'b'} is not writable (Not a directory); "
        "choose another with --data-dir"
    )
    assert_unharmed(shared)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("maxMessageSize=-5", "maxMessageSize: '-5' is not an integer of 1 or more"),
        ("maxMessageSize=4MB", "maxMessageSize: '4MB' is not an integer"),
        ("listenPort=70000", "listenPort: '70000' is not an integer from 0 to 65535"),
        ("defaultTopicQueueNums=0", "defaultTopicQueueNums: '0' is not an integer of 1 or more"),
    ],
)
def test_a_bad_config_value_is_refused_at_load_time_naming_key_value_and_range(
    shared: Shared, line: str, message: str
) -> None:
    config = shared.tmp / f"bad-{abs(hash(line))}.properties"
    config.write_text(line + "\n")
    result = cli("up", "--namesrv-port", "0", "--broker-port", "0",
                 "--data-dir", str(shared.tmp / "bad"), "-c", str(config))  # fmt: skip
    assert one_line(result, 2) == f"pocketmq up: configuration error: {message}"


def test_broker_refuses_a_bad_config_value_at_load_time(shared: Shared) -> None:
    config = shared.tmp / "bad-broker.properties"
    config.write_text("brokerName=b\nmaxMessageSize=-5\n")
    result = cli("broker", "-c", str(config), "--data-dir", str(shared.tmp / "bad-broker"))
    assert one_line(result, 2) == (
        "pocketmq broker: configuration error: maxMessageSize: '-5' is not an integer of 1 or more"
    )


def test_a_bad_log_level_is_an_argparse_choice_error() -> None:
    result = cli("--log-level", "LOUD", "up")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "argument --log-level: invalid choice: 'LOUD'" in result.stderr.splitlines()[-1]


# -- 3. --version ------------------------------------------------------------------------------


def test_version_prints_the_package_version() -> None:
    result = cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"pocketmq {pocketmq.__version__}\n"


# -- 4. a second broker in the same slot -------------------------------------------------------


def test_a_second_broker_with_the_same_name_and_id_does_not_take_the_slot(
    shared: Shared,
) -> None:
    config = shared.tmp / "impostor.properties"
    config.write_text(f"brokerName=broker-ops\nbrokerId=0\nstorePathRootDir={shared.tmp}/imp\n")
    impostor = start_server_process(
        ["broker", "-c", str(config), "-n", shared.namesrv, "--port", "0"],
        shared.tmp / "impostor.log",
    )
    try:
        refusal = wait_until(
            lambda: next(
                (ln for ln in impostor.log().splitlines() if "refused the registration" in ln),
                None,
            ),
            "the impostor logs the NameServer's refusal",
            timeout_s=10,
        )
        holder = f"127.0.0.1:{shared.broker_port}"
        assert "ERROR" in refusal
        assert (
            f"NameServer {shared.namesrv} refused the registration: code 1 broker broker-ops "
            f"(cluster DefaultCluster, brokerId 0) is already registered from {holder}, which "
            f"is alive; this broker at {impostor.address} was not registered. Give it another "
            "brokerName or brokerId, or stop the other one first"
        ) in refusal
        assert impostor.process.poll() is None  # it keeps serving, and keeps trying
        warning = wait_until(
            lambda: next(
                (ln for ln in shared.up.log().splitlines() if "refused registration" in ln),
                None,
            ),
            "the NameServer logs the refusal",
            timeout_s=10,
        )
        assert "WARNING" in warning
        assert (
            f"refused registration of broker broker-ops (cluster DefaultCluster, brokerId 0) "
            f"from {impostor.address}: {holder} holds that slot and is alive"
        ) in warning
        assert_unharmed(shared)
    finally:
        assert impostor.stop(timeout_s=10) == 0
    assert_unharmed(shared)  # the impostor's unregistering leaves the holder alone


# -- 5. system topics --------------------------------------------------------------------------


def tbw102(shared: Shared) -> QueueData:
    async def route() -> QueueData:
        async with AdminClient([shared.namesrv], timeout_s=10) as admin:
            (queue_data,) = (await admin.topic_route("TBW102")).queue_datas
        return queue_data

    return asyncio.run(route())


def test_update_topic_refuses_a_system_topic_unless_forced(shared: Shared) -> None:
    before = tbw102(shared)
    result = cli("admin", "updateTopic", "-t", "TBW102", "-c", "DefaultCluster", "-p", "6",
                 "-n", shared.namesrv)  # fmt: skip
    line = one_line(result, 1)
    assert line.startswith("pocketmq admin updateTopic: ")
    assert "The topic[TBW102] is conflict with system topic." in line
    assert tbw102(shared) == before

    # Auto-creation still works: a send to a topic nobody created goes through TBW102.
    sent = cli("admin", "sendMessage", "-t", "AutoCreatedAfterRefusal", "-p", "hello",
               "-n", shared.namesrv)  # fmt: skip
    assert sent.returncode == 0, sent.stderr
    assert admin_json(shared.namesrv, "topicRoute", "-t", "AutoCreatedAfterRefusal")["queueDatas"]

    forced = cli("admin", "updateTopic", "-t", "TBW102", "-c", "DefaultCluster", "--force",
                 "-p", str(before.perm), "-r", "4", "-w", "4", "-n", shared.namesrv)  # fmt: skip
    assert forced.returncode == 0, forced.stderr
    after = wait_until(
        lambda: (route := tbw102(shared)).read_queue_nums == 4 and route,
        "the forced TBW102 change reaches the route",
        timeout_s=10,
    )
    assert (after.write_queue_nums, after.perm) == (4, before.perm)
    assert_unharmed(shared)


# -- 6. mqadmin commands pocketmq lacks --------------------------------------------------------


@pytest.mark.parametrize("command", ["copyUser", "statsAll", "getNamesrvConfig"])
def test_an_mqadmin_command_pocketmq_lacks_is_not_supported_yet(command: str) -> None:
    result = cli("admin", command, "-n", "127.0.0.1:1")
    assert result.returncode == 2
    assert result.stderr == f"pocketmq admin: {command} is not supported yet\n"


def test_a_word_that_is_no_command_is_an_unknown_command() -> None:
    result = cli("--log-level", "DEBUG", "admin", "frobnicate")
    assert result.returncode == 2
    assert result.stderr == (
        "pocketmq admin: unknown command 'frobnicate' (pocketmq admin --help lists the commands)\n"
    )
