"""The connector's view of a pocketmq cluster, for Spark's synchronous callbacks: queue
listings, offsets, range reads, offset commits and sends, run on an event loop of its own
thread (one per Python process, reused across Spark's calls and tasks)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pocketmq.client.admin import AdminClient
from pocketmq.client.aio import Message, Producer
from pocketmq.client.message import MessageQueue
from pocketmq.common.stored_message import StoredMessage

T = TypeVar("T")

_SYSTEM = ("RMQ_SYS_", "rmq_sys_", "%RETRY%", "%DLQ%", "SCHEDULE_TOPIC", "TBW102")
PULL_BATCH = 32
"""What one pull carries at most (the broker's maxTransferCountOnMessageInMemory)."""


class DataLossError(RuntimeError):
    """Offsets a query still needs were removed by retention."""


@dataclass(frozen=True, slots=True)
class QueueBounds:
    queue: MessageQueue
    min_offset: int
    max_offset: int


class _Loop:
    """An event loop on a daemon thread: Spark's callbacks are synchronous."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _instance: ClassVar[_Loop | None] = None

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="pocketmq-spark", daemon=True).start()

    @classmethod
    def get(cls) -> _Loop:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Loop()
            return cls._instance

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 120.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout_s)


class Cluster:
    """One NameServer list; clients are made once per process and shared."""

    _shared: ClassVar[dict[str, Cluster]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv
        self._loop = _Loop.get()
        self._admin: AdminClient | None = None
        self._producer: Producer | None = None
        self._addresses: dict[str, str] = {}

    @classmethod
    def of(cls, namesrv: str) -> Cluster:
        with cls._lock:
            if namesrv not in cls._shared:
                cls._shared[namesrv] = Cluster(namesrv)
            return cls._shared[namesrv]

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)

    def _admin_client(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.namesrv.split(";"), timeout_s=10.0)
        return self._admin

    # -- metadata ------------------------------------------------------------------------------
    def topics(self, names: list[str], pattern: str | None) -> list[str]:
        if pattern is None:
            return names
        regex = re.compile(pattern)
        listed = self.run(self._admin_client().topic_list())
        return sorted(t for t in listed if regex.fullmatch(t) and not t.startswith(_SYSTEM))

    def bounds(self, topics: list[str]) -> list[QueueBounds]:
        """Every readable queue of `topics` with its min and max offset: one route lookup and
        one request per broker for each topic."""
        return self.run(self._bounds(topics))

    async def _bounds(self, topics: list[str]) -> list[QueueBounds]:
        admin = self._admin_client()
        found: list[QueueBounds] = []
        for topic in topics:
            route = await admin.topic_route(topic)
            for data in route.broker_datas:
                address = data.broker_addrs.get(0)
                if address:
                    self._addresses[data.broker_name] = address
            stats = await admin.topic_stats(topic)
            found.extend(
                QueueBounds(
                    MessageQueue(topic, q.queue.broker_name, q.queue.queue_id),
                    q.min_offset,
                    q.max_offset,
                )
                for q in stats.queues
            )
        return sorted(found, key=lambda b: b.queue)

    def offset_at(self, queue: MessageQueue, timestamp_ms: int) -> int:
        async def ask() -> int:
            admin = self._admin_client()
            address = await self._address(queue.topic, queue.broker_name)
            return await admin.offset_at(address, queue.topic, queue.queue_id, timestamp_ms)

        return self.run(ask())

    async def _address(self, topic: str, broker_name: str) -> str:
        if broker_name not in self._addresses:
            route = await self._admin_client().topic_route(topic)
            for data in route.broker_datas:
                if data.broker_addrs.get(0):
                    self._addresses[data.broker_name] = data.broker_addrs[0]
        try:
            return self._addresses[broker_name]
        except KeyError:
            raise RuntimeError(f"broker {broker_name} of topic {topic} has no master") from None

    # -- data ----------------------------------------------------------------------------------
    def read(
        self, queue: MessageQueue, start: int, end: int, *, fail_on_data_loss: bool
    ) -> list[StoredMessage]:
        """The messages at offsets [start, end) of `queue`, in order; always the same ones."""
        return self.run(self._read(queue, start, end, fail_on_data_loss))

    async def _read(
        self, queue: MessageQueue, start: int, end: int, fail_on_data_loss: bool
    ) -> list[StoredMessage]:
        admin = self._admin_client()
        address = await self._address(queue.topic, queue.broker_name)
        messages: list[StoredMessage] = []
        offset = start
        while offset < end:
            batch = await admin.pull(
                address, queue.topic, queue.queue_id, offset, min(PULL_BATCH, end - offset)
            )
            if batch.min_offset > offset:
                if fail_on_data_loss:
                    raise DataLossError(
                        f"{queue.topic} {queue.broker_name}:{queue.queue_id}: offsets {offset}.."
                        f"{batch.min_offset - 1} are gone (retention); the query needed them. "
                        "Restart it from a new checkpoint, or set failOnDataLoss=false to skip"
                    )
                offset = batch.min_offset
                continue
            wanted = [m for m in batch.messages if offset <= m.queue_offset < end]
            if not wanted:
                if batch.max_offset <= offset:
                    raise RuntimeError(
                        f"{queue.topic} {queue.broker_name}:{queue.queue_id} ends at "
                        f"{batch.max_offset}, before the planned end {end}"
                    )
                offset = max(offset + 1, batch.next_begin_offset)
                continue
            messages.extend(wanted)
            offset = wanted[-1].queue_offset + 1
        return messages

    def commit_offsets(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        async def commit() -> None:
            admin = self._admin_client()
            for queue, offset in offsets.items():
                address = await self._address(queue.topic, queue.broker_name)
                await admin.update_consumer_offset(
                    address, group, queue.topic, queue.queue_id, offset
                )

        self.run(commit())

    def consumer_offset(self, group: str, queue: MessageQueue) -> int | None:
        async def ask() -> int | None:
            address = await self._address(queue.topic, queue.broker_name)
            return await self._admin_client().consumer_offset(
                address, group, queue.topic, queue.queue_id
            )

        return self.run(ask())

    def send(
        self, messages: list[Message], queue: MessageQueue | None = None
    ) -> tuple[MessageQueue, int]:
        """Sends one batch (stored together, in one queue); returns the queue and the offset
        after it."""

        async def send() -> tuple[MessageQueue, int]:
            if self._producer is None:
                self._producer = Producer("pocketmq-spark-writer", namesrv=self.namesrv)
                await self._producer.start()
            if len(messages) > 1:
                result = await self._producer.send_batch(messages, queue=queue)
            else:
                result = await self._producer.send(messages[0], queue=queue)
            return result.queue, result.queue_offset + len(messages)

        return self.run(send())
