"""The pytest plugin's fixtures give a working cluster in one line."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import RemotingClient
from pocketmq.testing import InProcessCluster, ServerProcess
from tests.integration.test_broker import send_v2


def route(namesrv: str, topic: str) -> int:
    async def ask() -> int:
        client = RemotingClient()
        try:
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            return (await client.invoke(namesrv, request, 5)).code
        finally:
            await client.close()

    return asyncio.run(ask())


def test_in_process_cluster(pocketmq_cluster: InProcessCluster) -> None:
    assert route(pocketmq_cluster.namesrv_addr, "TBW102") == ResponseCode.SUCCESS

    async def send() -> int:
        client = RemotingClient()
        try:
            answer = await client.invoke(pocketmq_cluster.broker_addr, send_v2("P", 0, b"x"), 5)
            return answer.code
        finally:
            await client.close()

    assert asyncio.run(send()) == ResponseCode.SUCCESS


def test_process_cluster(pocketmq_process_cluster: ServerProcess) -> None:
    assert route(pocketmq_process_cluster.address, "TBW102") == ResponseCode.SUCCESS


LOG_DUMPING_CONFTEST = """
import pytest

from pocketmq.testing.plugin import has_failed, print_log_if_failed


@pytest.fixture
def server(request):
    yield
    print_log_if_failed(request, "server log", lambda: f"log of {request.node.name}")


@pytest.fixture(scope="module")
def module_server(request):
    yield
    print(f"module failed: {has_failed(request.node)}")
"""

LOG_DUMPING_TESTS = """
import pytest


def test_passes(server):
    pass


def test_fails(server):
    assert False


@pytest.fixture
def phases(request):
    yield
    print(f"phases of {request.node.name}: {request.node.rep_setup.passed} "
          f"{request.node.rep_call.failed}")


def test_fails_with_phases(phases):
    assert False


def test_fails_in_the_module(module_server):
    assert False


def test_last_of_the_module_passes(module_server):
    pass
"""


def test_a_fixture_prints_its_log_only_when_its_test_failed(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LOG_DUMPING_CONFTEST)
    pytester.makepyfile(test_example=LOG_DUMPING_TESTS)
    result = pytester.runpytest("-rA")
    result.assert_outcomes(passed=2, failed=3)
    output = result.stdout.str()
    assert "log of test_fails\n" in output
    assert "log of test_passes" not in output
    assert "phases of test_fails_with_phases: True True" in output
    assert "module failed: True" in output


def test_the_process_cluster_log_is_shown_with_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_example="""
        def test_fails(pocketmq_process_cluster):
            assert False, "on purpose"

        def test_passes(pocketmq_process_cluster):
            pass
        """
    )
    result = pytester.runpytest("-rA")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_fails _*",
            "*on purpose*",
            "*Captured stdout teardown*",
            "--- log of pocketmq up*",
        ]
    )
    assert result.stdout.str().count("--- log of pocketmq up") == 1


def readme_test_example() -> str:
    """The README's example test for `pocketmq.testing`'s helpers, as a user would copy it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    [example] = [block for block in blocks if "def test_an_order_is_consumed" in block]
    return example


def test_the_readme_example_test_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_readme=readme_test_example())
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=1)
