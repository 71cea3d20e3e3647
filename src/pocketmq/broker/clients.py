"""Who is connected: producer and consumer groups, from heartbeats (`ConsumerManager`).

A client is known by its heartbeat (HEART_BEAT, code 34): the groups it produces for and
consumes in, with each consumer group's subscriptions. A client that sends no heartbeat for
`channelExpiredTimeout` (120 s) or whose connection closes is removed. When the members of a
consumer group change, the other members are told (NOTIFY_CONSUMER_IDS_CHANGED) so they
rebalance at once instead of at their next 20 s tick. Unlike RocketMQ's `ConsumerManager`,
which tells every channel of the group, a client that just registered is not told of its own
arrival: it rebalances right after that heartbeat anyway (Java's `rebalanceImmediately`,
pocketmq's `join`), and the notice would only run a second round over the queues it is
taking while their previous owners are still handing them over.

Pure: the caller passes `now_ms` and the channel object (anything hashable); the handlers in
`client_handlers.py` do the I/O.
"""

from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Final

from pocketmq.common.consumer_modes import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.common.subscription import SubscriptionData, SubscriptionError, parse_subscription

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_TIMEOUT_MS: Final = 120_000
CLIENT_ANSWER_TIMEOUT_S: Final = 5.0
"""How long the broker waits for a client to answer a request it sends it (its running info,
its offsets): RocketMQ's `Broker2Client` waits 5 s too."""


class HeartbeatError(ValueError):
    """A heartbeat body that is not RocketMQ's HeartbeatData."""


def _enum(enum_type: type[enum.Enum], value: Any, default: enum.Enum) -> Any:
    """An enum from its name (Java clients) or ordinal (the C++ client); default if absent."""
    if value is None:
        return default
    if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
        try:
            return enum_type(int(value))
        except ValueError:
            pass
    elif isinstance(value, str) and value in enum_type.__members__:
        return enum_type[value]
    raise HeartbeatError(f"{value!r} is not a {enum_type.__name__}")


@dataclass(slots=True)
class ConsumerGroupData:
    """One consumer group as one client's heartbeat describes it."""

    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: dict[str, SubscriptionData]


@dataclass(slots=True)
class HeartbeatData:
    client_id: str
    producer_groups: list[str]
    consumer_groups: list[ConsumerGroupData]


