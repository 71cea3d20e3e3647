"""The blocking producer: `pocketmq.client.aio.Producer` for code without an event loop.

Every call blocks until the asyncio producer answers on the background loop. `send_async`
returns a `concurrent.futures.Future` and blocks only when `max_async_in_flight` sends are
already outstanding (backpressure instead of unbounded memory).
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable, Sequence
from typing import Any

from pocketmq.client.blocking.loop import BackgroundLoop, BlockingClient
from pocketmq.client.message import Message, MessageQueue, SendResult
from pocketmq.client.producer import producer as aio


class Producer(BlockingClient[aio.Producer]):
    """Sends messages; use `with Producer("group", namesrv="127.0.0.1:9876") as producer:`."""

    def __init__(
        self,
        group: str = aio.DEFAULT_PRODUCER_GROUP,
        *,
        loop: BackgroundLoop | None = None,
        max_async_in_flight: int = 10_000,
        **options: Any,
    ) -> None:
        """Creates a producer.

        Args:
            group: The producer group.
            loop: A background loop to share with other blocking clients.
            max_async_in_flight: `send_async` blocks while this many sends are outstanding.
            **options: The keyword arguments of `pocketmq.client.aio.Producer` (`namesrv`,
                `send_timeout_s`, `retry_times`, `auto_batch`, ...).
        """
        # The asyncio client first: when its options are refused, no loop thread is left behind.
        self.aio = self._make_aio(group, options)
        self._window = threading.BoundedSemaphore(max_async_in_flight)
        super().__init__(loop)

    def _make_aio(self, group: str, options: dict[str, Any]) -> aio.Producer:
        return aio.Producer(group, **options)

    @property
    def group(self) -> str:
        return self.aio.group

    def send(self, message: Message, *, queue: MessageQueue | None = None) -> SendResult:
        """Sends one message and waits for the answer (see `aio.Producer.send`)."""
        return self._background.call(self.aio.send(message, queue=queue))

    def send_async(
        self,
        message: Message,
        callback: Callable[[SendResult | None, BaseException | None], object] | None = None,
    ) -> concurrent.futures.Future[SendResult]:
        """Starts a send; the callback runs on the background loop thread (keep it short)."""
        self._window.acquire()
        future = self._background.submit(self._send_in_window(message))
        if callback is not None:
            future.add_done_callback(lambda f: _call_back(f, callback))
        return future

    async def _send_in_window(self, message: Message) -> SendResult:
        try:
            return await self.aio.send_async(message)
        finally:
            self._window.release()

    def send_oneway(self, message: Message) -> None:
        """Sends without waiting for an answer."""
        self._background.call(self.aio.send_oneway(message))

    def send_orderly(
        self,
        message: Message,
        sharding_key: object,
        *,
        selector: aio.QueueSelector = aio.select_by_hash,
    ) -> SendResult:
        """Sends to the queue of `sharding_key` (see `aio.Producer.send_orderly`)."""
        return self._background.call(
            self.aio.send_orderly(message, sharding_key, selector=selector)
        )

    def send_batch(
        self, messages: Sequence[Message], *, queue: MessageQueue | None = None
    ) -> SendResult:
        """Sends messages of one topic as one request."""
        return self._background.call(self.aio.send_batch(messages, queue=queue))

    def recall(self, topic: str, recall_handle: str) -> str:
        """Cancels a pending timer message by its handle (see `aio.Producer.recall`)."""
        return self._background.call(self.aio.recall(topic, recall_handle))

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of `topic`."""
        return self._background.call(self.aio.publish_queues(topic))


def _call_back(
    future: concurrent.futures.Future[SendResult],
    callback: Callable[[SendResult | None, BaseException | None], object],
) -> None:
    if future.cancelled():
        callback(None, concurrent.futures.CancelledError())
    elif future.exception() is not None:
        callback(None, future.exception())
    else:
        callback(future.result(), None)
