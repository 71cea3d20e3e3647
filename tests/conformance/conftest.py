"""The two servers every conformance scenario runs against: Apache RocketMQ (the reference) and
`pocketmq up`, on free loopback ports, started once for the conformance tests and stopped after
them (an idle RocketMQ broker still spends CPU that the rest of the suite needs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pocketmq.testing import ServerProcess, start_up_process
from tests.conformance.go_driver import go_driver as build_go_driver
from tests.conformance.reference import (
    SHARED_BROKER_CONFIG,
    ApacheRocketMQ,
    ReferenceUnavailable,
    java_drivers,
    v5_drivers,
)
from tests.server_logs import first_handler_failure


@pytest.fixture(scope="package")
def apache_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheRocketMQ]:
    work = tmp_path_factory.mktemp("apache-rocketmq")
    try:
        server = ApacheRocketMQ(work)
        server.start()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="package")
def pocketmq_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("pocketmq-twin")
    config = work / "broker.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in SHARED_BROKER_CONFIG.items()))
    server = start_up_process(work / "data", work / "pocketmq-up.log", "-c", str(config))
    yield server
    server.stop()
    failure = first_handler_failure(work)
    if failure is not None:
        pytest.fail(f"a request handler of the conformance tests' pocketmq raised: {failure}")


@pytest.fixture(scope="package")
def java_classpath() -> str:
    try:
        return java_drivers()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="package")
def go_driver() -> Path:
    try:
        return build_go_driver()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="package")
def v5_classpath() -> str:
    """rocketmq-client 5.5.0 and the real mqadmin, with the drivers built on them."""
    try:
        return v5_drivers()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
