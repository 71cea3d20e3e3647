"""Which queues a consumer reads after a rebalance, and where each new one starts
(`RebalanceImpl.updateProcessQueueTableInRebalance`, `computePullFromWhere`).

`group_share` asks the routes and the brokers for this member's share, `diff` compares it with
the queues held, and `start_queues` reads where each added queue starts (the committed offset,
else what `ConsumeFromWhere` says) and hands it to the consumer, which starts pulling it. What
happens to a queue given up is the consumer's own: the push consumer hands it over
(`queue_locks`), the lite pull consumer just stops it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Final

from pocketmq.client.consumer.offset_store import OffsetStore
from pocketmq.client.consumer.rebalance import AllocateStrategy
from pocketmq.client.errors import RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.client.queue_offsets import max_offset, min_offset, offset_at
from pocketmq.client.route_cache import subscribe_queues
from pocketmq.common.consumer_modes import ConsumeFromWhere, MessageModel
from pocketmq.common.topic_names import RETRY_GROUP_TOPIC_PREFIX

log = logging.getLogger(__name__)

TIMESTAMP_DEFAULT_AGO_MS: Final = 30 * 60 * 1000
"""CONSUME_FROM_TIMESTAMP without a timestamp starts half an hour back, as RocketMQ."""
_FROM_FIRST: Final = frozenset(
    {ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, ConsumeFromWhere.CONSUME_FROM_MIN_OFFSET}
)


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


def diff(
    held: Iterable[MessageQueue], wanted: set[MessageQueue]
) -> tuple[list[MessageQueue], list[MessageQueue]]:
    """(added, removed): the queues to start, sorted, and those to stop, in `held`'s order."""
    held_now = list(held)
    removed = [q for q in held_now if q not in wanted]
    added = sorted(wanted.difference(held_now))
    return added, removed


async def start_queues(
    instance: ClientInstance,
    offsets: OffsetStore,
    queues: Iterable[MessageQueue],
    consume_from_where: ConsumeFromWhere,
    consume_timestamp_ms: int | None,
    start: Callable[[MessageQueue, int], None],
) -> list[MessageQueue]:
    """Reads where each queue starts and calls `start(queue, offset)` at once, one by one.

    Returns the queues whose start could not be read: the next rebalance tries them again.
    """
    unstarted: list[MessageQueue] = []
    for queue in queues:
        try:
            offset = await starting_offset(
                instance,
                offsets,
                queue,
                consume_from_where,
                start_timestamp_ms(consume_timestamp_ms, instance.clock.now_ms()),
            )
        except RocketMQError as exc:
            log.warning("cannot find where to start %s: %s; next rebalance retries", queue, exc)
            unstarted.append(queue)
            continue
        start(queue, offset)
    return unstarted


async def starting_offset(
    instance: ClientInstance,
    store: OffsetStore,
    queue: MessageQueue,
    consume_from_where: ConsumeFromWhere,
    consume_timestamp_ms: int,
) -> int:
    """Where a consumer starts in `queue` (`RebalancePushImpl.computePullFromWhere`).

    The stored offset when there is one. Otherwise: the last-offset modes start at the queue's
    end (a new group does not replay history; the broker answers 0 for a young queue, see
    QUERY_CONSUMER_OFFSET), the first-offset modes at its start, the timestamp mode at the
    first message stored from `consume_timestamp_ms`. Retry topics always start at 0.

    Raises:
        RocketMQError: the broker cannot be asked.
    """
    from_timestamp = consume_from_where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    stored = await store.read(queue, zero_if_not_found=not from_timestamp)
    if stored >= 0:
        return stored
    if queue.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return 0
    if consume_from_where in _FROM_FIRST:
        return await min_offset(instance, queue)
    if from_timestamp:
        return await offset_at(instance, queue, consume_timestamp_ms)
    return await max_offset(instance, queue)


def start_timestamp_ms(consume_timestamp_ms: int | None, now_ms: int) -> int:
    """The time CONSUME_FROM_TIMESTAMP starts at."""
    if consume_timestamp_ms is not None:
        return consume_timestamp_ms
    return now_ms - TIMESTAMP_DEFAULT_AGO_MS


def log_assignment(group: str, client_id: str, held: int, added: int, removed: int) -> None:
    """One INFO line when a rebalance changed this consumer's queues."""
    if added or removed:
        log.info("group %s on %s: %d queues (+%d -%d)", group, client_id, held, added, removed)
