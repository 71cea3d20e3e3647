"""Concurrent consumption of pulled messages (RocketMQ's `ConsumeMessageConcurrentlyService`).

Each pull's messages go to the listener as soon as a slot is free (`consume_slots`): a plain
function gets the whole pull on one worker thread, called once per `consume_batch_max_size`
chunk; an `async def` listener gets one task per chunk. Finished messages move the queue's
committed offset (`ConsumingConsumer.finished`).

A listener that raises or returns RECONSUME_LATER gets the message again later: clustering
consumers hand it back to the broker (send-back, stored in `%RETRY%<group>` with a growing
delay); when the broker cannot take it back, it is consumed again locally after
`local_retry_delay_s`. Broadcasting consumers drop failed messages, as RocketMQ does.

The calls running per process queue are tracked, so that a queue given up (or a consumer
closing) can wait for them and mark the queue abandoned when they take too long.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable
from typing import Any

from pocketmq.client.consumer.consumption import ConsumingConsumer
from pocketmq.client.consumer.listener import ConsumeResult
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.consumer_modes import MessageModel

log = logging.getLogger(__name__)


class ConcurrentConsumption:
    """The listener calls of one concurrent push consumer, and the tasks that run them."""

    def __init__(self, consumer: ConsumingConsumer) -> None:
        self._consumer = consumer
        self._tasks: set[asyncio.Task[None]] = set()
        # Listener calls running now, per process queue: a queue given up waits for these.
        self._running: dict[ProcessQueue, set[asyncio.Task[Any]]] = {}

    def submit(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        """Hands one pull's messages to the listener."""
        if self._consumer.listener_calls.is_async:
            for chunk in self._chunks(messages):
                self._spawn(self._consume(queue, process_queue, chunk))
        else:
            # One thread hop for the whole pull: handing each message to the pool
            # separately cost more than most listeners (measured: 3x the drain rate).
            self._spawn(self._consume(queue, process_queue, messages))

    async def release(self, process_queues: Iterable[ProcessQueue], wait_s: float) -> None:
        """Waits up to `wait_s` for the running calls of queues given up; queues whose calls
        still run then are marked abandoned (their next owner redelivers those)."""
        process_queues = list(process_queues)
        running: set[asyncio.Task[Any]] = set()
        for process_queue in process_queues:
            running |= self._running.pop(process_queue, set())
        if not running:
            return
        _, pending = await asyncio.wait(running, timeout=wait_s)
        if pending:
            log.warning(
                "%d listener calls on queues given up still run after %g s: their "
                "messages will be redelivered by the next owner",
                len(pending),
                wait_s,
            )
            for process_queue in process_queues:
                process_queue.abandoned = True

    async def stop(self, process_queues: Iterable[ProcessQueue], timeout_s: float) -> None:
        """Lets running calls finish (up to `timeout_s`), then cancels what waits for a slot or
        a local retry (their queues are dropped)."""
        running = {task for tasks in self._running.values() for task in tasks}
        if running:
            _, pending = await asyncio.wait(running, timeout=timeout_s)
            if pending:
                log.warning(
                    "%d listener calls still running after %g s: their messages will be "
                    "redelivered",
                    len(pending),
                    timeout_s,
                )
                for process_queue in process_queues:
                    process_queue.abandoned = True
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout_s)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _chunks(self, messages: list[MessageExt]) -> list[list[MessageExt]]:
        size = self._consumer.consume_batch_max_size
        return [messages[i : i + size] for i in range(0, len(messages), size)]

    async def _consume(
        self,
        queue: MessageQueue,
        process_queue: ProcessQueue,
        messages: list[MessageExt],
    ) -> None:
        consumer = self._consumer
        chunks = self._chunks(messages)
        async with consumer.consume_slots:
            if process_queue.dropped:
                return  # the queue moved away before its turn: the next owner reads these
            running = self._running.setdefault(process_queue, set())
            task = asyncio.current_task()
            assert task is not None
            running.add(task)
            try:
                results = await consumer.listener_calls.call_all(chunks, process_queue)
            finally:
                running.discard(task)
        done = [
            m for c, r in zip(chunks, results, strict=True) if r is ConsumeResult.SUCCESS for m in c
        ]
        failed = [
            m
            for c, r in zip(chunks, results, strict=True)
            if r is ConsumeResult.RECONSUME_LATER
            for m in c
        ]
        if failed:
            kept = await self._hand_back(failed)
            done += [m for m in failed if m not in kept]
            if kept and not process_queue.dropped:
                self._retry_later(queue, process_queue, kept)
        if done:
            consumer.finished(queue, process_queue, done)

    def _retry_later(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        async def retry() -> None:
            await asyncio.sleep(self._consumer.local_retry_delay_s)
            if not process_queue.dropped:
                await self._consume(queue, process_queue, messages)

        self._spawn(retry())

    async def _hand_back(self, messages: list[MessageExt]) -> list[MessageExt]:
        """Hands failed messages back to the broker; returns those it did not take."""
        if self._consumer.message_model is MessageModel.BROADCASTING:
            for message in messages:
                log.warning("broadcast message %s failed and is dropped", message.msg_id)
            return []
        return [message for message in messages if not await self._consumer.send_back(message)]
