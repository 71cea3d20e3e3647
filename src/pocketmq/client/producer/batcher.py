"""The automatic batcher: single sends gathered into batch requests per topic (opt-in).

A message waits at most `linger_ms` for company; a topic's buffer is sent at once when it holds
`max_count` messages or `max_bytes` of bodies. With `linger_ms` 0 a buffer leaves at the next
turn of the event loop: no wait, and the sends of one turn still go as one batch. Each caller
still gets its own `SendResult` (or the batch's error). Messages a batch cannot carry (delayed
ones) never reach the batcher.

Invariant: every future handed out is resolved, by a flush or by `close`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from pocketmq.client.message import Message, SendResult

FlushBatch = Callable[[list[Message]], Awaitable[list[SendResult]]]


@dataclass(slots=True)
class _Buffer:
    messages: list[Message] = field(default_factory=list)
    futures: list[asyncio.Future[SendResult]] = field(default_factory=list)
    size_bytes: int = 0
    timer: asyncio.TimerHandle | None = None


class Batcher:
    """Gathers messages per topic and sends them through `flush_batch`."""

    def __init__(
        self, flush_batch: FlushBatch, *, linger_ms: float, max_bytes: int, max_count: int
    ) -> None:
        self._flush_batch = flush_batch
        self._linger_s = linger_ms / 1000
        self._max_bytes = max_bytes
        self._max_count = max_count
        self._buffers: dict[str, _Buffer] = {}
        self._flushes: set[asyncio.Task[None]] = set()

    def add(self, message: Message) -> asyncio.Future[SendResult]:
        """Queues `message`; the future resolves once its batch is answered."""
        loop = asyncio.get_running_loop()
        buffer = self._buffers.get(message.topic)
        if buffer is None:
            buffer = self._buffers[message.topic] = _Buffer()
        future: asyncio.Future[SendResult] = loop.create_future()
        buffer.messages.append(message)
        buffer.futures.append(future)
        buffer.size_bytes += len(message.body)
        if len(buffer.messages) >= self._max_count or buffer.size_bytes >= self._max_bytes:
            self._flush(message.topic)
        elif buffer.timer is None:
            buffer.timer = loop.call_later(self._linger_s, self._flush, message.topic)
        return future

    def _flush(self, topic: str) -> None:
        buffer = self._buffers.pop(topic, None)
        if buffer is None:
            return
        if buffer.timer is not None:
            buffer.timer.cancel()
        task = asyncio.get_running_loop().create_task(self._send(buffer))
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _send(self, buffer: _Buffer) -> None:
        try:
            results = await self._flush_batch(buffer.messages)
        except asyncio.CancelledError:
            for future in buffer.futures:
                future.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - a task boundary: each caller gets the error
            for future in buffer.futures:
                if not future.done():
                    future.set_exception(exc)
            return
        for future, result in zip(buffer.futures, results, strict=True):
            if not future.done():
                future.set_result(result)

    async def close(self) -> None:
        """Sends what is buffered and waits for every batch in flight."""
        for topic in list(self._buffers):
            self._flush(topic)
        if self._flushes:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*self._flushes, return_exceptions=True)
