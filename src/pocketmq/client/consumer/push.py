"""The asyncio push consumer (RocketMQ's `DefaultMQPushConsumer`).

The consumer pulls its queues with long polling and calls the listener with the messages.
Which queues are its own is the rebalance's answer (clustering: the group's members share the
topic's queues through an `AllocateStrategy`; broadcasting: every member reads every queue),
recomputed every 20 s and at once when the broker reports that members joined or left.

Per queue, one pull task (`pull_loop`, `push_feed`) fills a `ProcessQueue`; a queue holding
more than `pull_threshold_for_queue` messages or `pull_threshold_size_for_queue_bytes` is not
pulled until its listener catches up. Consumption runs concurrently (`concurrent`: a thread
pool for plain functions, the event loop for coroutine functions, at most
`consume_concurrency` at a time), or with `orderly=True` one call at a time per queue, in
order, under the broker's queue lock (`orderly`).

Offsets: the committed offset of a queue is its lowest unfinished message, so nothing is ever
skipped: a crash or a moved queue only causes redelivery (at least once). Offsets are written
every `persist_interval_s`, piggybacked on pulls, and at shutdown after the listener finished.

A queue that moves to another member is handed over (`queue_locks.hand_over`, `QueueHandoff`):
the old owner stops pulling, drops what it prefetched but did not start, lets the pulls it
started finish, commits, and unlocks the queue; the new owner reads where to start only once
it holds the lock. A join or a leave therefore redelivers at most what was still running when
the wait ran out, not the up to `pull_threshold_for_queue` messages a queue may hold.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pocketmq.client.consumer import assignment, membership
from pocketmq.client.consumer.concurrent import ConcurrentConsumption
from pocketmq.client.consumer.consumption import send_back
from pocketmq.client.consumer.listener import Listener, ListenerCalls
from pocketmq.client.consumer.offset_store import OffsetStore, offset_store_for
from pocketmq.client.consumer.orderly import OrderlyConsumption
from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.consumer.pull_loop import run_pull_loop
from pocketmq.client.consumer.push_feed import ProcessQueueFeed
from pocketmq.client.consumer.queue_locks import RELEASE_WAIT_S, QueueHandoff, hand_over
from pocketmq.client.consumer.rebalance import AllocateAveragely, AllocateStrategy
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import ClientConfigError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.client.trace_dispatch import CONSUME, ConsumeTracer, TraceSession
from pocketmq.common.consumer_modes import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.common.subscription import SubscriptionData, parse_subscription
from pocketmq.remoting.tls import TlsConfig
from pocketmq.runtime.event_loop import cancel_and_wait

if TYPE_CHECKING:
    pass

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
        tls: bool | ssl.SSLContext | TlsConfig | None = None,
        credentials: SessionCredentials | None = None,
        enable_msg_trace: bool = False,
        trace_topic: str | None = None,
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
            tls: TLS to the cluster (see `ClientInstance`); ignored with `instance`.
            credentials: The ACL account requests are signed with; ignored with `instance`.
            enable_msg_trace: Write trace records (SubBefore, SubAfter) around every listener
                call to the trace topic, as Java's `enableMsgTrace`.
            trace_topic: The trace topic (Java's `customizedTraceTopic`; default
                `RMQ_SYS_TRACE_TOPIC`).

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
        self.instance = instance or ClientInstance(
            namesrv or [], instance_name=instance_name, tls=tls, credentials=credentials
        )
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
        self._calls = ListenerCalls(group)
        self._offsets: OffsetStore | None = None
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._persist_task: asyncio.Task[None] | None = None
        self._rebalance_lock = asyncio.Lock()
        self._lock_renew_interval_s = lock_renew_interval_s
        self._handoff: QueueHandoff | None = None
        self._orderly: OrderlyConsumption | None = None
        self._concurrent: ConcurrentConsumption | None = None
        if orderly:
            self._orderly = OrderlyConsumption(
                self,
                locking=message_model is MessageModel.CLUSTERING,
                suspend_s=suspend_current_queue_s,
                lock_renew_interval_s=lock_renew_interval_s,
            )
        else:
            self._concurrent = ConcurrentConsumption(self)
        self._enable_msg_trace = enable_msg_trace
        self._trace_topic = trace_topic
        self._trace: TraceSession | None = None
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
        data = membership.user_subscription(topic, expression, expression_type)
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
        self._calls.register(listener)

    @property
    def listener_calls(self) -> ListenerCalls:
        return self._calls

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Joins the group and starts consuming.

        Raises:
            ClientConfigError: no listener or no subscription.
            RocketMQError: no NameServer answers.
        """
        if self._started:
            return
        if not self._calls.registered or not self._subscriptions:
            raise ClientConfigError("call subscribe() and register_listener() before start()")
        clustering = self.message_model is MessageModel.CLUSTERING
        if clustering:
            retry = membership.retry_subscription(self.group)
            self._subscriptions.setdefault(retry.topic, retry)
        await self.instance.start()
        self._offsets = offset_store_for(
            self.instance, self.group, self.message_model, self._offset_store_dir
        )
        self._calls.start(self._consume_thread_count)
        if self._enable_msg_trace:
            self._trace = await TraceSession.start(
                self.instance, self.group, CONSUME, self._trace_topic
            )
            self._calls.tracer = ConsumeTracer(
                self._trace.dispatcher, self.group, self.instance.clock
            )
        self._started = True
        if self._orderly is not None:
            self._orderly.start()
        elif clustering:
            self._handoff = QueueHandoff(
                self.instance,
                self.group,
                renew_interval_s=self._lock_renew_interval_s,
                clock=self.instance.clock,
            )
            self._handoff.start()
        await membership.join(self.instance, self)
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
        if self._concurrent is not None:
            await self._concurrent.stop(self._queues.values(), self.shutdown_timeout_s)
        await self._persist_all()
        if self._orderly is not None:
            await self._orderly.unlock(list(self._queues))
        if self._handoff is not None:
            await self._handoff.stop()
            await self._handoff.release(list(self._queues))
        # After the last listener call: its SubAfter goes too.
        trace, self._trace, self._calls.tracer = self._trace, None, None
        if trace is not None:
            await trace.close()
        await membership.leave(self.instance, self.group)  # the others rebalance at once
        if self._owns_instance:
            await self.instance.close()
        self._calls.shutdown()
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
        return membership.heartbeat_entry(
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
            wanted = await assignment.group_share(
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
        added, removed = assignment.diff(self._queues, wanted)
        await self._give_up(sorted(removed))
        if self._orderly is not None:
            self._orderly.forget_wanted(wanted)
            added = await self._orderly.take(added)
        elif self._handoff is not None:
            await self._handoff.take(added)  # the old owners committed: read where to start
        assert self._offsets is not None
        unstarted = await assignment.start_queues(
            self.instance,
            self._offsets,
            added,
            self.consume_from_where,
            self.consume_timestamp_ms,
            self._start_pulling,
        )
        if self._handoff is not None:
            await self._handoff.release(unstarted)  # not ours until a rebalance starts them
        assignment.log_assignment(
            self.group, self.instance.client_id, len(self._queues), len(added), len(removed)
        )

    def _start_pulling(self, queue: MessageQueue, offset: int) -> None:
        process_queue = ProcessQueue(offset)
        self._queues[queue] = process_queue
        if self._orderly is not None:
            self._orderly.begin(queue, process_queue)
        subscription = self._subscriptions.get(queue.topic) or parse_subscription(queue.topic, "*")
        assert self._offsets is not None
        feed = ProcessQueueFeed(
            queue,
            process_queue,
            subscription,
            self._offsets,
            self._deliver,
            count_max=self.pull_threshold_for_queue,
            bytes_max=self.pull_threshold_size_for_queue_bytes,
            commit_with_pull=self.message_model is MessageModel.CLUSTERING,
        )
        self._pull_tasks[queue] = asyncio.get_running_loop().create_task(
            run_pull_loop(self.instance, self.group, feed, batch_size=self.pull_batch_size),
            name=f"pull-{queue}",
        )

    async def _give_up(self, queues: list[MessageQueue]) -> None:
        """Hands queues over to their next owner (`queue_locks.hand_over`)."""
        if not queues:
            return
        assert self._offsets is not None
        await hand_over(
            {queue: self._queues.pop(queue) for queue in queues},
            self._offsets,
            stop_pulls=self._stop_pulls,
            finish_running=self._finish_running,
            unlock=self._unlock,
        )

    async def _stop_pulls(self, queues: list[MessageQueue]) -> None:
        for queue in queues:
            task = self._pull_tasks.pop(queue, None)
            if task is not None:
                await cancel_and_wait(task)

    async def _finish_running(self, process_queues: Mapping[MessageQueue, ProcessQueue]) -> None:
        if self._orderly is not None:
            for queue in process_queues:
                await self._orderly.release(queue)  # its running call ends first
        if self._concurrent is not None:
            await self._concurrent.release(process_queues.values(), RELEASE_WAIT_S)

    async def _unlock(self, queues: list[MessageQueue]) -> None:
        if self._orderly is not None:
            await self._orderly.unlock(queues)  # after the commit: the next owner resumes
        elif self._handoff is not None:
            await self._handoff.release(queues)

    # -- consuming -------------------------------------------------------------------------

    def _deliver(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        if self._orderly is not None:
            self._orderly.deliver(queue, messages)
        else:
            assert self._concurrent is not None
            self._concurrent.submit(queue, process_queue, messages)

    def finished(
        self, queue: MessageQueue, process_queue: ProcessQueue, messages: list[MessageExt]
    ) -> None:
        """Marks messages done and moves the queue's offset (unless the queue moved away)."""
        process_queue.finish(m.queue_offset for m in messages)
        if not process_queue.dropped:
            assert self._offsets is not None
            self._offsets.update(queue, process_queue.commit_offset())

    async def send_back(self, message: MessageExt, *, delay_level: int = 0) -> bool:
        """Hands a failed message back to its broker (CONSUMER_SEND_MSG_BACK).

        Args:
            message: The message.
            delay_level: 0 lets the broker pick a growing delay; -1 sends it straight to
                the dead-letter queue.

        Returns:
            Whether the broker took it.
        """
        return await send_back(
            self.instance,
            self.group,
            message,
            max_reconsume_times=self.max_reconsume_times,
            delay_level=delay_level,
        )

    # -- offsets ---------------------------------------------------------------------------

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """Reads the queues of `topic` it holds among `offsets` again from those offsets (a
        broker's RESET_CONSUMER_CLIENT_OFFSET): their pulls stop, messages not yet handed to
        the listener are dropped, running calls finish without moving the offset, and the
        new offsets are committed before the pulls start again."""
        if not self._started:
            return
        async with self._rebalance_lock:
            queues = sorted(q for q in self._queues if q.topic == topic and q in offsets)
            if not queues or self._offsets is None:
                return
            dropped = {queue: self._queues.pop(queue) for queue in queues}
            for process_queue in dropped.values():
                process_queue.dropped = True
            await self._stop_pulls(queues)
            await self._finish_running(dropped)
            for queue in queues:
                self._offsets.update(queue, offsets[queue], increase_only=False)
            await self._offsets.persist(queues)
            for queue in queues:
                self._start_pulling(queue, offsets[queue])
        log.info(
            "group %s reads %d queues of %s again from a reset", self.group, len(queues), topic
        )

    def offsets_of(self, topic: str) -> dict[MessageQueue, int]:
        """The offsets of `topic`'s queues this consumer reads (GET_CONSUMER_STATUS)."""
        if self._offsets is None:
            return {}
        return {
            queue: self._offsets.current(queue)
            for queue in sorted(self._queues)
            if queue.topic == topic and self._offsets.current(queue) >= 0
        }

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
