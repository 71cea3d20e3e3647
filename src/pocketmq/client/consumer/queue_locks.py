"""The broker's queue locks as a consumer uses them (LOCK_BATCH_MQ, UNLOCK_BATCH_MQ), and the
hand-off of a queue between two members of a group (`hand_over` on the old owner's side,
`QueueHandoff` for the locks of a concurrent clustering consumer).

Orderly consumers hold the lock of every queue they consume (`orderly.py`). Concurrent push
consumers hold them too, but only to order a hand-off: RocketMQ's concurrent consumer persists a
dropped queue's offset and removes it, while the new owner, told of the change at the same
moment, may already have read the older offset the broker had before that commit, and starts
over from there (thousands of duplicates when the old owner had a full process queue). Here
the old owner unlocks only after its commit was answered, and the new owner reads where to
start only once it holds the lock, so it starts exactly where the old owner stopped.

A lock is a hint, never a barrier: a queue whose lock another client keeps for longer than
`HANDOFF_WAIT_S` (a dead or hung owner: the broker lets a lock expire only after 60 s) is taken
without it, as RocketMQ takes every queue, and locked at the next renewal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Final

from pocketmq.client.consumer.offset_store import OffsetStore
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.errors import RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageQueue
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)

HANDOFF_WAIT_S: Final = 5.0
"""How long a new owner waits for the old one to commit and unlock a queue. Longer than
`RELEASE_WAIT_S` plus a commit and an unlock, so a live old owner always makes it."""
RELEASE_WAIT_S: Final = 2.0
"""How long an old owner waits for the running listener calls of a queue it gives up; calls
still running then are redelivered by the next owner."""
HANDOFF_POLL_S: Final = 0.05


def by_broker(queues: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
    grouped: dict[str, list[MessageQueue]] = {}
    for queue in queues:
        grouped.setdefault(queue.broker_name, []).append(queue)
    return grouped


def lock_body(group: str, client_id: str, queues: Iterable[MessageQueue]) -> bytes:
    """The LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body (`LockBatchRequestBody`)."""
    return json.dumps(
        {
            "consumerGroup": group,
            "clientId": client_id,
            "onlyThisBroker": False,
            "mqSet": [
                {"topic": q.topic, "brokerName": q.broker_name, "queueId": q.queue_id}
                for q in queues
            ],
        },
        separators=(",", ":"),
    ).encode()


async def lock(
    instance: ClientInstance, group: str, queues: Iterable[MessageQueue]
) -> set[MessageQueue]:
    """Locks (or renews) `queues` on their masters; returns those granted."""
    locked: set[MessageQueue] = set()
    for broker_name, items in by_broker(queues).items():
        address = instance.routes.master_address(broker_name)
        if address is None:
            continue
        try:
            response = await instance.invoke(
                address,
                RequestCode.LOCK_BATCH_MQ,
                None,
                lock_body(group, instance.client_id, items),
            )
        except RocketMQError as exc:
            log.warning("cannot lock queues on %s: %s", broker_name, exc)
            continue
        if response.code != ResponseCode.SUCCESS:
            log.warning("broker %s refused locks: %s", broker_name, response.remark)
            continue
        try:
            granted = json.loads(response.body).get("lockOKMQSet") or []
            locked.update(
                MessageQueue(g["topic"], g["brokerName"], int(g["queueId"])) for g in granted
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            log.warning("broker %s sent a bad lock answer", broker_name)
    return locked


async def unlock(instance: ClientInstance, group: str, queues: Iterable[MessageQueue]) -> None:
    """Releases the locks of `queues` (failures are ignored: the broker's lock expires)."""
    for broker_name, items in by_broker(queues).items():
        address = instance.routes.master_address(broker_name)
        if address is None:
            continue
        with contextlib.suppress(RocketMQError):
            await instance.invoke(
                address,
                RequestCode.UNLOCK_BATCH_MQ,
                None,
                lock_body(group, instance.client_id, items),
            )


async def hand_over(
    process_queues: Mapping[MessageQueue, ProcessQueue],
    offsets: OffsetStore,
    *,
    stop_pulls: Callable[[list[MessageQueue]], Awaitable[None]],
    finish_running: Callable[[Mapping[MessageQueue, ProcessQueue]], Awaitable[None]],
    unlock: Callable[[list[MessageQueue]], Awaitable[None]],
) -> None:
    """Hands queues a consumer gave up over to their next owner
    (`removeUnnecessaryMessageQueue`).

    In this order: mark them dropped (messages pulled and not yet handed to the listener
    are abandoned, as RocketMQ's `ConsumeRequest` does, and no later result moves their
    offsets), stop their pulls, wait a moment for their running listener calls, commit
    each queue's lowest unfinished offset and wait for the broker's answer, and only then
    unlock: the next owner reads its start offset once it holds the lock, so it starts
    exactly where this consumer stopped and redelivers at most what was still running.
    """
    queues = list(process_queues)
    if not queues:
        return
    for process_queue in process_queues.values():
        process_queue.dropped = True
    await stop_pulls(queues)
    await finish_running(process_queues)
    for queue, process_queue in process_queues.items():
        offsets.update(queue, process_queue.commit_offset())
    await offsets.persist(queues)
    for queue in queues:
        offsets.forget(queue)
    await unlock(queues)


class QueueHandoff:
    """The locks of a concurrent clustering consumer: taken before reading where a queue
    starts, renewed while it is held, released after its offset was committed."""

    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        *,
        renew_interval_s: float,
        wait_s: float = HANDOFF_WAIT_S,
        clock: Clock | None = None,
    ) -> None:
        self._instance = instance
        self._clock = clock or SystemClock()
        self._group = group
        self._renew_interval_s = renew_interval_s
        self._wait_s = wait_s
        self._held: set[MessageQueue] = set()
        self._keeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._keeper = asyncio.get_running_loop().create_task(
            self._renew_periodically(), name=f"handoff-{self._group}"
        )

    async def stop(self) -> None:
        if self._keeper is not None:
            await cancel_and_wait(self._keeper)
            self._keeper = None

    async def take(self, queues: list[MessageQueue]) -> None:
        """Returns once every queue is locked here, or after `wait_s` for those that are not
        (their old owner is gone or stuck: they are taken anyway)."""
        if not queues:
            return
        deadline = self._clock.monotonic() + self._wait_s
        # A broker without a known master cannot lock: nothing to wait for there.
        missing = {q for q in queues if self._instance.routes.master_address(q.broker_name)}
        while True:
            missing -= await lock(self._instance, self._group, missing)
            if not missing or self._clock.monotonic() >= deadline:
                break
            await asyncio.sleep(HANDOFF_POLL_S)
        self._held.update(queues)
        if missing:
            log.warning(
                "group %s: %d queues still locked by another client after %g s, taken anyway "
                "(their previous owner is gone or stuck): %s",
                self._group,
                len(missing),
                self._wait_s,
                sorted(missing),
            )

    async def release(self, queues: list[MessageQueue]) -> None:
        """Unlocks queues given up (after their offsets were committed)."""
        self._held.difference_update(queues)
        if queues:
            await unlock(self._instance, self._group, queues)

    async def _renew_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._renew_interval_s)
            if self._held:
                try:
                    await lock(self._instance, self._group, list(self._held))
                except Exception:  # a task boundary: the next round tries again
                    log.exception("renewing the queue locks of %s failed", self._group)
