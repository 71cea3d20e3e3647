"""The two servers every conformance scenario runs against: Apache RocketMQ (the reference) and
`pocketmq up`, each started once per test session, each on free loopback ports."""

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
)


@pytest.fixture(scope="session")
def apache_rocketmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheRocketMQ]:
    work = tmp_path_factory.mktemp("apache-rocketmq")
    try:
        server = ApacheRocketMQ(work)
        server.start()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def pocketmq_twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    work = tmp_path_factory.mktemp("pocketmq-twin")
    config = work / "broker.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in SHARED_BROKER_CONFIG.items()))
    server = start_up_process(work / "data", work / "pocketmq-up.log", "-c", str(config))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def java_classpath() -> str:
    try:
        return java_drivers()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def go_driver() -> Path:
    try:
        return build_go_driver()
    except ReferenceUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
