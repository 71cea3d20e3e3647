"""The broker's topic table (`TopicConfigManager`): what topics exist here, and how they look.

Owns the system topics created at start, auto-creation through the
`TBW102` default topic, and `config/topics.json` in RocketMQ's shape:
`{"dataVersion": {...}, "topicConfigTable": {name: TopicConfig}}`.

Saving is the caller's move (`snapshot()` then `JsonFile.save` off the loop), so the table stays
pure and fast; every change bumps `data_version`, which the broker reports to NameServers.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Final

from pocketmq.common.constants import PERM_INHERIT, PERM_READ, PERM_WRITE
from pocketmq.common.data_version import DataVersion
from pocketmq.common.topic_names import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    OFFSET_MOVED_EVENT,
    SCHEDULE_TOPIC,
    SELF_TEST_TOPIC,
    TIMER_TOPIC,
    TRANSACTION_CHECK_MAX_TIME_TOPIC,
    TRANSACTION_HALF_TOPIC,
    TRANSACTION_OP_HALF_TOPIC,
    TopicError,
    validate_topic_name,
)

BUILT_IN_TOPICS: Final = {
    SCHEDULE_TOPIC: 18,
    TRANSACTION_HALF_TOPIC: 1,
    TRANSACTION_OP_HALF_TOPIC: 1,
    TRANSACTION_CHECK_MAX_TIME_TOPIC: 1,
    TIMER_TOPIC: 1,
    SELF_TEST_TOPIC: 1,
    OFFSET_MOVED_EVENT: 1,
}
"""The topics every broker creates at start, with their queue counts."""

MAX_QUEUE_NUMS: Final = 65_536
"""RocketMQ's broker takes any queue count; this bound only stops a typo (a million queues
would mean a million files and a client route of that size). 20,000-queue topics fit."""


class TopicFilterType(enum.Enum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic's settings (`TopicConfig`); defaults are RocketMQ's. Frozen: a change is a new
    config in the table (`TopicTable` keeps each one's document for the next save)."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        validate_topic_name(self.topic_name)
        if not 0 <= self.perm < 8:
            raise TopicError(f"perm {self.perm} is not in 0..7")
        for name, value in (("read", self.read_queue_nums), ("write", self.write_queue_nums)):
            if not 0 < value <= MAX_QUEUE_NUMS:
                raise TopicError(f"{name} queue count {value} is not in 1..{MAX_QUEUE_NUMS}")

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type.value,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(data["topicName"]),
            read_queue_nums=int(data.get("readQueueNums", 16)),
            write_queue_nums=int(data.get("writeQueueNums", 16)),
            perm=int(data.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=TopicFilterType(data.get("topicFilterType", "SINGLE_TAG")),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
            attributes={str(k): str(v) for k, v in (data.get("attributes") or {}).items()},
        )


class TopicTable:
    """Topics of one broker."""

    def __init__(
        self,
        *,
        cluster_name: str,
        broker_name: str,
        default_queue_nums: int = 8,
        auto_create_topic_enable: bool = True,
        trace_topic: str | None = None,
    ) -> None:
        """`trace_topic`: created with the system topics (`traceTopicEnable`), one queue, as
        RocketMQ does for message trace."""
        self.topics: dict[str, TopicConfig] = {}
        self._documents: dict[str, tuple[TopicConfig, dict[str, Any]]] = {}
        """Each topic's JSON document with the config it was made of: a save of thousands of
        topics after each creation makes again only what changed."""
        self._trace_topic = trace_topic
        self.data_version = DataVersion()
        self._default_queue_nums = default_queue_nums
        self._auto_create = auto_create_topic_enable
        self._cluster_name = cluster_name
        self._broker_name = broker_name

    def load(self, document: Any, now_ms: int) -> None:
        """Takes the topics from a `topics.json` document (or None), then the system topics."""
        if isinstance(document, dict):
            for name, data in (document.get("topicConfigTable") or {}).items():
                config = TopicConfig.from_json(data)
                self.topics[name] = replace(config, topic_name=name)
            version = document.get("dataVersion")
            if isinstance(version, dict):
                self.data_version = DataVersion.from_json(version)
        self._create_system_topics(now_ms)

    def replace_all(self, document: Any, now_ms: int) -> None:
        """Takes a master's whole topic table in place of this one (a slave's sync)."""
        self.topics.clear()
        self.load(document, now_ms)

    def _create_system_topics(self, now_ms: int) -> None:
        for name, queues in BUILT_IN_TOPICS.items():
            self.topics.setdefault(name, TopicConfig(name, queues, queues))
        if self._auto_create:
            self.topics.setdefault(
                AUTO_CREATE_TOPIC_KEY_TOPIC,
                TopicConfig(
                    AUTO_CREATE_TOPIC_KEY_TOPIC,
                    self._default_queue_nums,
                    self._default_queue_nums,
                    PERM_INHERIT | PERM_READ | PERM_WRITE,
                ),
            )
        for name in (self._cluster_name, self._broker_name):
            self.topics.setdefault(
                name, TopicConfig(name, 1, 1, PERM_INHERIT | PERM_READ | PERM_WRITE)
            )
        if self._trace_topic:
            self.topics.setdefault(self._trace_topic, TopicConfig(self._trace_topic, 1, 1))
        self.data_version = self.data_version.bumped(now_ms)

    def snapshot(self) -> dict[str, Any]:
        """The `topics.json` document (its parts are shared with later snapshots: read only)."""
        documents = self._documents
        if len(documents) > 2 * len(self.topics) + 64:  # deleted topics' documents
            documents = self._documents = {
                name: documents[name] for name in self.topics if name in documents
            }
        table = {name: self._document(name, config) for name, config in sorted(self.topics.items())}
        return {"dataVersion": self.data_version.to_json(), "topicConfigTable": table}

    def changes(self, names: Iterable[str]) -> dict[str, Any]:
        """The named topics' part of `snapshot()`, None for each that no longer exists: what a
        journal of `topics.json` records of their change."""
        topics = self.topics
        table = {}
        for name in names:
            config = topics.get(name)
            table[name] = None if config is None else self._document(name, config)
        return {"dataVersion": self.data_version.to_json(), "topicConfigTable": table}

    def _document(self, name: str, config: TopicConfig) -> dict[str, Any]:
        made = self._documents.get(name)
        if made is None or made[0] is not config:
            made = self._documents[name] = (config, config.to_json())
        return made[1]

    def increment(self, names: Iterable[str], now_ms: int) -> dict[str, Any]:
        """The document of an incremental registration: the named topics that exist, under
        a data version of its own (RocketMQ's `registerIncrementBrokerData`).

        A NameServer skips the topics of a registration whose data version it already holds,
        and two changes may be sent under one version (the second made before the first was
        sent); a version bumped for each increment keeps both.
        """
        self.data_version = self.data_version.bumped(now_ms)
        topics = self.topics
        return {
            "dataVersion": self.data_version.to_json(),
            "topicConfigTable": {n: topics[n].to_json() for n in names if n in topics},
        }

    def get(self, name: str) -> TopicConfig | None:
        return self.topics.get(name)

    def update(self, config: TopicConfig, now_ms: int) -> TopicConfig:
        """Creates or replaces a topic (admin `updateTopic`).

        Raises:
            TopicError: a bad name, perm or queue count.
        """
        config.validate()
        self.topics[config.topic_name] = config
        self.data_version = self.data_version.bumped(now_ms)
        return config

    def delete(self, name: str, now_ms: int) -> bool:
        removed = self.topics.pop(name, None) is not None
        if removed:
            self.data_version = self.data_version.bumped(now_ms)
        return removed

    def create_on_send(
        self, name: str, default_topic: str, queue_nums: int, now_ms: int
    ) -> TopicConfig | None:
        """Auto-creates `name` from `default_topic` if that one allows it (PERM_INHERIT).

        Returns the new topic, or None when auto-creation does not apply.

        Raises:
            TopicError: `name` is not a legal topic name.
        """
        validate_topic_name(name)
        template = self.topics.get(default_topic)
        if template is None or not template.perm & PERM_INHERIT:
            return None
        queues = max(1, min(queue_nums, template.write_queue_nums))
        config = TopicConfig(name, queues, queues, template.perm & ~PERM_INHERIT)
        self.topics[name] = config
        self.data_version = self.data_version.bumped(now_ms)
        return config

    def learn_replicated(self, name: str, queue_id: int, now_ms: int) -> TopicConfig | None:
        """On a slave: a topic seen in replicated data before the metadata sync brought its
        config. Creates it with the default queue count (more if `queue_id` needs them); the
        next sync replaces this guess with the master's config. None for a known topic."""
        if name in self.topics:
            return None
        queues = max(queue_id + 1, self._default_queue_nums)
        config = TopicConfig(name, queues, queues, PERM_READ | PERM_WRITE)
        self.topics[name] = config
        self.data_version = self.data_version.bumped(now_ms)
        return config

    def create_system_topic(self, name: str, queues: int, perm: int, now_ms: int) -> TopicConfig:
        """Creates an internal topic (retry, dead-letter) if it does not exist yet."""
        config = self.topics.get(name)
        if config is None:
            config = TopicConfig(name, queues, queues, perm)
            self.topics[name] = config
            self.data_version = self.data_version.bumped(now_ms)
        return config
