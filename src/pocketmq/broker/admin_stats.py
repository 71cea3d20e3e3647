"""Broker admin requests behind `topicStatus`, `consumerProgress`, subscription groups and config.

Answers, with RocketMQ's headers and bodies (`AdminBrokerProcessor`):

    code                                       request ext                  answer
    GET_TOPIC_STATS_INFO (202)                 topic                        TopicStatsTable
    GET_CONSUME_STATS (208)                    consumerGroup, topic?,       ConsumeStats
                                               topicList? (`;`-separated)
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200)  body SubscriptionGroupConfig -
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201)     -                            SubscriptionGroupWrapper
    GET_SUBSCRIPTIONGROUP_CONFIG (352)         group                        SubscriptionGroupConfig
    DELETE_SUBSCRIPTIONGROUP (207)             groupName, cleanOffset?      -
    GET_BROKER_CONFIG (26)                     -                            `key=value` lines, ext
                                                                            `version`
    UPDATE_BROKER_CONFIG (25)                  body `key=value` lines       -

`TopicStatsTable` and `ConsumeStats` are keyed by `MessageQueue` objects, which fastjson writes as
JSON objects in key position (`{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}`): not standard
JSON, but what every RocketMQ admin client parses, so this module writes exactly that.

A change to the subscription groups (`groups.py`) is saved (off the loop) before the request is
answered.

Broker config updates change the running settings objects only for `LIVE_CONFIG_KEYS`, the
settings read again on every use; any other known key is refused with NO_PERMISSION (it is read
once at start, so "success" would be a lie: set it in broker.properties and restart), an unknown
key or a bad value with INVALID_PARAMETER. Updates are not written back to any file.

Not kept: put/get TPS (`topicPutTps`, `consumeTps` are 0.0) and pull offsets (`pullOffset` equals
the committed offset), as this broker keeps no statistics yet.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.groups import (
    SubscriptionGroupConfig,
    SubscriptionGroupError,
    SubscriptionGroupTable,
)
from pocketmq.broker.headers import (
    answers_header_errors,
    error_response,
    optional_bool,
    required_text,
)
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.persistence import JournaledSaves
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.config import (
    ConfigError,
    apply_properties,
    config_to_properties,
    parse_properties,
)
from pocketmq.common.data_version import DataVersion
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.transport import Channel, RequestHandler
from pocketmq.runtime.clock import Clock
from pocketmq.store.config import MessageStoreConfig
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

TOPIC_LIST_SEPARATOR: Final = ";"
LIVE_CONFIG_KEYS: Final = frozenset(
    {"flushConsumerOffsetInterval", "syncFlushTimeout", "cleanResourceInterval"}
)
"""Settings the broker reads on every use, so an update takes effect at once."""


# -- fastjson bodies keyed by MessageQueue ------------------------------------------------------


def _message_queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    # fastjson writes bean fields sorted by name, as a JSON object even in key position.
    return json.dumps(
        {"brokerName": broker_name, "queueId": queue_id, "topic": topic},
        separators=(",", ":"),
        ensure_ascii=False,
    )


def _java_double(value: float) -> str:
    return repr(float(value))


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue's row of a `TopicStatsTable`."""

    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int


