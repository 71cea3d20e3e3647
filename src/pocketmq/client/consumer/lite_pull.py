"""The asyncio lite pull consumer (RocketMQ's `DefaultLitePullConsumer`).

The application asks for messages (`poll`) instead of registering a listener. Its queues come
either from the group's rebalance (`subscribe`: clustering members share a topic's queues
through an `AllocateStrategy`, broadcasting members read them all) or from the application
itself (`assign`: a fixed list, no rebalance). The two cannot be mixed on one consumer.

Per assigned queue, one pull task reads ahead with long polling and puts each batch into one
bounded buffer shared by the consumer; `poll` drains that buffer. A queue holding
`pull_threshold_for_queue` buffered messages, or paused (`pause`), is not pulled until `poll`
catches up or it is resumed; messages of a paused queue that were already buffered wait for
`resume` too.

Offsets: a queue's consumed offset is the one after the last message `poll` returned (or
where `seek` moved it). `commit` writes consumed offsets out: to the broker for clustering
consumers, to a local file for broadcasting ones. With `auto_commit`, that happens every
`auto_commit_interval_s`, when a rebalance takes a queue away, and at `close`; without it,
only `commit` does, so a message counts as consumed only once the application says so.

Invariants: after `seek`, and after a queue leaves the assignment, no message pulled for the
old position is ever returned (each buffered batch carries the queue state it was pulled for,
and a replaced state is marked dropped); messages of one queue are returned in queue order.

Not here: the blocking facade, message send-back (lite pull consumers have no listener that
could ask for redelivery) and queue locks for ordered consumption.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import ssl
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pocketmq.client.consumer import assignment, membership
from pocketmq.client.consumer.offset_store import OffsetStore, offset_store_for
from pocketmq.client.consumer.poll_buffer import PollBuffer, PollFeed, QueueState
from pocketmq.client.consumer.pull_loop import run_pull_loop
from pocketmq.client.consumer.rebalance import AllocateAveragely, AllocateStrategy
from pocketmq.client.credentials import SessionCredentials
from pocketmq.client.errors import ClientConfigError
from pocketmq.client.instance import ClientInstance
from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.client.queue_offsets import max_offset, min_offset
from pocketmq.client.route_cache import subscribe_queues
from pocketmq.common.consumer_modes import ConsumeFromWhere, ConsumeType, MessageModel
from pocketmq.common.subscription import SubscriptionData, parse_subscription
from pocketmq.remoting.tls import TlsConfig
from pocketmq.runtime.event_loop import cancel_and_wait

log = logging.getLogger(__name__)


class _Mode(enum.Enum):
    """How the consumer's queues are chosen (Java's `SubscriptionType`)."""

    NONE = "NONE"
    SUBSCRIBE = "SUBSCRIBE"
    ASSIGN = "ASSIGN"


class LitePullConsumer:
    """Consumes topics by polling; use `async with LitePullConsumer(...) as consumer:`.

    Example:
        consumer = LitePullConsumer("billing", namesrv="127.0.0.1:9876")
        consumer.subscribe("orders", "created || paid")
        async with consumer:
            while running:
                for message in await consumer.poll(timeout_s=1.0):
                    handle(message)
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
        pull_batch_size: int = 32,
        poll_batch_max: int = 32,
        pull_threshold_for_queue: int = 1000,
        auto_commit: bool = True,
        auto_commit_interval_s: float = 5.0,
        offset_store_dir: Path | None = None,
        tls: bool | ssl.SSLContext | TlsConfig | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        """Creates a consumer; `subscribe` or `assign`, then `start`.

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
            pull_batch_size: Messages per pull.
            poll_batch_max: Messages one `poll` returns at most.
            pull_threshold_for_queue: A queue with this many messages buffered is not pulled
                until `poll` takes some.
            auto_commit: Commit consumed offsets in the background, when a queue moves away
                and at `close`; when False, only `commit` writes offsets.
            auto_commit_interval_s: How often the background commit runs.
            offset_store_dir: Where broadcasting consumers keep offsets (default
                `~/.rocketmq_offsets`, as RocketMQ).
            tls: TLS to the cluster (see `ClientInstance`); ignored with `instance`.
            credentials: The ACL account requests are signed with; ignored with `instance`.

        Raises:
            ClientConfigError: no NameServer and no instance, a blank group, or a bad limit.
        """
        if instance is None and not namesrv:
            raise ClientConfigError("no NameServer: pass namesrv='127.0.0.1:9876'")
        if not group or not group.strip():
            raise ClientConfigError("the consumer group is blank")
        if not 1 <= pull_batch_size <= 1024:
            raise ClientConfigError("pull_batch_size must be in 1..1024")
        if min(poll_batch_max, pull_threshold_for_queue) < 1:
            raise ClientConfigError("poll_batch_max and pull_threshold_for_queue must be >= 1")
        if auto_commit_interval_s <= 0:
            raise ClientConfigError("auto_commit_interval_s must be > 0")
        self.group = group
        self._owns_instance = instance is None
        self.instance = instance or ClientInstance(
            namesrv or [], instance_name=instance_name, tls=tls, credentials=credentials
        )
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate_strategy = allocate_strategy or AllocateAveragely()
        self.pull_batch_size = pull_batch_size
        self.poll_batch_max = poll_batch_max
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.auto_commit = auto_commit
        self.auto_commit_interval_s = auto_commit_interval_s
        self._offset_store_dir = offset_store_dir or Path.home() / ".rocketmq_offsets"
        self._mode = _Mode.NONE
        self._subscriptions: dict[str, SubscriptionData] = {}
        self._manual_queues: set[MessageQueue] = set()
        self._offsets: OffsetStore | None = None
        self._queues: dict[MessageQueue, QueueState] = {}
        self._pull_tasks: dict[MessageQueue, asyncio.Task[None]] = {}
        self._buffer = PollBuffer(poll_batch_max)
        self._commit_task: asyncio.Task[None] | None = None
        self._assignment_lock = asyncio.Lock()
        self._started = False

    # -- setup -----------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        """Consumes `topic`'s messages that match `expression`, sharing queues with the group.

        Args:
            topic: The topic.
            expression: For TAG, `*` or tags joined by `||` (`a || b`); for SQL92, a condition
                on message properties, which brokers with `enablePropertyFilter=true` evaluate.
            expression_type: `TAG` or `SQL92`.

        Raises:
            ClientConfigError: the consumer was given queues with `assign`.
            SubscriptionError: the expression cannot be parsed.
        """
        if self._mode is _Mode.ASSIGN:
            raise ClientConfigError(
                "this consumer reads queues given to assign(): subscribe() and assign() "
                "cannot be mixed, use a second consumer"
            )
        data = membership.user_subscription(topic, expression, expression_type)
        self._mode = _Mode.SUBSCRIBE
        self._subscriptions[topic] = data
        if self.message_model is MessageModel.CLUSTERING:
            retry = membership.retry_subscription(self.group)
            self._subscriptions.setdefault(retry.topic, retry)
        if self._started:
            self.instance.request_rebalance()

    async def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Reads exactly `queues` from now on, without rebalancing (replaces earlier ones).

        Queues no longer in the list stop at once (their consumed offsets are committed when
        `auto_commit` is on); new ones start at their committed offset, or where
        `consume_from_where` says.

        Args:
            queues: The queues, e.g. from `fetch_queues`.

        Raises:
            ClientConfigError: the consumer subscribed with `subscribe`, or `queues` is empty.
        """
        if self._mode is _Mode.SUBSCRIBE:
            raise ClientConfigError(
                "this consumer subscribed with subscribe(): subscribe() and assign() "
                "cannot be mixed, use a second consumer"
            )
        if not queues:
            raise ClientConfigError("assign() needs at least one queue")
        self._mode = _Mode.ASSIGN
        self._manual_queues = set(queues)
        # Subscriptions of the assigned topics: routes are kept fresh for them and brokers
        # learn from heartbeats which topics the group reads.
        topics = {queue.topic for queue in self._manual_queues}
        self._subscriptions = {
            topic: self._subscriptions.get(topic) or parse_subscription(topic, "*")
            for topic in sorted(topics)
        }
        if self._started:
            await self.rebalance()
            # Brokers learn the group's topics now, not at the next heartbeat round.
            await self.instance.send_heartbeats()

    async def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic` (`fetchMessageQueues`), freshly asked for.

        Raises:
            ClientConfigError: the consumer is not started.
            TopicNotFoundError: no such topic.
            RocketMQError: no NameServer answers.
        """
        self._check_started()
        route = await self.instance.fetch_route(topic)
        return subscribe_queues(topic, route)

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        """Joins the group and starts pulling the queues of its subscriptions or assignment.

        Raises:
            RocketMQError: no NameServer answers.
        """
        if self._started:
            return
        await self.instance.start()
        self._offsets = offset_store_for(
            self.instance, self.group, self.message_model, self._offset_store_dir
        )
        self._started = True
        await membership.join(self.instance, self)
        await self.rebalance()
        if self.auto_commit:
            self._commit_task = asyncio.get_running_loop().create_task(
                self._commit_periodically(), name=f"commit-{self.group}"
            )
        log.info(
            "consumer %s (%s, lite pull) started on %s, topics %s",
            self.group,
            self.message_model.name,
            self.instance.client_id,
            sorted(self._subscriptions),
        )

    async def close(self) -> None:
        """Stops pulling, commits consumed offsets (with `auto_commit`), leaves the group.

        Messages buffered and not yet returned by `poll` are dropped; their queues continue
        from the last committed offset next time.
        """
        if not self._started:
            return
        self._started = False
        if self._commit_task is not None:
            await cancel_and_wait(self._commit_task)
            self._commit_task = None
        async with self._assignment_lock:
            for queue in list(self._pull_tasks):
                await cancel_and_wait(self._pull_tasks.pop(queue))
            for state in self._queues.values():
                state.dropped = True
            if self.auto_commit:
                await self._commit_consumed()
            self._queues.clear()
            self._buffer.clear()
        self._buffer.wake()
        await membership.leave(self.instance, self.group)  # the others rebalance at once
        if self._owns_instance:
            await self.instance.close()
        log.info("consumer %s closed", self.group)

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer reads now."""
        return sorted(self._queues)

    # -- polling ---------------------------------------------------------------------------

    async def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        """The next messages, at most `poll_batch_max`, from any of the consumer's queues.

        Waits up to `timeout_s` for the first message, then returns what is buffered without
        waiting more. Messages of one queue come in queue order; the queue's consumed offset
        moves past the last one returned.

        Args:
            timeout_s: How long to wait when nothing is buffered.

        Returns:
            The messages; empty when none arrived in time.

        Raises:
            ClientConfigError: the consumer is not started.
        """
        self._check_started()
        return await self._buffer.take(timeout_s, lambda: self._started)

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        """Stops returning and pulling messages of `queues` until `resume`.

        Messages of them already buffered are kept for after `resume`.
        """
        self._buffer.pause(queues)

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        """Returns and pulls messages of paused `queues` again."""
        self._buffer.resume(queues)

    # -- positions -------------------------------------------------------------------------

    async def seek(self, queue: MessageQueue, offset: int) -> None:
        """Makes the next messages of `queue` start at `offset`.

        Buffered messages of `queue` are dropped and its pull restarts there; its consumed
        offset becomes `offset` (what `commit` writes until `poll` returns more).

        Args:
            queue: An assigned queue.
            offset: From the queue's min offset to its max offset (the end).

        Raises:
            ClientConfigError: not started, `queue` not assigned, or `offset` out of range.
            RocketMQError: the broker cannot be asked for the queue's bounds.
        """
        self._check_started()
        lowest = await min_offset(self.instance, queue)
        highest = await max_offset(self.instance, queue)
        if not lowest <= offset <= highest:
            raise ClientConfigError(
                f"offset {offset} of {queue} is out of range: the queue holds {lowest}..{highest}"
            )
        await self._restart_at(queue, offset)

    async def seek_to_begin(self, queue: MessageQueue) -> None:
        """Makes the next messages of `queue` start at its oldest one.

        Raises:
            ClientConfigError: not started, or `queue` not assigned.
            RocketMQError: the broker cannot be asked for the queue's bounds.
        """
        self._check_started()
        await self._restart_at(queue, await min_offset(self.instance, queue))

    async def seek_to_end(self, queue: MessageQueue) -> None:
        """Makes the next messages of `queue` be the ones stored from now on.

        Raises:
            ClientConfigError: not started, or `queue` not assigned.
            RocketMQError: the broker cannot be asked for the queue's bounds.
        """
        self._check_started()
        await self._restart_at(queue, await max_offset(self.instance, queue))

    async def _restart_at(self, queue: MessageQueue, offset: int) -> None:
        async with self._assignment_lock:
            old = self._queues.get(queue)
            if old is None:
                raise ClientConfigError(
                    f"{queue} is not assigned to this consumer: seek one of {self.assignment}"
                )
            old.dropped = True
            task = self._pull_tasks.pop(queue, None)
            if task is not None:
                await cancel_and_wait(task)
            self._start_pulling(queue, offset)
        log.debug("%s of group %s seeks to %d", queue, self.group, offset)

    async def reset_offsets(self, topic: str, offsets: Mapping[MessageQueue, int]) -> None:
        """A broker's RESET_CONSUMER_CLIENT_OFFSET: the assigned queues of `topic` among
        `offsets` drop their buffered messages and are read again from those offsets, which
        are committed at once."""
        queues = sorted(q for q in self._queues if q.topic == topic and q in offsets)
        if not queues or self._offsets is None:
            return
        for queue in queues:
            with contextlib.suppress(ClientConfigError):  # unassigned meanwhile
                await self._restart_at(queue, offsets[queue])
                self._offsets.update(queue, offsets[queue], increase_only=False)
        await self._offsets.persist(queues)

    def offsets_of(self, topic: str) -> dict[MessageQueue, int]:
        """The consumed offsets of `topic`'s assigned queues (GET_CONSUMER_STATUS)."""
        return {
            queue: state.consumed_offset
            for queue, state in sorted(self._queues.items())
            if queue.topic == topic
        }

    # -- offsets ---------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Writes offsets out: to the broker (clustering) or the offset file (broadcasting).

        Failures are logged, not raised (the next commit writes the offset again);
        `committed` shows what the broker holds.

        Args:
            offsets: The next offset to consume per queue; by default every assigned queue's
                consumed offset (after the last message `poll` returned). Queues not assigned
                to this consumer are skipped with a warning: their owner commits them.

        Raises:
            ClientConfigError: not started, or a negative offset.
        """
        self._check_started()
        if offsets is None:
            await self._commit_consumed()
            return
        if any(offset < 0 for offset in offsets.values()):
            raise ClientConfigError(f"offsets to commit must be >= 0: {dict(offsets)}")
        assert self._offsets is not None
        queues = []
        for queue, offset in offsets.items():
            if queue not in self._queues:
                log.warning("%s is not assigned to consumer %s: not committed", queue, self.group)
                continue
            self._offsets.update(queue, offset, increase_only=False)
            queues.append(queue)
        await self._offsets.persist(queues)

    async def committed(self, queue: MessageQueue) -> int:
        """The group's committed offset of `queue` (-1 when there is none).

        Clustering consumers ask the broker; broadcasting ones read their offset file.

        Raises:
            ClientConfigError: the consumer is not started.
            RocketMQError: the broker cannot be asked.
        """
        self._check_started()
        assert self._offsets is not None
        return await self._offsets.read(queue, zero_if_not_found=False)

    async def _commit_consumed(self) -> None:
        if self._offsets is None:
            return
        states = list(self._queues.values())
        for state in states:
            # Not increase-only: after a seek backwards the consumed offset goes back too.
            self._offsets.update(state.queue, state.consumed_offset, increase_only=False)
        await self._offsets.persist([state.queue for state in states])

    async def _commit_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.auto_commit_interval_s)
            await self._commit_consumed()

    # -- the instance's view (ConsumerMember) ----------------------------------------------

    def topics(self) -> list[str]:
        return list(self._subscriptions)

    def heartbeat_entry(self) -> dict[str, Any]:
        return membership.heartbeat_entry(
            self.group,
            ConsumeType.CONSUME_ACTIVELY,
            self.message_model,
            self.consume_from_where,
            self._subscriptions.values(),
        )

    async def rebalance(self) -> None:
        """Recomputes this consumer's queues and starts or stops their pulls.

        With `assign`, the queues are the assigned ones (this retries those that could not
        start); with `subscribe`, the group's share of the subscribed topics.
        """
        if not self._started:
            return
        async with self._assignment_lock:
            if not self._started:
                return
            if self._mode is _Mode.ASSIGN:
                await self._apply_assignment(set(self._manual_queues))
                return
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
        """Stops removed queues and starts added ones; the caller holds the lock."""
        assert self._offsets is not None
        added, removed = assignment.diff(self._queues, wanted)
        for queue in removed:
            state = self._queues.pop(queue)
            state.dropped = True
            task = self._pull_tasks.pop(queue, None)
            if task is not None:
                await cancel_and_wait(task)
            if self.auto_commit:
                # Without auto-commit the application commits what it has processed; the
                # consumed offset may be ahead of that, and committing it could lose messages.
                self._offsets.update(queue, state.consumed_offset, increase_only=False)
                await self._offsets.persist([queue])
            if self.message_model is MessageModel.CLUSTERING:
                # The next owner commits it now. A local offset file is this client's own:
                # it keeps the queue's offset for when the queue comes back.
                self._offsets.forget(queue)
        await assignment.start_queues(
            self.instance,
            self._offsets,
            added,
            self.consume_from_where,
            self.consume_timestamp_ms,
            self._start_pulling,
        )
        assignment.log_assignment(
            self.group, self.instance.client_id, len(self._queues), len(added), len(removed)
        )

    def _start_pulling(self, queue: MessageQueue, offset: int) -> None:
        state = QueueState(queue, offset)
        self._queues[queue] = state
        feed = PollFeed(
            state,
            self._buffer,
            lambda: self._subscriptions.get(queue.topic) or parse_subscription(queue.topic, "*"),
            pull_threshold=self.pull_threshold_for_queue,
        )
        self._pull_tasks[queue] = asyncio.get_running_loop().create_task(
            run_pull_loop(
                self.instance,
                self.group,
                feed,
                batch_size=self.pull_batch_size,
                log_names_delay=True,
            ),
            name=f"lite-pull-{queue}",
        )

    # -- lifecycle checks ------------------------------------------------------------------

    def _check_started(self) -> None:
        if not self._started:
            raise ClientConfigError(f"consumer {self.group} is not started: call start() first")
