"""Handlers for client management: HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
CHECK_CLIENT_CONFIG.

They feed the `ClientRegistry`, create what a new consumer group needs (its `%RETRY%` topic),
and tell the members of a consumer group when its membership changed
(NOTIFY_CONSUMER_IDS_CHANGED, oneway), as RocketMQ's `ClientManageProcessor` does.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from pocketmq.broker.clients import ClientRegistry, HeartbeatError, parse_heartbeat
from pocketmq.broker.topics import TopicTable
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.constants import PERM_READ, PERM_WRITE
from pocketmq.common.subscription import SubscriptionError, is_tag_type, parse_subscription
from pocketmq.common.topic_names import retry_topic
from pocketmq.remoting.command import RemotingCommand
from pocketmq.remoting.errors import RemotingError
from pocketmq.remoting.transport import Channel
from pocketmq.runtime.clock import Clock

log = logging.getLogger(__name__)


class ClientHandlers:
    """The client-management request handlers of one broker."""

    def __init__(
        self,
        registry: ClientRegistry,
        topics: TopicTable,
        clock: Clock,
        on_consumer_group: Callable[[str], Awaitable[None]] | None = None,
        topics_created: Callable[[list[str]], Awaitable[None]] | None = None,
        *,
        enable_property_filter: bool = False,
    ) -> None:
        self.registry = registry
        self._enable_property_filter = enable_property_filter
        # Awaited with the retry topics a heartbeat created: saved and routed before the answer.
        self._topics_created = topics_created
        self._topics = topics
        self._clock = clock
        # Called with each consumer group a heartbeat names (to auto-create it).
        self._on_consumer_group = on_consumer_group
        self._notify_tasks: set[asyncio.Task[None]] = set()

    async def heartbeat(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        try:
            data = parse_heartbeat(request.body)
        except HeartbeatError as exc:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, f"bad heartbeat: {exc}"
            )
        now_ms = self._clock.now_ms()
        created = []
        for consumer in data.consumer_groups:
            if self._on_consumer_group is not None:
                await self._on_consumer_group(consumer.group)
            retry = retry_topic(consumer.group)
            if self._topics.get(retry) is None:
                self._topics.create_system_topic(retry, 1, PERM_READ | PERM_WRITE, now_ms)
                created.append(retry)
        if created and self._topics_created is not None:
            await self._topics_created(created)
        changed = self.registry.heartbeat(
            data,
            channel,
            now_ms,
            language=request.language.name.lower(),
            version=request.version,
        )
        for group in changed:
            log.info("consumer group %s changed: %s", group, self.registry.consumer_ids(group))
            # The newcomer too, as RocketMQ does: its own first rebalance may have run before
            # this heartbeat registered it, and would otherwise wait for the next period.
            self.notify_group_changed(group)
        return RemotingCommand.response_to(
            request,
            ResponseCode.SUCCESS,
            ext_fields={"IS_SUPPORT_HEART_BEAT_V2": "false", "IS_SUB_CHANGE": "true"},
        )

    async def unregister(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        client_id = request.ext_fields.get("clientID")
        if not client_id:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, "the clientID header field is missing"
            )
        changed = self.registry.unregister(
            client_id,
            request.ext_fields.get("producerGroup"),
            request.ext_fields.get("consumerGroup"),
        )
        for group in changed:
            self.notify_group_changed(group)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    async def consumer_list(self, request: RemotingCommand, channel: Channel) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        ids = self.registry.consumer_ids(group)
        if not ids:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}"
            )
        body = json.dumps({"consumerIdList": ids}, separators=(",", ":")).encode()
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS, body=body)

    async def check_client_config(
        self, request: RemotingCommand, channel: Channel
    ) -> RemotingCommand:
        """A consumer asks, before it starts, whether this broker can serve its subscription
        (Java clients ask for every non-TAG expression; a refusal fails their `start()`)."""
        try:
            body = json.loads(request.body or b"{}")
            subscription = body.get("subscriptionData") or {}
            topic = str(subscription.get("topic") or "")
            expression = subscription.get("subString")
            expression_type = subscription.get("expressionType")
        except (ValueError, AttributeError, UnicodeDecodeError) as exc:
            return RemotingCommand.response_to(
                request, ResponseCode.SYSTEM_ERROR, f"bad client config body: {exc}"
            )
        if is_tag_type(expression_type):
            return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
        if not self._enable_property_filter:
            return RemotingCommand.response_to(
                request,
                ResponseCode.SYSTEM_ERROR,
                "The broker does not support consumer to filter message by "
                f"{expression_type}: set enablePropertyFilter=true",
            )
        try:
            parse_subscription(topic, expression, expression_type)
        except SubscriptionError as exc:
            return RemotingCommand.response_to(request, exc.response_code, str(exc))
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)

    def channel_closed(self, channel: Channel) -> None:
        for group in self.registry.remove_channel(channel):
            self.notify_group_changed(group)

    def scan_expired(self) -> None:
        for group in self.registry.scan_expired(self._clock.now_ms()):
            self.notify_group_changed(group)

    def notify_group_changed(self, group: str, *, but: Channel | None = None) -> None:
        """Tells every member of `group` but `but` to rebalance now (oneway, in the
        background)."""
        for member in self.registry.consumer_channels(group, but=but):
            task = asyncio.get_running_loop().create_task(self._notify(member, group))
            self._notify_tasks.add(task)
            task.add_done_callback(self._notify_tasks.discard)

    @staticmethod
    async def _notify(channel: Channel, group: str) -> None:
        try:
            await channel.invoke_oneway(
                RemotingCommand.request(
                    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}
                )
            )
        except (RemotingError, ConnectionError) as exc:
            log.debug("could not notify %s of group %s: %s", channel.remote_address, group, exc)
