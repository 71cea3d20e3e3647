"""Pulling one queue over and over (`PullMessageService` with `DefaultMQPushConsumerImpl`'s
flow control): long-polling pulls, a pause while what was pulled is not consumed yet, and a
back-off after errors.

What the pulled messages are for is the caller's: a `PullFeed` says where the next pull
starts, whether the queue may be pulled now, and takes each result (the push consumer hands
messages to its listener, the lite pull consumer buffers them for `poll`). A feed dropped by a
rebalance or a seek ends its loop, and a result that arrives after the drop is ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final, Protocol

from pocketmq.client.consumer.pull_request import (
    PullResult,
    PullStatus,
    pull_header,
    read_pull_response,
)
from pocketmq.client.errors import ConnectionFailedError, RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import RequestCode
from pocketmq.common.route import MASTER_ID
from pocketmq.common.subscription import SubscriptionData

log = logging.getLogger(__name__)

BROKER_SUSPEND_MS: Final = 15_000
"""How long the broker holds a pull that found nothing (long polling)."""
PULL_TIMEOUT_S: Final = 30.0
PULL_DELAY_ON_ERROR_S: Final = 3.0
FLOW_CONTROL_DELAY_S: Final = 0.05


class PullFeed(Protocol):
    """One queue's side of its pull loop: its position and what its pulls bring go to."""

    @property
    def queue(self) -> MessageQueue: ...

    @property
    def dropped(self) -> bool:
        """True once the queue left this consumer (or its position was replaced)."""
        ...

    @property
    def next_offset(self) -> int:
        """Where the next pull starts."""
        ...

    def hold_s(self) -> float:
        """How long to wait before looking again when the queue must not be pulled now
        (flow control, a paused queue); 0 to pull now."""
        ...

    def subscription(self) -> SubscriptionData:
        """The expression the next pull filters with."""
        ...

    def commit_offset(self) -> int:
        """An offset the broker commits with the pull; 0 for none."""
        ...

    async def found(self, result: PullResult) -> None:
        """Takes a pull's result: messages found, none new, or none matching."""
        ...

    async def offset_moved(self, result: PullResult) -> None:
        """The queue no longer holds the offset pulled (retention, a reset)."""
        ...


async def run_pull_loop(
    instance: ClientInstance,
    group: str,
    feed: PullFeed,
    *,
    batch_size: int,
    log_names_delay: bool = False,
) -> None:
    """Pulls `feed`'s queue until the feed is dropped (or the task is cancelled).

    A broker error waits `PULL_DELAY_ON_ERROR_S` and refreshes the topic's route before the
    next pull; any other error (a bug) is logged with its traceback and waits as long. The
    push consumer's line for a bug says "failed unexpectedly", the lite pull consumer's
    (`log_names_delay`) names the delay instead.
    """
    queue = feed.queue
    while not feed.dropped:
        hold_s = feed.hold_s()
        if hold_s > 0:
            await asyncio.sleep(hold_s)
            continue
        subscription = feed.subscription()
        try:
            await _pull_once(instance, group, feed, subscription, batch_size)
        except asyncio.CancelledError:
            raise
        except RocketMQError as exc:
            log.warning(
                "pull of %s failed: %s; retrying in %g s", queue, exc, PULL_DELAY_ON_ERROR_S
            )
            await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
            with contextlib.suppress(RocketMQError):
                await instance.fetch_route(queue.topic)
        except Exception:  # a task boundary: log, keep the queue alive
            if log_names_delay:
                log.exception("pull of %s failed; retrying in %g s", queue, PULL_DELAY_ON_ERROR_S)
            else:
                log.exception("pull of %s failed unexpectedly; retrying", queue)
            await asyncio.sleep(PULL_DELAY_ON_ERROR_S)


async def _pull_once(
    instance: ClientInstance,
    group: str,
    feed: PullFeed,
    subscription: SubscriptionData,
    batch_size: int,
) -> None:
    queue = feed.queue
    offset = feed.next_offset
    result = await pull(
        instance,
        group,
        queue,
        offset,
        subscription,
        max_nums=batch_size,
        commit_offset=feed.commit_offset(),
    )
    if feed.dropped:
        return
    if result.status is PullStatus.OFFSET_ILLEGAL:
        log.warning(
            "offset %d of %s is gone (queue holds %d..%d): going on from %d",
            offset,
            queue,
            result.min_offset,
            result.max_offset,
            result.next_begin_offset,
        )
        await feed.offset_moved(result)
    else:
        await feed.found(result)


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
