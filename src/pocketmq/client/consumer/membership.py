"""What every consumer of a group does the same way, push or lite pull: parse subscriptions,
describe itself in heartbeats, compute its share of the queues, pull one queue, leave.

Functions, not a base class: each consumer keeps its own state and calls these.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from pocketmq.client.consumer.offset_store import (
    RETRY_GROUP_TOPIC_PREFIX,
    LocalOffsetStore,
    OffsetStore,
    RemoteOffsetStore,
)
from pocketmq.client.consumer.pull_request import PullResult, pull_header, read_pull_response
from pocketmq.client.consumer.rebalance import AllocateStrategy
from pocketmq.client.errors import ConnectionFailedError, RocketMQError, SubscriptionError
from pocketmq.client.instance import ClientInstance, ConsumerMember
from pocketmq.client.message import MessageQueue
from pocketmq.client.route_cache import subscribe_queues
from pocketmq.common.codes import RequestCode
from pocketmq.common.consumer_modes import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.common.route import MASTER_ID
from pocketmq.common.subscription import SubscriptionData, parse_subscription
from pocketmq.common.subscription import SubscriptionError as ExpressionError

log = logging.getLogger(__name__)

BROKER_SUSPEND_MS: Final = 15_000
"""How long the broker holds a pull that found nothing (long polling)."""
PULL_TIMEOUT_S: Final = 30.0
PULL_DELAY_ON_ERROR_S: Final = 3.0
FLOW_CONTROL_DELAY_S: Final = 0.05
TIMESTAMP_DEFAULT_AGO_MS: Final = 30 * 60 * 1000
"""CONSUME_FROM_TIMESTAMP without a timestamp starts half an hour back, as RocketMQ."""


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
    topic = RETRY_GROUP_TOPIC_PREFIX + group
    return parse_subscription(topic, "*")


def start_timestamp_ms(consume_timestamp_ms: int | None) -> int:
    """The time CONSUME_FROM_TIMESTAMP starts at."""
    if consume_timestamp_ms is not None:
        return consume_timestamp_ms
    return time.time_ns() // 1_000_000 - TIMESTAMP_DEFAULT_AGO_MS


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


async def group_share(
    instance: ClientInstance,
    group: str,
    strategy: AllocateStrategy,
    message_model: MessageModel,
    topics: Iterable[str],
    current: Iterable[MessageQueue],
) -> set[MessageQueue]:
    """The queues of `topics` this consumer should read now (`RebalanceImpl`).

    Broadcasting takes every readable queue; clustering takes `strategy`'s share among the
    group's members as a broker knows them. A topic without a route, or whose brokers know no
    member yet, keeps the queues held now (`current`) rather than dropping them.
    """
    held = list(current)
    wanted: set[MessageQueue] = set()
    for topic in topics:
        route = instance.routes.routes.get(topic)
        if route is None:
            wanted.update(q for q in held if q.topic == topic)
            continue
        queues = subscribe_queues(topic, route)
        if message_model is MessageModel.BROADCASTING:
            wanted.update(queues)
            continue
        ids = await instance.consumer_ids(group, topic)
        if not ids:
            log.debug("group %s has no members on the brokers of %s yet", group, topic)
            wanted.update(q for q in held if q.topic == topic)
            continue
        wanted.update(strategy.allocate(group, instance.client_id, queues, ids))
    return wanted


async def pull(
    instance: ClientInstance,
    group: str,
    queue: MessageQueue,
    offset: int,
    subscription: SubscriptionData,
    *,
    max_nums: int,
    commit_offset: int = 0,
) -> PullResult:
    """One long-polling pull of `queue` from the replica its broker last suggested: the
    master, a slave when the reader is far behind the head (and the master allows slave
    reads), any slave when the master is gone.

    Raises:
        RocketMQError: no address for the broker, no answer, or a refusal.
    """
    routes = instance.routes
    address = routes.read_address(queue.broker_name, instance.pull_from.get(queue, MASTER_ID))
    if address is None:
        raise ConnectionFailedError(f"broker {queue.broker_name} has no known address")
    header = pull_header(
        group,
        queue,
        offset,
        subscription,
        max_nums=max_nums,
        commit_offset=commit_offset,
        suspend_timeout_ms=BROKER_SUSPEND_MS,
    )
    response = await instance.invoke(
        address, RequestCode.PULL_MESSAGE, header, timeout_s=PULL_TIMEOUT_S
    )
    result = read_pull_response(response, queue, offset, subscription, f"pull of {queue}")
    instance.pull_from[queue] = result.suggest_which_broker_id
    return result


def offset_store_for(
    instance: ClientInstance, group: str, message_model: MessageModel, directory: Path
) -> OffsetStore:
    """The broker for clustering groups, a local file under `directory` for broadcasting."""
    if message_model is MessageModel.CLUSTERING:
        return RemoteOffsetStore(instance, group)
    return LocalOffsetStore(directory, instance.client_id, group)


def log_assignment(group: str, client_id: str, held: int, added: int, removed: int) -> None:
    """One INFO line when a rebalance changed this consumer's queues."""
    if added or removed:
        log.info("group %s on %s: %d queues (+%d -%d)", group, client_id, held, added, removed)


def log_offset_moved(queue: MessageQueue, offset: int, result: PullResult) -> None:
    """The warning for a pull whose offset retention (or a reset) removed."""
    log.warning(
        "offset %d of %s is gone (queue holds %d..%d): going on from %d",
        offset,
        queue,
        result.min_offset,
        result.max_offset,
        result.next_begin_offset,
    )


async def unregister(instance: ClientInstance, group: str) -> None:
    """Tells every known broker this client left `group` (the others rebalance at once)."""
    for address in instance.routes.all_broker_addresses():
        with contextlib.suppress(RocketMQError):
            await instance.invoke(
                address,
                RequestCode.UNREGISTER_CLIENT,
                {"clientID": instance.client_id, "consumerGroup": group},
                timeout_s=1.0,
            )


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
