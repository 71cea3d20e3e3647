"""The connector's view of a pocketmq cluster, for Spark's synchronous callbacks: queue
listings, offsets, range reads, offset commits and sends, run on an event loop of its own
thread (one per Python process, reused across Spark's calls and tasks)."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

from pocketmq.client.admin import AdminClient, AdminError
from pocketmq.client.aio import Message, Producer
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.message import MessageQueue, UniqueIdGenerator
from pocketmq.client.producer.wire import PreparedSend
from pocketmq.common.codes import ResponseCode
from pocketmq.common.route import TopicRouteData
from pocketmq.common.stored_message import StoredMessage, decode_records
from pocketmq.common.topic_names import (
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
)
from pocketmq.runtime.clock import Clock, SystemClock
from pocketmq.runtime.event_loop import new_event_loop
from pocketmq.spark.fetch import DataLossError, fetch_range
from pocketmq.spark.options import Connection

T = TypeVar("T")
__all__ = ["Cluster", "DataLossError", "QueueBounds"]

_SYSTEM = (
    "RMQ_SYS_",
    "rmq_sys_",
    RETRY_GROUP_TOPIC_PREFIX,
    DLQ_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    AUTO_CREATE_TOPIC_KEY_TOPIC,
)
ROUTE_REFRESH_S: Final = 10.0
"""How long a topic's route and a pattern's topic list are trusted. Spark asks an idle query for
its latest offsets 50 to 90 times a second; with the route cached that costs one stats request
per broker and topic, none to the NameServer. A queue added on a known broker shows at once (the
broker's stats list every queue it has); a new broker or a new topic of a pattern within this."""


@dataclass(frozen=True, slots=True)
class QueueBounds:
    queue: MessageQueue
    min_offset: int
    max_offset: int


class _Loop:
    """An event loop (uvloop where installed) on a daemon thread: Spark's callbacks are
    synchronous."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _instance: ClassVar[_Loop | None] = None

    def __init__(self) -> None:
        self.loop = new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="pocketmq-spark", daemon=True).start()

    @classmethod
    def get(cls) -> _Loop:
        with cls._lock:
            if cls._instance is None:
                cls._instance = _Loop()
            return cls._instance

    def run(self, coroutine: Coroutine[Any, Any, T], timeout_s: float = 120.0) -> T:
        return self.submit(coroutine).result(timeout_s)

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)


class _CachingAdmin(AdminClient):
    """An AdminClient whose route lookups and topic list come from a cache kept for `refresh_s`:
    every admin call that needs a route (topic stats, consumer progress) skips the NameServer.

    Used only on the connector's event loop thread, so the dictionaries need no lock."""

    def __init__(
        self,
        namesrv_addresses: list[str],
        *,
        timeout_s: float,
        clock: Clock,
        refresh_s: float,
        tls: bool,
        credentials: SessionCredentials | None,
    ) -> None:
        super().__init__(namesrv_addresses, timeout_s=timeout_s, tls=tls, credentials=credentials)
        self._clock = clock
        self.refresh_s = refresh_s
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._topic_list: tuple[float, list[str]] | None = None

    async def topic_route(self, topic: str) -> TopicRouteData:
        now = self._clock.monotonic()
        cached = self._routes.get(topic)
        if cached is not None and now - cached[0] < self.refresh_s:
            return cached[1]
        route = await super().topic_route(topic)
        self._routes[topic] = (now, route)
        return route

    async def topic_list(self) -> list[str]:
        now = self._clock.monotonic()
        if self._topic_list is None or now - self._topic_list[0] >= self.refresh_s:
            self._topic_list = (now, await super().topic_list())
        return self._topic_list[1]

    def forget_route(self, topic: str) -> None:
        """The next lookup of `topic` asks a NameServer (after a broker of it failed)."""
        self._routes.pop(topic, None)


class Cluster:
    """One NameServer list; clients are made once per process and shared.

    Routes are cached for `route_refresh_s` (see `ROUTE_REFRESH_S`) and dropped early when a
    broker of the topic fails, so a moved broker is found on the next call."""

    _shared: ClassVar[dict[Connection, Cluster]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        connection: Connection | str,
        *,
        clock: Clock | None = None,
        route_refresh_s: float = ROUTE_REFRESH_S,
    ) -> None:
        if isinstance(connection, str):
            connection = Connection(connection)
        self.connection = connection
        self.namesrv = connection.namesrv
        self._credentials = (
            SessionCredentials(connection.access_key, connection.secret_key)
            if connection.access_key and connection.secret_key
            else None
        )
        self._loop = _Loop.get()
        self._clock: Clock = clock or SystemClock()
        self._route_refresh_s = route_refresh_s
        self._admin: _CachingAdmin | None = None
        self._producer: Producer | None = None
        self._producer_started: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, connection: Connection) -> Cluster:
        with cls._lock:
            if connection not in cls._shared:
                cls._shared[connection] = Cluster(connection)
            return cls._shared[connection]

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self._loop.run(coroutine)

    def _admin_client(self) -> _CachingAdmin:
        if self._admin is None:
            self._admin = _CachingAdmin(
                self.namesrv.split(";"),
                timeout_s=10.0,
                clock=self._clock,
                refresh_s=self._route_refresh_s,
                tls=self.connection.tls,
                credentials=self._credentials,
            )
        return self._admin

    # -- metadata ------------------------------------------------------------------------------
    def topics(self, names: list[str], pattern: str | None) -> list[str]:
        """`names`, or the topics matching `pattern` (listed at most every `route_refresh_s`)."""
        if pattern is None:
            return names
        regex = re.compile(pattern)
        listed = self.run(self._admin_client().topic_list())
        return sorted(t for t in listed if regex.fullmatch(t) and not t.startswith(_SYSTEM))

    def bounds(self, topics: list[str], *, skip_missing: bool = False) -> list[QueueBounds]:
        """Every readable queue of `topics` with its min and max offset: one request per broker
        and topic, the routes cached (a NameServer lookup only when one is older than
        `route_refresh_s` or its broker failed).

        Args:
            topics: The topics to list.
            skip_missing: Leave out topics that no longer exist (a pattern subscription's
                listing may be that old) instead of failing.

        Raises:
            AdminError: a topic does not exist (unless skipped), or a broker failed twice.
        """
        return self.run(self._bounds(topics, skip_missing))

    async def _bounds(self, topics: list[str], skip_missing: bool) -> list[QueueBounds]:
        per_topic = await asyncio.gather(*(self._topic_bounds(t, skip_missing) for t in topics))
        return sorted((b for found in per_topic for b in found), key=lambda b: b.queue)

    async def _topic_bounds(self, topic: str, skip_missing: bool) -> list[QueueBounds]:
        admin = self._admin_client()
        try:
            try:
                stats = await admin.topic_stats(topic)
            except AdminError:
                # The cached route may name a broker that moved or died: ask again, once.
                admin.forget_route(topic)
                stats = await admin.topic_stats(topic)
        except AdminError as exc:
            if skip_missing and exc.code == ResponseCode.TOPIC_NOT_EXIST:
                return []
            raise
        return [QueueBounds(q.queue, q.min_offset, q.max_offset) for q in stats.queues]

    def offset_at(self, queue: MessageQueue, timestamp_ms: int) -> int:
        async def ask() -> int:
            admin = self._admin_client()
            address = await self._address(queue.topic, queue.broker_name)
            return await admin.offset_at(address, queue.topic, queue.queue_id, timestamp_ms)

        return self.run(ask())

    async def _address(self, topic: str, broker_name: str) -> str:
        """The master of `broker_name` in `topic`'s route (cached; asked again when missing)."""
        admin = self._admin_client()
        for attempt in range(2):
            if attempt:
                admin.forget_route(topic)
            route = await admin.topic_route(topic)
            for data in route.broker_datas:
                if data.broker_name == broker_name and data.broker_addrs.get(0):
                    return data.broker_addrs[0]
        raise RuntimeError(f"broker {broker_name} of topic {topic} has no master")

    # -- data ----------------------------------------------------------------------------------
    def read(
        self, queue: MessageQueue, start: int, end: int, *, fail_on_data_loss: bool
    ) -> list[StoredMessage]:
        """The messages at offsets [start, end) of `queue`, in order; always the same ones."""
        pulls = self.run(self._fetch(queue, start, end, fail_on_data_loss))
        messages = (m for records in pulls for m in decode_records(records, check_crc=False))
        return [m for m in messages if start <= m.queue_offset < end]

    def submit_read(
        self, queue: MessageQueue, start: int, end: int, *, fail_on_data_loss: bool
    ) -> Future[list[bytes]]:
        """Starts reading offsets [start, end) of `queue` on the connector's loop: the caller
        decodes one range while the next is on its way. The pull bodies come back undecoded
        (`pocketmq.spark.records` turns them into columns)."""
        return self._loop.submit(self._fetch(queue, start, end, fail_on_data_loss))

    async def _fetch(
        self, queue: MessageQueue, start: int, end: int, fail_on_data_loss: bool
    ) -> list[bytes]:
        admin = self._admin_client()
        for attempt in range(2):
            address = await self._address(queue.topic, queue.broker_name)
            try:
                return await fetch_range(
                    admin, address, queue, start, end, fail_on_data_loss=fail_on_data_loss
                )
            except AdminError:
                if attempt:
                    raise
                admin.forget_route(queue.topic)  # the broker may have moved: ask again, once
        raise AssertionError("unreachable")

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

    def submit_send(
        self, messages: list[Message], queue: MessageQueue | None = None
    ) -> Future[tuple[MessageQueue, int]]:
        """Starts sending one batch (stored together, in one queue); the future gives the queue
        and the offset after the batch. Callers keep several in flight."""
        return self._loop.submit(self._send(messages, queue))

    async def _send(
        self, messages: list[Message], queue: MessageQueue | None
    ) -> tuple[MessageQueue, int]:
        producer = await self._started_producer()
        if len(messages) > 1:
            result = await producer.send_batch(messages, queue=queue)
        else:
            result = await producer.send(messages[0], queue=queue)
        return result.queue, result.queue_offset + len(messages)

    def submit_prepared(
        self, prepared: PreparedSend, queue: MessageQueue | None = None
    ) -> Future[tuple[MessageQueue, int]]:
        """`submit_send` for a batch the caller encoded (`batch_bodies.encode_rows`)."""
        return self._loop.submit(self._send_prepared(prepared, queue))

    async def _send_prepared(
        self, prepared: PreparedSend, queue: MessageQueue | None
    ) -> tuple[MessageQueue, int]:
        producer = await self._started_producer()
        result = await producer.send_prepared(prepared, queue=queue)
        return result.queue, result.queue_offset + len(prepared.msg_ids)

    def id_generator(self) -> UniqueIdGenerator:
        """A source of message ids (UNIQ_KEY) for one task's rows, made as the sink's producer
        makes its own: its address, this process and random bits of its own."""

        async def make() -> UniqueIdGenerator:
            instance = (await self._started_producer()).instance
            return UniqueIdGenerator(instance.ip, instance.rng.getrandbits(32))

        return self.run(make())

    async def _started_producer(self) -> Producer:
        # Sends start side by side: the first creates the producer, all wait for its start. A
        # failed start is tried again by the next send (Spark reuses this worker for new tasks).
        started = self._producer_started
        if self._producer is None or started is None or _failed(started):
            self._producer = Producer(
                "pocketmq-spark-writer",
                namesrv=self.namesrv,
                tls=self.connection.tls,
                credentials=self._credentials,
            )
            self._producer_started = started = asyncio.ensure_future(self._producer.start())
        await started
        return self._producer


def _failed(future: asyncio.Future[None]) -> bool:
    return future.done() and (future.cancelled() or future.exception() is not None)
