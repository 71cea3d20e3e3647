"""Queue locks for orderly consumers (RocketMQ's `RebalanceLockManager`) and their requests,
LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42).

An orderly consumer reads a queue only while it holds the queue's lock on the broker, so two
members of a group never consume one queue at once, even while a rebalance moves it. A lock
belongs to a client id; the holder renews it by locking again (clients do every 20 s); a lock
not renewed for `lock_max_live_ms` (60 s) expires and another client may take it. Unlocking a
lock held by another client does nothing.

Bodies are RocketMQ's JSON: `{"consumerGroup", "clientId", "onlyThisBroker", "mqSet": [{"topic",
"brokerName", "queueId"}]}`; the lock answer is `{"lockOKMQSet": [...]}`, the queues now held.

`QueueLockTable` is pure (the caller passes `now_ms`); `QueueLockHandlers` decodes and answers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from pocketmq.broker.headers import error_response
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.fastjson import FastjsonError, parse_fastjson
from pocketmq.remoting.command import RemotingCommand
from pocketmq.runtime.clock import Clock

if TYPE_CHECKING:
    from pocketmq.remoting.transport import Channel, RequestHandler

log = logging.getLogger(__name__)

LOCK_MAX_LIVE_MS: Final = 60_000


@dataclass(frozen=True, slots=True, order=True)
class LockedQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, Any]:
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class QueueLockTable:
    """Who holds which queue, per consumer group."""

    def __init__(self, lock_max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self.lock_max_live_ms = lock_max_live_ms
        self._locks: dict[str, dict[LockedQueue, _Lock]] = {}

    def try_lock(
        self, group: str, client_id: str, queues: Iterable[LockedQueue], now_ms: int
    ) -> set[LockedQueue]:
        """Locks (or renews) every queue that is free, expired or already `client_id`'s.

        Returns:
            The queues `client_id` holds afterwards, among those asked for.
        """
        table = self._locks.setdefault(group, {})
        held = set()
        for queue in queues:
            lock = table.get(queue)
            if lock is None or lock.client_id == client_id or self._expired(lock, now_ms):
                if lock is not None and lock.client_id != client_id:
                    log.info(
                        "group %s: lock of %s moves from %s (expired) to %s",
                        group,
                        queue,
                        lock.client_id,
                        client_id,
                    )
                table[queue] = _Lock(client_id, now_ms)
                held.add(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[LockedQueue]) -> None:
        """Releases the queues that `client_id` holds; others' locks stay."""
        table = self._locks.get(group)
        if not table:
            return
        for queue in queues:
            lock = table.get(queue)
            if lock is not None and lock.client_id == client_id:
                del table[queue]

    def holder(self, group: str, queue: LockedQueue, now_ms: int) -> str | None:
        """The client holding `queue` for `group`, if the lock is live."""
        lock = self._locks.get(group, {}).get(queue)
        if lock is None or self._expired(lock, now_ms):
            return None
        return lock.client_id

    def _expired(self, lock: _Lock, now_ms: int) -> bool:
        return now_ms - lock.last_update_ms > self.lock_max_live_ms


class LockBodyError(ValueError):
    """A lock or unlock body that is not RocketMQ's JSON."""


def decode_lock_body(body: bytes) -> tuple[str, str, list[LockedQueue]]:
    """(group, client id, queues) of a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body.

    Raises:
        LockBodyError: not JSON, or a field missing or of the wrong kind.
    """
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        try:
            document = parse_fastjson(body)
        except FastjsonError as exc:
            raise LockBodyError(f"the body is not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise LockBodyError("the body is not a JSON object")
    group = document.get("consumerGroup")
    client_id = document.get("clientId")
    if not isinstance(group, str) or not group or not isinstance(client_id, str) or not client_id:
        raise LockBodyError("consumerGroup and clientId are required")
    queues = []
    for item in document.get("mqSet") or []:
        try:
            queues.append(
                LockedQueue(str(item["topic"]), str(item["brokerName"]), int(item["queueId"]))
            )
        except (KeyError, TypeError, ValueError):
            raise LockBodyError(f"a queue of mqSet is malformed: {item!r}") from None
    return group, client_id, queues


def encode_lock_answer(queues: Iterable[LockedQueue]) -> bytes:
    """The LOCK_BATCH_MQ answer body: `{"lockOKMQSet": [...]}`."""
    return json.dumps(
        {"lockOKMQSet": [q.to_json() for q in sorted(queues)]}, separators=(",", ":")
    ).encode()


class QueueLockHandlers:
    """LOCK_BATCH_MQ and UNLOCK_BATCH_MQ on one broker's lock table."""

    def __init__(self, table: QueueLockTable, clock: Clock) -> None:
        self.table = table
        self._clock = clock

    def routes(self) -> dict[int, RequestHandler]:
        return {
            RequestCode.LOCK_BATCH_MQ: self.lock,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock,
        }

    async def lock(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        try:
            group, client_id, queues = decode_lock_body(request.body)
        except LockBodyError as exc:
            return error_response(request, ResponseCode.SYSTEM_ERROR, f"bad lock request: {exc}")
        held = self.table.try_lock(group, client_id, queues, self._clock.now_ms())
        log.debug("group %s: %s locks %d of %d queues", group, client_id, len(held), len(queues))
        return RemotingCommand.response_to(
            request, ResponseCode.SUCCESS, body=encode_lock_answer(held)
        )

    async def unlock(
        self, request: RemotingCommand, channel: Channel | None = None
    ) -> RemotingCommand:
        try:
            group, client_id, queues = decode_lock_body(request.body)
        except LockBodyError as exc:
            return error_response(request, ResponseCode.SYSTEM_ERROR, f"bad unlock request: {exc}")
        self.table.unlock(group, client_id, queues)
        return RemotingCommand.response_to(request, ResponseCode.SUCCESS)