def parse_heartbeat(body: bytes) -> HeartbeatData:
    """Decodes a HEART_BEAT body, tolerant of both Java's and the C++ client's dialects.

    Raises:
        HeartbeatError: not JSON, no clientID, or fields of the wrong kind.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HeartbeatError(f"heartbeat body is not JSON: {exc}") from exc
    if not isinstance(data, dict) or not data.get("clientID"):
        raise HeartbeatError("heartbeat body has no clientID")
    producers = [
        str(p["groupName"])
        for p in data.get("producerDataSet") or []
        if isinstance(p, dict) and p.get("groupName")
    ]
    consumers = []
    for entry in data.get("consumerDataSet") or []:
        if not isinstance(entry, dict) or not entry.get("groupName"):
            raise HeartbeatError("a consumerDataSet entry has no groupName")
        subscriptions = {}
        for sub in entry.get("subscriptionDataSet") or []:
            if not isinstance(sub, dict) or not sub.get("topic"):
                raise HeartbeatError("a subscriptionDataSet entry has no topic")
            try:
                version = int(sub.get("subVersion") or 0)
                parsed = parse_subscription(
                    str(sub["topic"]),
                    str(sub.get("subString") or "*"),
                    sub.get("expressionType"),
                    sub_version=version,
                )
            except (SubscriptionError, ValueError) as exc:
                raise HeartbeatError(f"subscription of {sub['topic']!r}: {exc}") from exc
            subscriptions[parsed.topic] = parsed
        consumers.append(
            ConsumerGroupData(
                group=str(entry["groupName"]),
                consume_type=_enum(
                    ConsumeType, entry.get("consumeType"), ConsumeType.CONSUME_PASSIVELY
                ),
                message_model=_enum(
                    MessageModel, entry.get("messageModel"), MessageModel.CLUSTERING
                ),
                consume_from_where=_enum(
                    ConsumeFromWhere,
                    entry.get("consumeFromWhere"),
                    ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                ),
                subscriptions=subscriptions,
            )
        )
    return HeartbeatData(str(data["clientID"]), producers, consumers)


@dataclass(slots=True)
class ClientChannel:
    """One client connection of a group, and when it last sent a heartbeat."""

    client_id: str
    channel: Any
    last_update_ms: int
    language: str = "java"
    """The client's `LanguageCode`, lower case, from its heartbeat's header."""
    version: int = 0
    """Its `MQVersion` ordinal."""


@dataclass(slots=True)
class ConsumerGroupInfo:
    group: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    clients: dict[str, ClientChannel] = field(default_factory=dict)


class ClientRegistry:
    """Producer and consumer groups of one broker."""

    def __init__(self, channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self._expiry_ms = channel_expired_timeout_ms
        self.consumer_groups: dict[str, ConsumerGroupInfo] = {}
        self.producer_groups: dict[str, dict[str, ClientChannel]] = {}

    def heartbeat(
        self,
        data: HeartbeatData,
        channel: Any,
        now_ms: int,
        *,
        language: str = "java",
        version: int = 0,
    ) -> list[str]:
        """Registers a heartbeat; returns the consumer groups whose membership changed."""
        changed = []
        for group in data.producer_groups:
            clients = self.producer_groups.setdefault(group, {})
            clients[data.client_id] = ClientChannel(
                data.client_id, channel, now_ms, language, version
            )
        for consumer in data.consumer_groups:
            info = self.consumer_groups.get(consumer.group)
            if info is None:
                info = ConsumerGroupInfo(
                    consumer.group,
                    consumer.consume_type,
                    consumer.message_model,
                    consumer.consume_from_where,
                )
                self.consumer_groups[consumer.group] = info
            info.consume_type = consumer.consume_type
            info.message_model = consumer.message_model
            info.consume_from_where = consumer.consume_from_where
            for topic, subscription in consumer.subscriptions.items():
                known = info.subscriptions.get(topic)
                if known is None or subscription.sub_version >= known.sub_version:
                    info.subscriptions[topic] = subscription
            existing = info.clients.get(data.client_id)
            if existing is None or existing.channel is not channel:
                changed.append(consumer.group)
            info.clients[data.client_id] = ClientChannel(
                data.client_id, channel, now_ms, language, version
            )
        return changed

    def unregister(
        self, client_id: str, producer_group: str | None, consumer_group: str | None
    ) -> list[str]:
        """Removes a client from the named groups; returns consumer groups that changed."""
        if producer_group:
            self.producer_groups.get(producer_group, {}).pop(client_id, None)
        if consumer_group:
            info = self.consumer_groups.get(consumer_group)
            if info is not None and info.clients.pop(client_id, None) is not None:
                self._drop_if_empty(consumer_group)
                return [consumer_group]
        return []

    def remove_channel(self, channel: Any) -> list[str]:
        """Forgets every registration made over a closed connection."""
        return self._remove(lambda client: client.channel is channel)

    def scan_expired(self, now_ms: int) -> list[str]:
        """Removes clients silent for longer than the expiry; returns changed consumer groups."""
        return self._remove(lambda client: now_ms - client.last_update_ms > self._expiry_ms)

    def _remove(self, doomed: Any) -> list[str]:
        for clients in self.producer_groups.values():
            for client_id in [c for c, client in clients.items() if doomed(client)]:
                del clients[client_id]
        changed = []
        for group, info in list(self.consumer_groups.items()):
            gone = [c for c, client in info.clients.items() if doomed(client)]
            for client_id in gone:
                log.info("consumer %s of group %s is gone", client_id, group)
                del info.clients[client_id]
            if gone:
                changed.append(group)
                self._drop_if_empty(group)
        return changed

    def _drop_if_empty(self, group: str) -> None:
        info = self.consumer_groups.get(group)
        if info is not None and not info.clients:
            del self.consumer_groups[group]

    def consumer_ids(self, group: str) -> list[str]:
        info = self.consumer_groups.get(group)
        return sorted(info.clients) if info else []

    def consumer_channels(self, group: str, *, but: Any = None) -> list[Any]:
        """The connections of `group`'s members, except `but` (the one that caused a change)."""
        info = self.consumer_groups.get(group)
        if info is None:
            return []
        return [client.channel for client in info.clients.values() if client.channel is not but]

    def subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.consumer_groups.get(group)
        return info.subscriptions.get(topic) if info else None
