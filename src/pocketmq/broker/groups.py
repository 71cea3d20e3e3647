"""Subscription groups: one group's settings (`SubscriptionGroupConfig`), the broker's table of
them (`SubscriptionGroupManager`) and the rules a group name must follow (`validateGroup`).

The table is kept in `config/subscriptionGroup.json` in RocketMQ's shape
(`{"dataVersion", "forbiddenTable", "subscriptionGroupTable"}`). Fields this broker does not
know (`groupRetryPolicy`, `subscriptionDataSet`, ...) are kept as they came.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from pocketmq.common.data_version import DataVersion

log = logging.getLogger(__name__)

GROUP_NAME_MAX_LENGTH: Final = 120
_VALID_GROUP: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")


class SubscriptionGroupError(ValueError):
    """A subscription group config that RocketMQ would refuse; the message says which rule."""


def validate_group_name(name: str) -> None:
    """Raises `SubscriptionGroupError` unless `name` is a legal group (`validateGroup`)."""
    if not name or not name.strip():
        raise SubscriptionGroupError("the group name is blank")
    if len(name) > GROUP_NAME_MAX_LENGTH:
        raise SubscriptionGroupError(
            f"the group name is longer than {GROUP_NAME_MAX_LENGTH} characters"
        )
    if not _VALID_GROUP.match(name):
        raise SubscriptionGroupError(
            f"the group name {name!r} contains illegal characters; allowed: letters, digits, "
            "'%', '|', '_' and '-'"
        )


_GROUP_FIELDS: Final = {
    "groupName": "group_name",
    "consumeEnable": "consume_enable",
    "consumeFromMinEnable": "consume_from_min_enable",
    "consumeBroadcastEnable": "consume_broadcast_enable",
    "consumeMessageOrderly": "consume_message_orderly",
    "retryQueueNums": "retry_queue_nums",
    "retryMaxTimes": "retry_max_times",
    "brokerId": "broker_id",
    "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
    "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
    "groupSysFlag": "group_sys_flag",
    "consumeTimeoutMinute": "consume_timeout_minute",
}


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings (`SubscriptionGroupConfig`); defaults are RocketMQ's."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    """JSON fields this broker does not interpret, kept for the round trip."""

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = dict(self.extra)
        for json_name, attribute in _GROUP_FIELDS.items():
            document[json_name] = getattr(self, attribute)
        document["attributes"] = dict(self.attributes)
        return dict(sorted(document.items()))

    @classmethod
    def from_json(cls, data: Any) -> SubscriptionGroupConfig:
        """Reads a config object.

        Raises:
            SubscriptionGroupError: not an object, no group name, or a field of the wrong type.
        """
        if not isinstance(data, dict):
            raise SubscriptionGroupError("the subscription group config is not a JSON object")
        name = data.get("groupName")
        if not isinstance(name, str):
            raise SubscriptionGroupError("the subscription group config has no groupName")
        config = cls(group_name=name)
        for json_name, attribute in _GROUP_FIELDS.items():
            if json_name == "groupName" or json_name not in data:
                continue
            value = data[json_name]
            default = getattr(config, attribute)
            if isinstance(default, bool):
                if not isinstance(value, bool):
                    raise SubscriptionGroupError(f"{json_name} is not a boolean: {value!r}")
            elif isinstance(value, bool) or not isinstance(value, int):
                raise SubscriptionGroupError(f"{json_name} is not an integer: {value!r}")
            setattr(config, attribute, value)
        attributes = data.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise SubscriptionGroupError("attributes is not a JSON object")
        config.attributes = {str(k): str(v) for k, v in attributes.items()}
        config.extra = {
            k: v for k, v in data.items() if k not in _GROUP_FIELDS and k != "attributes"
        }
        return config


class SubscriptionGroupTable:
    """Consumer groups of one broker (`SubscriptionGroupManager`), pure."""

    def __init__(self) -> None:
        self.groups: dict[str, SubscriptionGroupConfig] = {}
        self.forbidden: dict[str, Any] = {}
        self.data_version = DataVersion()

    def load(self, document: Any) -> None:
        """Takes the groups of a `subscriptionGroup.json` document (or None); skips bad ones."""
        if not isinstance(document, dict):
            return
        for name, data in (document.get("subscriptionGroupTable") or {}).items():
            try:
                self.groups[name] = SubscriptionGroupConfig.from_json(data)
            except SubscriptionGroupError as exc:
                log.warning("subscriptionGroup.json: skipping group %r: %s", name, exc)
        forbidden = document.get("forbiddenTable")
        self.forbidden = forbidden if isinstance(forbidden, dict) else {}
        version = document.get("dataVersion")
        if isinstance(version, dict):
            self.data_version = DataVersion.from_json(version)

    def snapshot(self) -> dict[str, Any]:
        """The `subscriptionGroup.json` document (also the 201 answer)."""
        return {
            "dataVersion": self.data_version.to_json(),
            "forbiddenTable": self.forbidden,
            "subscriptionGroupTable": {
                name: config.to_json() for name, config in sorted(self.groups.items())
            },
        }

    def changes(self, names: Iterable[str]) -> dict[str, Any]:
        """The named groups' part of `snapshot()`, None for each that no longer exists: what a
        journal of `subscriptionGroup.json` records of their change."""
        groups = self.groups
        return {
            "dataVersion": self.data_version.to_json(),
            "forbiddenTable": self.forbidden,
            "subscriptionGroupTable": {
                name: None if (config := groups.get(name)) is None else config.to_json()
                for name in names
            },
        }

    def update(self, config: SubscriptionGroupConfig, now_ms: int) -> None:
        """Creates or replaces a group.

        Raises:
            SubscriptionGroupError: an illegal group name.
        """
        validate_group_name(config.group_name)
        self.groups[config.group_name] = config
        self.data_version = self.data_version.bumped(now_ms)

    def delete(self, name: str, now_ms: int) -> bool:
        removed = self.groups.pop(name, None) is not None
        self.forbidden.pop(name, None)
        if removed:
            self.data_version = self.data_version.bumped(now_ms)
        return removed
