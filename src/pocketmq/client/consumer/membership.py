"""A consumer's membership in its group: the subscriptions it declares, the heartbeat entry
that carries them to every broker (`ConsumerData`), joining (register on the client instance,
make the brokers know it before its first rebalance) and leaving (UNREGISTER_CLIENT, so the
other members rebalance at once).

Functions, not a base class: the push and the lite pull consumer each keep their own state and
call these.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from pocketmq.client.errors import RocketMQError, SubscriptionError
from pocketmq.client.instance import ClientInstance, ConsumerMember
from pocketmq.common.codes import RequestCode
from pocketmq.common.consumer_modes import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.common.subscription import SubscriptionData, parse_subscription
from pocketmq.common.subscription import SubscriptionError as ExpressionError
from pocketmq.common.topic_names import retry_topic


def user_subscription(topic: str, expression: str, expression_type: str) -> SubscriptionData:
    """A subscription as `subscribe()` takes it.

    Raises:
        SubscriptionError: the expression cannot be parsed (the message says why).
    """
    try:
        return parse_subscription(
            topic, expression, expression_type, sub_version=time.time_ns() // 1_000_000
        )
    except ExpressionError as exc:
        raise SubscriptionError(f"cannot subscribe to {topic}: {exc}") from None


def retry_subscription(group: str) -> SubscriptionData:
    """The subscription to `%RETRY%<group>` every clustering consumer adds."""
    topic = retry_topic(group)
    return parse_subscription(topic, "*")


def heartbeat_entry(
    group: str,
    consume_type: ConsumeType,
    message_model: MessageModel,
    consume_from_where: ConsumeFromWhere,
    subscriptions: Iterable[SubscriptionData],
) -> dict[str, Any]:
    """A consumer's `ConsumerData` for heartbeats."""
    return {
        "groupName": group,
        "consumeType": consume_type.name,
        "messageModel": message_model.name,
        "consumeFromWhere": consume_from_where.name,
        "unitMode": False,
        "subscriptionDataSet": [
            {
                "classFilterMode": False,
                "topic": sub.topic,
                "subString": sub.sub_string,
                "tagsSet": sorted(sub.tags_set),
                "codeSet": sorted(sub.code_set),
                "subVersion": sub.sub_version,
                "expressionType": sub.expression_type,
            }
            for sub in subscriptions
        ],
    }


async def leave(instance: ClientInstance, group: str) -> None:
    """Tells every known broker this client left `group` (the others rebalance at once), then
    takes the group's consumer off the instance."""
    for address in instance.routes.all_broker_addresses():
        with contextlib.suppress(RocketMQError):
            await instance.invoke(
                address,
                RequestCode.UNREGISTER_CLIENT,
                {"clientID": instance.client_id, "consumerGroup": group},
                timeout_s=1.0,
            )
    instance.remove_consumer(group)


async def join(instance: ClientInstance, consumer: ConsumerMember) -> None:
    """Registers `consumer` on its instance and makes the brokers know it before it rebalances.

    Raises:
        ClientConfigError: another consumer of the group runs on this instance.
    """
    instance.add_consumer(consumer)
    await instance.refresh_routes()
    await instance.send_heartbeats()
    if any(topic not in instance.routes.routes for topic in consumer.topics()):
        # The first heartbeat makes the broker create the retry topic: look its route up now
        # rather than at the next refresh round.
        await instance.refresh_routes()