def encode_topic_stats(
    topic: str, broker_name: str, offsets: Sequence[TopicOffset], put_tps: float = 0.0
) -> bytes:
    """A `TopicStatsTable` body as fastjson writes it (object keys)."""
    entries = [
        _message_queue_key(topic, broker_name, o.queue_id)
        + ":"
        + json.dumps(
            {
                "lastUpdateTimestamp": o.last_update_timestamp_ms,
                "maxOffset": o.max_offset,
                "minOffset": o.min_offset,
            },
            separators=(",", ":"),
        )
        for o in offsets
    ]
    text = '{"offsetTable":{' + ",".join(entries) + '},"topicPutTps":' + _java_double(put_tps)
    return (text + "}").encode("utf-8")


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """One queue's row of a `ConsumeStats`."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp_ms: int


def offset_row(
    store: MessageStore, offsets: ConsumerOffsetTable, group: str, topic: str, queue_id: int
) -> OffsetWrapper:
    """A group's row for one queue: the queue's end, the group's committed offset, and when
    the last message it consumed was stored."""
    broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
    committed = offsets.query(group, topic, queue_id)
    consumer_offset = max(committed if committed is not None else 0, 0)
    stamp = 0
    if consumer_offset > 0:
        stamp = max(store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1), 0)
    return OffsetWrapper(topic, queue_id, broker_offset, consumer_offset, consumer_offset, stamp)


def encode_consume_stats(
    broker_name: str, rows: Sequence[OffsetWrapper], consume_tps: float = 0.0
) -> bytes:
    """A `ConsumeStats` body as fastjson writes it (object keys)."""
    entries = [
        _message_queue_key(r.topic, broker_name, r.queue_id)
        + ":"
        + json.dumps(
            {
                "brokerOffset": r.broker_offset,
                "consumerOffset": r.consumer_offset,
                "lastTimestamp": r.last_timestamp_ms,
                "pullOffset": r.pull_offset,
            },
            separators=(",", ":"),
        )
        for r in rows
    ]
    text = '{"consumeTps":' + _java_double(consume_tps) + ',"offsetTable":{' + ",".join(entries)
    return (text + "}}").encode("utf-8")


# -- handlers ----------------------------------------------------------------------------------


class AdminStatsHandlers:
    """Topic and consumer statistics, subscription groups and the broker's settings."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        broker_config: BrokerConfig,
        store_config: MessageStoreConfig,
        *,
        on_config_changed: Callable[[], None] | None = None,
    ) -> None:
        """Loads the subscription groups from the store's `subscriptionGroup.json`.

        Args:
            store: A loaded store (its metadata documents are read here).
            topics: The broker's topic table.
            offsets: Committed consumer offsets.
            clock: Time for data versions.
            broker_config: Read by GET_BROKER_CONFIG; live keys changed by UPDATE_BROKER_CONFIG.
            store_config: Likewise.
            on_config_changed: Called after a successful config update.
        """
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._clock = clock
        self._broker_config = broker_config
        self._store_config = store_config
        self._on_config_changed = on_config_changed
        self._config_version = DataVersion()
        self.groups = SubscriptionGroupTable()
        self.groups.load(store.metadata_documents.get("subscriptionGroup.json"))
        self.group_saves = JournaledSaves(
            store.metadata.subscription_groups, self.groups.snapshot, self.groups.changes
        )
        """Its `run` is the server's to start (whole saves after `groups_changed`)."""

    def routes(self) -> dict[int, RequestHandler]:
        """The request codes these handlers answer, for the server's dispatch table."""
        return {
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_subscription_group,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_subscription_groups,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
        }

    @property
    def _broker_name(self) -> str:
        return self._broker_config.broker_name

    @answers_header_errors()
    async def topic_stats(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: min, max and last store time of every queue of a topic."""
        topic = required_text(request.ext_fields, "topic")
        config = self._topics.get(topic)
        if config is None:
            return error_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist"
            )
        store = self._store
        rows = []
        for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
            low = max(store.get_min_offset_in_queue(topic, queue_id), 0)
            high = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            stamp = store.get_message_store_timestamp(topic, queue_id, high - 1) if high else 0
            rows.append(TopicOffset(queue_id, low, high, max(stamp, 0)))
        body = encode_topic_stats(topic, self._broker_name, rows)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    @answers_header_errors()
    async def consume_stats(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_CONSUME_STATS: per queue, the broker's max offset and the group's committed one."""
        ext = request.ext_fields
        group = required_text(ext, "consumerGroup")
        listed = [t for t in (ext.get("topicList") or "").split(TOPIC_LIST_SEPARATOR) if t]
        if listed:
            wanted = set(listed)
        elif ext.get("topic"):
            wanted = {ext["topic"]}
        else:
            wanted = self._offsets.topics_of_group(group)
        store = self._store
        rows: list[OffsetWrapper] = []
        for topic in sorted(wanted):
            config = self._topics.get(topic)
            if config is None:
                continue
            rows.extend(
                offset_row(store, self._offsets, group, topic, queue_id)
                for queue_id in range(config.read_queue_nums)
            )
        body = encode_consume_stats(self._broker_name, rows)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def update_subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: creates or replaces the group in the body."""
        try:
            config = SubscriptionGroupConfig.from_json(json.loads(request.body))
            self.groups.update(config, self._clock.now_ms())
        except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        await self.group_saves.save_now([config.group_name])
        log.info("subscription group %s created or updated", config.group_name)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def all_subscription_groups(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the `SubscriptionGroupWrapper`."""
        body = json.dumps(self.groups.snapshot(), separators=(",", ":"), ensure_ascii=False)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"totalGroupNum": str(len(self.groups.groups))},
            body=body.encode("utf-8"),
        )

    @answers_header_errors()
    async def subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """GET_SUBSCRIPTIONGROUP_CONFIG: one group's `SubscriptionGroupConfig`; an unknown group
        is created first with `autoCreateSubscriptionGroup`, as RocketMQ's lookup does."""
        name = required_text(request.ext_fields, "group")
        if name not in self.groups.groups and self._broker_config.auto_create_subscription_group:
            await self.ensure_group(name)
        config = self.groups.groups.get(name)
        if config is None:
            return error_response(
                request,
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"No subscription group config found for group {name}",
            )
        body = json.dumps(config.to_json(), separators=(",", ":"), ensure_ascii=False)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body.encode())

    @answers_header_errors()
    async def delete_subscription_group(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP: forgets the group, and its offsets with `cleanOffset`."""
        name = required_text(request.ext_fields, "groupName")
        clean_offset = optional_bool(request.ext_fields, "cleanOffset") or False
        if self.groups.delete(name, self._clock.now_ms()):
            await self.group_saves.save_now([name])
            log.info("subscription group %s deleted", name)
        if clean_offset:
            self._offsets.remove_group(name)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def ensure_group(self, group: str) -> None:
        """Creates a consumer group on first sight (`autoCreateSubscriptionGroup`)."""
        if group in self.groups.groups:
            return
        try:
            self.groups.update(SubscriptionGroupConfig(group), self._clock.now_ms())
        except SubscriptionGroupError as exc:
            log.warning("not creating consumer group %r: %s", group, exc)
            return
        log.info("consumer group %s created on first heartbeat", group)
        await self.group_saves.save_now([group])

    async def replace_groups(self, document: Any) -> None:
        """Takes a master's whole group table in place of this one (a slave's sync)."""
        self.groups.groups.clear()
        self.groups.load(document)
        await self.group_saves.save_whole()

    def groups_changed(self) -> None:
        """The group table was replaced from elsewhere (a DLedger log): saves it soon."""
        self.group_saves.changed()

    def _all_settings(self) -> dict[str, str]:
        settings = config_to_properties(self._broker_config)
        settings.update(config_to_properties(self._store_config))
        return settings

    async def broker_config(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        """GET_BROKER_CONFIG: every setting as `key=value` lines (`properties2String`)."""
        body = "".join(f"{name}={value}\n" for name, value in self._all_settings().items())
        version = json.dumps(self._config_version.to_json(), separators=(",", ":"))
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, ext_fields={"version": version}, body=body.encode()
        )

    async def update_broker_config(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """UPDATE_BROKER_CONFIG: changes live settings; refuses the ones read only at start."""
        try:
            updates = parse_properties(request.body.decode("utf-8"), source="request body")
        except (UnicodeDecodeError, ConfigError) as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        known = self._all_settings()
        unknown = sorted(name for name in updates if name not in known)
        if unknown:
            return error_response(
                request,
                ResponseCode.INVALID_PARAMETER,
                f"unknown config key(s): {', '.join(unknown)}",
            )
        frozen = sorted(name for name in updates if name not in LIVE_CONFIG_KEYS)
        if frozen:
            return error_response(
                request,
                ResponseCode.NO_PERMISSION,
                f"{', '.join(frozen)} cannot change while the broker runs: set it in "
                "broker.properties and restart; changeable now: "
                + ", ".join(sorted(LIVE_CONFIG_KEYS)),
            )
        try:
            _apply_all(updates, (self._broker_config, self._store_config))
        except ConfigError as exc:
            return error_response(request, ResponseCode.INVALID_PARAMETER, str(exc))
        self._config_version = self._config_version.bumped(self._clock.now_ms())
        log.info("broker config updated: %s", updates)
        if self._on_config_changed is not None:
            self._on_config_changed()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)


def _apply_all(updates: Mapping[str, str], configs: Sequence[Any]) -> None:
    """Applies `updates` to every settings object, all values checked before any is set."""
    for config in configs:
        # A dry run on a copy first, so a bad value leaves every object untouched.
        apply_properties(copy.copy(config), updates)
    for config in configs:
        apply_properties(config, updates)
