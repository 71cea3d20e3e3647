"""Numbers from a properties file are checked against their key's range when they are read.

A negative `maxMessageSize` used to pass and then fail as an assertion in the put path; now it
is a `ConfigError` naming the key, the value and the range, before anything starts.
"""

from __future__ import annotations

import dataclasses

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.common.config import ConfigError, apply_properties, key, value_bounds
from pocketmq.namesrv.server import NamesrvConfig
from pocketmq.store.config import MessageStoreConfig


@dataclasses.dataclass
class Limits:
    percent: int = key("percent", 50, minimum=0, maximum=100)
    ratio: float = key("ratio", 0.5)
    offset: int = key("offset", -1)


@pytest.mark.parametrize(
    ("config", "name", "text", "message"),
    [
        (
            MessageStoreConfig(),
            "maxMessageSize",
            "-5",
            "maxMessageSize: '-5' is not an integer of 1 or more",
        ),
        (
            MessageStoreConfig(),
            "maxMessageSize",
            "0",
            "maxMessageSize: '0' is not an integer of 1 or more",
        ),
        (
            MessageStoreConfig(),
            "mappedFileSizeCommitLog",
            "-1",
            "mappedFileSizeCommitLog: '-1' is not an integer of 1 or more",
        ),
        (
            MessageStoreConfig(),
            "haListenPort",
            "-2",
            "haListenPort: '-2' is not an integer from -1 to 65535",
        ),
        (
            MessageStoreConfig(),
            "fileReservedTime",
            "-1",
            "fileReservedTime: '-1' is not a number of 0 or more",
        ),
        (
            MessageStoreConfig(),
            "flushIntervalCommitLog",
            "-500",
            "flushIntervalCommitLog: '-500' is not an integer of 0 or more",
        ),
        (BrokerConfig(), "listenPort", "-1", "listenPort: '-1' is not an integer from 0 to 65535"),
        (
            BrokerConfig(),
            "listenPort",
            "65536",
            "listenPort: '65536' is not an integer from 0 to 65535",
        ),
        (BrokerConfig(), "brokerId", "-2", "brokerId: '-2' is not an integer of -1 or more"),
        (
            BrokerConfig(),
            "brokerPermission",
            "8",
            "brokerPermission: '8' is not an integer from 0 to 7",
        ),
        (
            BrokerConfig(),
            "defaultTopicQueueNums",
            "0",
            "defaultTopicQueueNums: '0' is not an integer of 1 or more",
        ),
        (BrokerConfig(), "listenPort", "ten", "listenPort: 'ten' is not an integer"),
        (
            NamesrvConfig(),
            "listenPort",
            "99999",
            "listenPort: '99999' is not an integer from 0 to 65535",
        ),
        (
            NamesrvConfig(),
            "brokerChannelExpiredTime",
            "-1",
            "brokerChannelExpiredTime: '-1' is not an integer of 0 or more",
        ),
        (Limits(), "percent", "101", "percent: '101' is not an integer from 0 to 100"),
    ],
)
def test_an_out_of_range_number_is_refused_naming_key_value_and_range(
    config: object, name: str, text: str, message: str
) -> None:
    before = dataclasses.replace(config)  # type: ignore[type-var]
    with pytest.raises(ConfigError) as caught:
        apply_properties(config, {name: text})  # type: ignore[arg-type]
    assert str(caught.value) == message
    assert config == before


@pytest.mark.parametrize(
    ("config", "name", "text"),
    [
        (MessageStoreConfig(), "maxMessageSize", "1"),
        (MessageStoreConfig(), "haListenPort", "-1"),
        (BrokerConfig(), "listenPort", "0"),
        (BrokerConfig(), "listenPort", "65535"),
        (Limits(), "offset", "-100"),
        (Limits(), "ratio", "0"),
    ],
)
def test_a_number_at_the_edge_of_its_range_is_accepted(
    config: object, name: str, text: str
) -> None:
    assert apply_properties(config, {name: text}) == []  # type: ignore[arg-type]


def test_every_default_lies_within_its_own_range() -> None:
    for config in (BrokerConfig(), MessageStoreConfig(), NamesrvConfig()):
        for field in dataclasses.fields(config):
            value = getattr(config, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            minimum, maximum = value_bounds(field)
            assert minimum is None or value >= minimum, field.name
            assert maximum is None or value <= maximum, field.name
