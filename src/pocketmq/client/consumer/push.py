"""The asyncio push consumer (RocketMQ's `DefaultMQPushConsumer`, concurrent mode).

The consumer pulls its queues with long polling and calls the listener with the messages.
Which queues are its own is the rebalance's answer (clustering: the group's members share the
topic's queues through an `AllocateStrategy`; broadcasting: every member reads every queue),
recomputed every 20 s and at once when the broker reports that members joined or left.

Per queue, one pull task fills a `ProcessQueue`; consumption runs concurrently (a thread pool
for plain functions, the event loop for coroutine functions, at most `consume_concurrency` at
a time). A queue holding more than `pull_threshold_for_queue` messages or
`pull_threshold_size_for_queue_bytes` is not pulled until its listener catches up.

Offsets: the committed offset of a queue is its lowest unfinished message, so nothing is ever
skipped: a crash or a moved queue only causes redelivery (at least once). Offsets are written
every `persist_interval_s`, piggybacked on pulls, and at shutdown after the listener finished.

A queue that moves to another member is handed over (`_give_up`, `queue_locks.QueueHandoff`):
the old owner stops pulling, drops what it prefetched but did not start, lets the pulls it
started finish, commits, and unlocks the queue; the new owner reads where to start only once
it holds the lock. A join or a leave therefore redelivers at most what was still running when
the wait ran out, not the up to `pull_threshold_for_queue` messages a queue may hold.

A listener that raises or returns `ConsumeResult.RECONSUME_LATER` gets the message again later:
clustering consumers hand it back to the broker (CONSUMER_SEND_MSG_BACK, which stores it in
`%RETRY%<group>` with a growing delay); when the broker cannot take it back, the message is
consumed again locally after `local_retry_delay_s`. Broadcasting consumers drop failed
messages, as RocketMQ does.

With `orderly=True` each queue is consumed one call at a time, in order, under the broker's
queue lock (`pocketmq.client.consumer.orderly`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pocketmq.client.consumer.listener import ConsumeResult, Listener
from pocketmq.client.consumer.membership import (
    FLOW_CONTROL_DELAY_S,
    PULL_DELAY_ON_ERROR_S,
    group_share,
    heartbeat_entry,
    join,
    log_assignment,
    log_offset_moved,
    offset_store_for,
    pull,
    retry_subscription,
    start_timestamp_ms,
    unregister,
    user_subscription,
)
from pocketmq.client.consumer.offset_store import (
    OffsetStore,
    starting_offset,
)
from pocketmq.client.consumer.orderly import OrderlyConsumption
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_request import (
    PullStatus,
)
from pocketmq.client.consumer.queue_locks import RELEASE_WAIT_S, QueueHandoff
from pocketmq.client.consumer.rebalance import (
    AllocateAveragely,
    AllocateStrategy,
)
from pocketmq.client.errors import ClientConfigError, RocketMQError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.common.codes import RequestCode, ResponseCode
from pocketmq.common.consumer_modes import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.common.subscription import (
    SubscriptionData,
    parse_subscription,
)
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)


class PushConsumer:
    """Consumes topics by calling a listener; use `async with PushConsumer(...) as consumer:`.

    Example:
        consumer = PushConsumer("billing", namesrv="127.0.0.1:9876")
        consumer.subscribe("orders", "created || paid")
        consumer.register_listener(handle)          # def handle(messages) -> None
        async with consumer:
            await stop_requested.wait()
    """

    def __init__(
        self,
        group: str,
        *,
        namesrv: str | Sequence[str] | None = None,
        instance: ClientInstance | None = None,
        instance_name: str | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateStrategy | None = None,
        consume_thread_count: int = 8,
        consume_concurrency: int = 64,
        consume_batch_max_size: int = 1,
        pull_batch_size: int = 32,
        pull_threshold_for_queue: int = 1000,
        pull_threshold_size_for_queue_bytes: int = 100 * 1024 * 1024,
        persist_interval_s: float = 5.0,
        max_reconsume_times: int = 16,
        local_retry_delay_s: float = 5.0,
        shutdown_timeout_s: float = 30.0,
        offset_store_dir: Path | None = None,
        orderly: bool = False,
        suspend_current_queue_s: float = 1.0,
        lock_renew_interval_s: float = 20.0,
    ) -> None:
        """Creates a consumer; `subscribe`, `register_listener`, then `start`.

        Args:
            group: The consumer group.
            namesrv: NameServer addresses (`host:port`, several separated by `;`).
            instance: A client instance to share (then `namesrv` is not needed).
            instance_name: Names this client in its client id (`ip@name`); distinct names
                let several clients of one group run in one process.
            message_model: CLUSTERING (share the queues) or BROADCASTING (read them all).
            consume_from_where: Where a queue without a committed offset starts.
            consume_timestamp_ms: The time CONSUME_FROM_TIMESTAMP starts at (default: 30
                minutes ago, as RocketMQ).
            allocate_strategy: How a group shares queues (default: averagely).
            consume_thread_count: Threads running a plain-function listener.
            consume_concurrency: Listener calls running at once (threads or coroutines).
            consume_batch_max_size: Messages per listener call.
            pull_batch_size: Messages per pull.
            pull_threshold_for_queue: A queue holding this many unfinished messages is not
                pulled until the listener catches up.
            pull_threshold_size_for_queue_bytes: The same limit in body bytes.
            persist_interval_s: How often offsets are committed.
            max_reconsume_times: Deliveries before the broker moves a failing message to
                the dead-letter queue `%DLQ%<group>`.
            local_retry_delay_s: When a failed message cannot be handed back to the broker,
                it is consumed again after this delay.
            shutdown_timeout_s: How long `close` waits for running listener calls.
            offset_store_dir: Where broadcasting consumers keep offsets (default
                `~/.rocketmq_offsets`, as RocketMQ).
            orderly: Consume each queue one call at a time in queue order, holding the
                queue's broker lock (clustering); see `pocketmq.client.consumer.orderly`.
            suspend_current_queue_s: How long an orderly queue waits after a failed call
                before the same messages are tried again.
            lock_renew_interval_s: How often an orderly consumer renews its queue locks.

        Raises:
            ClientConfigError: no NameServer and no instance, a blank group, or a bad limit.
        """
        if instance is None and not namesrv:
            raise ClientConfigError("no NameServer: pass namesrv='127.0.0.1:9876'")
        if not group or not group.strip():
            raise ClientConfigError("the consumer group is blank")
        if min(consume_thread_count, consume_concurrency, consume_batch_max_size) < 1:
            raise ClientConfigError("thread count, concurrency and batch sizes must be >= 1")
        if not 1 <= pull_batch_size <= 1024:
            raise ClientConfigError("pull_batch_size must be in 1..1024")
        self.group = group
        self._owns_instance = instance is None
        self.instance = instance or ClientInstance(namesrv or [], instance_name=instance_name)
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate_strategy = allocate_strategy or AllocateAveragely()
        self.consume_batch_max_size = consume_batch_max_size
        self.pull_batch_size = pull_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.pull_threshold_size_for_queue_bytes = pull_threshold_size_for_queue_bytes
        self.persist_interval_s = persist_interval_s
        self.max_reconsume_times = max_reconsume_times
        self.local_retry_delay_s = local_retry_delay_s
        self.shutdown_timeout_s = shutdown_timeout_s
        self._offset_store_dir = offset_store_dir or Path.home() / ".rocketmq_offsets"
        self._consume_thread_count = consume_thread_count
        self.consume_slots = asyncio.Semaphore(consume_concurrency)
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._listener: Listener | None = None
        self._listener_is_async = False
        self._executor: ThreadPoolExecutor | None = None
        self._offsets: OffsetStore | None = None
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._consume_tasks: set[asyncio.Task[None]] = set()
        self._persist_task: asyncio.Task[None] | None = None
        self._rebalance_lock = asyncio.Lock()
        # Listener calls running now, per process queue: a queue given up waits for these.
        self._running: dict[ProcessQueue, set[asyncio.Task[Any]]] = {}
        self._lock_renew_interval_s = lock_renew_interval_s
        self._handoff: QueueHandoff | None = None
        self._orderly = (
            OrderlyConsumption(
                self,
                locking=message_model is MessageModel.CLUSTERING,
                suspend_s=suspend_current_queue_s,
                lock_renew_interval_s=lock_renew_interval_s,
            )
            if orderly
            else None
        )
        self._started = False

    # -- setup -----------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        """Consumes `topic`'s messages that match `expression`.

        Args:
            topic: The topic.
            expression: For TAG, `*` or tags joined by `||` (`a || b`); for SQL92, a condition
                on message properties (`region = 'eu' AND amount > 100`), which brokers with
                `enablePropertyFilter=true` evaluate.
            expression_type: `TAG` or `SQL92`.

        Raises:
            SubscriptionError: the expression cannot be parsed.
        """
        data = user_subscription(topic, expression, expression_type)
        self._subscriptions[topic] = data
        if self._started:
            self.instance.request_rebalance()

    def unsubscribe(self, topic: str) -> None:
        """Stops consuming `topic` (at the next rebalance)."""
        self._subscriptions.pop(topic, None)
        if self._started:
            self.instance.request_rebalance()

    def register_listener(self, listener: Listener) -> None:
        """Sets the function called with messages (plain or `async def`)."""
        self._listener = listener
        # An object whose __call__ is `async def` is an async listener too.
        function = listener if inspect.isroutine(listener) else type(listener).__call__
        self._listener_is_async = inspect.iscoroutinefunction(function)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Joins the group and starts consuming.

        Raises:
            ClientConfigError: no listener or no subscription.
            RocketMQError: no NameServer answers.
        """
        if self._started:
            return
        if self._listener is None or not self._subscriptions:
            raise ClientConfigError("call subscribe() and register_listener() before start()")
        clustering = self.message_model is MessageModel.CLUSTERING
        if clustering:
            retry = retry_subscription(self.group)
            self._subscriptions.setdefault(retry.topic, retry)
        await self.instance.start()
        self._offsets = offset_store_for(
            self.instance, self.group, self.message_model, self._offset_store_dir
        )
        if not self._listener_is_async:
            self._executor = ThreadPoolExecutor(
                self._consume_thread_count, thread_name_prefix=f"consume-{self.group}"
            )
        self._started = True
        if self._orderly is not None:
            self._orderly.start()
        elif clustering:
            self._handoff = QueueHandoff(
                self.instance, self.group, renew_interval_s=self._lock_renew_interval_s
            )
            self._handoff.start()
        await join(self.instance, self)
        await self.rebalance()
        self._persist_task = asyncio.get_running_loop().create_task(
            self._persist_periodically(), name=f"persist-{self.group}"
        )
        log.info(
            "consumer %s (%s) started on %s, topics %s",
            self.group,
            self.message_model.name,
            self.instance.client_id,
            sorted(self._subscriptions),
        )

    async def close(self) -> None:
        """Stops pulling, lets running listener calls finish, commits offsets, leaves.

        Messages pulled but not handed to the listener yet are dropped, not consumed: the
        committed offset stays below them, so whoever reads the queue next gets them.
        """
        if not self._started:
            return
        self._started = False
        if self._persist_task is not None:
            await cancel_and_wait(self._persist_task)
        for process_queue in self._queues.values():
            process_queue.dropped = True
        for task in list(self._pull_tasks.values()):
            await cancel_and_wait(task)
        self._pull_tasks.clear()
        if self._orderly is not None:
            await self._orderly.stop()
        running = {task for tasks in self._running.values() for task in tasks}
        if running:
            _, pending = await asyncio.wait(running, timeout=self.shutdown_timeout_s)
            if pending:
                log.warning(
                    "%d listener calls still running after %g s: their messages will be "
                    "redelivered",
                    len(pending),
                    self.shutdown_timeout_s,
                )
                for process_queue in self._queues.values():
                    process_queue.abandoned = True
        for task in list(self._consume_tasks):
            task.cancel()  # waiting for a slot or a local retry: their queues are dropped
        if self._consume_tasks:
            await asyncio.wait(set(self._consume_tasks), timeout=self.shutdown_timeout_s)
        await self._persist_all()
        if self._orderly is not None:
            await self._orderly.unlock(list(self._queues))
        if self._handoff is not None:
            await self._handoff.stop()
            await self._handoff.release(list(self._queues))
        await unregister(self.instance, self.group)  # the other members rebalance at once
        self.instance.remove_consumer(self.group)
        if self._owns_instance:
            await self.instance.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
        log.info("consumer %s closed", self.group)

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this consumer reads now."""
        return sorted(self._queues)

    # -- the instance's view (ConsumerMember) ----------------------------------------------

    def topics(self) -> list[str]:
        return list(self._subscriptions)

    def heartbeat_entry(self) -> dict[str, Any]:
        return heartbeat_entry(
            self.group,
            ConsumeType.CONSUME_PASSIVELY,
            self.message_model,
            self.consume_from_where,
            self._subscriptions.values(),
        )

    async def rebalance(self) -> None:
        """Recomputes this consumer's queues and starts or stops their pulls."""
        if not self._started:
            return
        async with self._rebalance_lock:
            wanted = await group_share(
                self.instance,
                self.group,
                self.allocate_strategy,
                self.message_model,
                list(self._subscriptions),
                self._queues,
            )
            await self._apply_assignment(wanted)

    # -- assignment ------------------------------------------------------------------------

    async def _apply_assignment(self, wanted: set[MessageQueue]) -> None:
        removed = sorted(q for q in self._queues if q not in wanted)
        added = sorted(q for q in wanted if q not in self._queues)
        await self._give_up(removed)
        if self._orderly is not None:
            self._orderly.forget_wanted(wanted)
            added = await self._orderly.take(added)
        elif self._handoff is not None:
            await self._handoff.take(added)  # the old owners committed: read where to start
        unstarted: list[MessageQueue] = []
        for queue in added:
            assert self._offsets is not None
            try:
                offset = await starting_offset(
                    self.instance,
                    self._offsets,
                    queue,
                    self.consume_from_where,
                    start_timestamp_ms(self.consume_timestamp_ms),
                )
            except RocketMQError as exc:
                log.warning("cannot find where to start %s: %s; next rebalance retries", queue, exc)
                unstarted.append(queue)
                continue
            process_queue = ProcessQueue(offset)
            self._queues[queue] = process_queue
            if self._orderly is not None:
                self._orderly.begin(queue, process_queue)
            self._pull_tasks[queue] = asyncio.get_running_loop().create_task(
                self._pull_loop(queue, process_queue), name=f"pull-{queue}"
            )
        if self._handoff is not None:
            await self._handoff.release(unstarted)  # not ours until a rebalance starts them
        log_assignment(
            self.group, self.instance.client_id, len(self._queues), len(added), len(removed)
        )

    async def _give_up(self, queues: list[MessageQueue]) -> None:
        """Hands queues over to their next owner (`removeUnnecessaryMessageQueue`).

        In this order: mark them dropped (messages pulled and not yet handed to the listener
        are abandoned, as RocketMQ's `ConsumeRequest` does, and no later result moves their
        offsets), stop their pulls, wait a moment for their running listener calls, commit
        each queue's lowest unfinished offset and wait for the broker's answer, and only then
        unlock: the next owner reads its start offset once it holds the lock, so it starts
        exactly where this consumer stopped and redelivers at most what was still running.
        """
        if not queues:
            return
        process_queues = {queue: self._queues.pop(queue) for queue in queues}
        for process_queue in process_queues.values():
            process_queue.dropped = True
        for queue in queues:
            task = self._pull_tasks.pop(queue, None)
            if task is not None:
                await cancel_and_wait(task)
        if self._orderly is not None:
            for queue in queues:
                await self._orderly.release(queue)  # its running call ends first
        running = set()
        for process_queue in process_queues.values():
            running |= self._running.pop(process_queue, set())
        if running:
            _, pending = await asyncio.wait(running, timeout=RELEASE_WAIT_S)
            if pending:
                log.warning(
                    "%d listener calls on queues given up still run after %g s: their "
                    "messages will be redelivered by the next owner",
                    len(pending),
                    RELEASE_WAIT_S,
                )
                for process_queue in process_queues.values():
                    process_queue.abandoned = True
        assert self._offsets is not None
        for queue, process_queue in process_queues.items():
            self._offsets.update(queue, process_queue.commit_offset())
        await self._offsets.persist(queues)
        for queue in queues:
            self._offsets.forget(queue)
        if self._orderly is not None:
            await self._orderly.unlock(queues)  # after the commit: the next owner resumes
        elif self._handoff is not None:
            await self._handoff.release(queues)

    # -- pulling ---------------------------------------------------------------------------

    async def _pull_loop(self, queue: MessageQueue, process_queue: ProcessQueue) -> None:
        subscription = self._subscriptions.get(queue.topic) or parse_subscription(queue.topic, "*")
        while not process_queue.dropped:
            if (
                process_queue.held_count >= self.pull_threshold_for_queue
                or process_queue.held_bytes >= self.pull_threshold_size_for_queue_bytes
            ):
                await asyncio.sleep(FLOW_CONTROL_DELAY_S)
                continue
            try:
                await self._pull_once(queue, process_queue, subscription)
            except asyncio.CancelledError:
                raise
            except RocketMQError as exc:
                log.warning(
                    "pull of %s failed: %s; retrying in %g s", queue, exc, PULL_DELAY_ON_ERROR_S
                )
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)
                with contextlib.suppress(RocketMQError):
                    await self.instance.fetch_route(queue.topic)
            except Exception:  # a task boundary: log, keep the queue alive
                log.exception("pull of %s failed unexpectedly; retrying", queue)
                await asyncio.sleep(PULL_DELAY_ON_ERROR_S)

    async def _pull_once(
        self, queue: MessageQueue, process_queue: ProcessQueue, subscription: SubscriptionData
    ) -> None:
        offset = process_queue.next_offset
        assert self._offsets is not None
        commit = (
            self._offsets.current(queue) if self.message_model is MessageModel.CLUSTERING else 0
        )
        result = await pull(
            self.instance,
            self.group,
            queue,
            offset,
            subscription,
            max_nums=self.pull_batch_size,
            commit_offset=commit,
        )
        if process_queue.dropped:
            return
        if result.status is PullStatus.FOUND:
            process_queue.add(result.messages, result.next_begin_offset)
            if not result.messages:
                self._offsets.update(queue, process_queue.commit_offset())
            if self._orderly is not None:
                self._orderly.deliver(queue, result.messages)
                return
            if self._listener_is_async:
                for chunk in self._chunks(result.messages):
                    self._submit(queue, process_queue, chunk)
            else:
                # One thread hop for the whole pull: handing each message to the pool
                # separately cost more than most listeners (measured: 3x the drain rate).
                self._submit(queue, process_queue, result.messages)
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log_offset_moved(queue, offset, result)
            process_queue.reset(result.next_begin_offset)
            self._offsets.update(queue, result.next_begin_offset, increase_only=False)
            await self._offsets.persist([queue])
        else:
            process_queue.next_offset = result.next_begin_offset
            if process_queue.held_count == 0:
                self._offsets.update(queue, process_queue.commit_offset())

    # -- consuming -------------------------------------------------------------------------

    def _submit(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._consume(queue, process_queue, messages))
        self._consume_tasks.add(task)
        task.add_done_callback(self._consume_tasks.discard)

    def _chunks(self, messages: list[MessageExt]) -> list[list[MessageExt]]:
        size = self.consume_batch_max_size
        return [messages[i : i + size] for i in range(0, len(messages), size)]

    async def _consume(
        self,
        queue: MessageQueue,
        process_queue: ProcessQueue,
        messages: list[MessageExt],
    ) -> None:
        chunks = self._chunks(messages)
        async with self.consume_slots:
            if process_queue.dropped:
                return  # the queue moved away before its turn: the next owner reads these
            running = self._running.setdefault(process_queue, set())
            task = asyncio.current_task()
            assert task is not None
            running.add(task)
            try:
                results = await self._call_all(chunks, process_queue)
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
            self.finished(queue, process_queue, done)

    def _retry_later(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        async def retry() -> None:
            await asyncio.sleep(self.local_retry_delay_s)
            if not process_queue.dropped:
                await self._consume(queue, process_queue, messages)

        task = asyncio.get_running_loop().create_task(retry())
        self._consume_tasks.add(task)
        task.add_done_callback(self._consume_tasks.discard)

    def finished(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        """Marks messages done and moves the queue's offset (unless the queue moved away)."""
        process_queue.finish(m.queue_offset for m in messages)
        if not process_queue.dropped:
            assert self._offsets is not None
            self._offsets.update(queue, process_queue.commit_offset())

    async def call_listener(self, messages: list[MessageExt]) -> ConsumeResult:
        """Calls the listener with `messages`; any failure means RECONSUME_LATER."""
        result = (await self._call_all([messages]))[0]
        assert result is not None
        return result

    async def _call_all(
        self, chunks: list[list[MessageExt]], process_queue: ProcessQueue | None = None
    ) -> list[ConsumeResult | None]:
        """One result per chunk; None for a chunk skipped because its queue was abandoned."""
        if self._listener_is_async:
            return [await self._call_async(chunk) for chunk in chunks]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call_sync, chunks, process_queue)

    async def _call_async(self, messages: list[MessageExt]) -> ConsumeResult:
        listener = self._listener
        assert listener is not None
        try:
            outcome = await listener(messages)  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a listener failure means "later", never a crash
            self._log_failure(messages)
            return ConsumeResult.RECONSUME_LATER
        return _result_of(outcome)

    def _call_sync(
        self, chunks: list[list[MessageExt]], process_queue: ProcessQueue | None
    ) -> list[ConsumeResult | None]:
        """Runs on a worker thread: one listener call per chunk, in order.

        A pull's chunks go on when their queue is dropped meanwhile: the batch was started,
        and finishing it (the drop waits for it) leaves no gap below the chunks already done
        that the next owner would read again. Only a queue abandoned after that wait stops
        here (reading the flag from this thread is safe: it only ever turns True).
        """
        listener = self._listener
        assert listener is not None
        results: list[ConsumeResult | None] = []
        for chunk in chunks:
            if process_queue is not None and process_queue.abandoned:
                results.append(None)
                continue
            try:
                results.append(_result_of(listener(chunk)))
            except Exception:  # noqa: BLE001 - a listener failure means "later", never a crash
                self._log_failure(chunk)
                results.append(ConsumeResult.RECONSUME_LATER)
        return results

    def _log_failure(self, messages: list[MessageExt]) -> None:
        log.warning(
            "listener of %s failed on %d messages (first %s at %s offset %d): redelivering",
            self.group,
            len(messages),
            messages[0].msg_id,
            messages[0].queue,
            messages[0].queue_offset,
            exc_info=True,
        )

    async def _hand_back(self, messages: list[MessageExt]) -> list[MessageExt]:
        """Hands failed messages back to the broker; returns those it did not take."""
        if self.message_model is MessageModel.BROADCASTING:
            for message in messages:
                log.warning("broadcast message %s failed and is dropped", message.msg_id)
            return []
        return [message for message in messages if not await self.send_back(message)]

    async def send_back(self, message: MessageExt, *, delay_level: int = 0) -> bool:
        """Hands a failed message back to its broker (CONSUMER_SEND_MSG_BACK).

        Args:
            message: The message.
            delay_level: 0 lets the broker pick a growing delay; -1 sends it straight to
                the dead-letter queue.

        Returns:
            Whether the broker took it.
        """
        address = self.instance.routes.master_address(message.queue.broker_name)
        if address is None:
            return False
        header = {
            "offset": str(message.commit_log_offset),
            "group": self.group,
            "delayLevel": str(delay_level),
            "originMsgId": message.msg_id,
            "originTopic": message.topic,
            "unitMode": "false",
            "maxReconsumeTimes": str(self.max_reconsume_times),
        }
        try:
            response = await self.instance.invoke(
                address, RequestCode.CONSUMER_SEND_MSG_BACK, header
            )
        except RocketMQError as exc:
            log.debug("send-back of %s failed: %s", message.msg_id, exc)
            return False
        if response.code != ResponseCode.SUCCESS:
            log.debug("broker refused send-back of %s: %s", message.msg_id, response.remark)
            return False
        return True

    # -- offsets ---------------------------------------------------------------------------

    async def _persist_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.persist_interval_s)
            await self._persist_all()

    async def _persist_all(self) -> None:
        if self._offsets is None:
            return
        for queue, process_queue in self._queues.items():
            self._offsets.update(queue, process_queue.commit_offset())
        await self._offsets.persist(list(self._queues))


def _result_of(outcome: object) -> ConsumeResult:
    if outcome is None or outcome is ConsumeResult.SUCCESS:
        return ConsumeResult.SUCCESS
    return ConsumeResult.RECONSUME_LATER
