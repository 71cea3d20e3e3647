"""The broker's POP service: pops, acks and changes of invisible time over the checkpoint table,
each change stored in the revive log before it is answered, and the table rebuilt from that log
when a master starts.

Crash safety rests on three orders:
- a pop stores its checkpoint before it moves the group's offset and answers, so nothing handed
  out is unknown after a crash (and the offset is moved past every stored checkpoint again on
  recovery, so nothing acked is handed out a second time from the queue);
- an ack is answered only once its record is stored, and a message held for its ack is not
  revived meanwhile (and the other way round), so an acknowledged ack always wins over revive;
- a revive marks the message REVIVED only once its copy is stored, and the copy names its
  checkpoint, so recovery finds the copies made and does not make them twice.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from pocketmq.broker.offset_handlers import first_message_in_memory
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.pop.checkpoints import (
    ACK_TAG,
    CK_TAG,
    Checkpoint,
    CheckpointTable,
    Fate,
    Key,
    MessageRef,
    ack_record,
    parse_ack_record,
)
from pocketmq.broker.pop.order import OrderQueues
from pocketmq.broker.pull import MessageFilter
from pocketmq.broker.put_path import Put, PutPath, PutRefusal
from pocketmq.broker.topics import TopicTable
from pocketmq.common.constants import PERM_READ, PERM_WRITE, PROPERTY_TAGS
from pocketmq.common.properties import encode_properties
from pocketmq.common.receipt_handle import (
    ORDER_REVIVE_QID,
    RETRY_NONE,
    pop_retry_topic,
    retry_flag,
)
from pocketmq.common.stored_message import MessageDecodeError, StoredMessage, decode_record
from pocketmq.runtime.clock import Clock
from pocketmq.runtime.event_loop import cancel_and_wait
from pocketmq.store.api import MessageToStore, PutResult, PutStatus
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

PROPERTY_REVIVE_OF: Final = "POP_REVIVE_OF"
"""On a retry copy: the checkpoint message it revives (`flag queueId startOffset popTime
queueOffset`), so that recovery knows the copy was made."""
PROPERTY_FIRST_POP_TIME: Final = "1ST_POP_TIME"
REVIVE_TOPIC_PREFIX: Final = "rmq_sys_REVIVE_LOG_"
POP_RETRY_QUEUES: Final = 1
REPLAY_CHUNK: Final = 256
REVIVE_TICK_S: Final = 0.1
"""How often the revive loop looks for checkpoints whose invisible time ran out."""


@dataclass(frozen=True, slots=True)
class PopSettings:
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    revive_queue_num: int = 8
    """`reviveQueueNum`: queues of the revive log."""
    retry_topic_v2: bool = False
    """`enableRetryTopicV2`: pop retry topics named `%RETRY%<group>+<topic>`."""
    revive_retry_ms: int = 1_000
    """After a failed revive, the next try."""

    @property
    def revive_topic(self) -> str:
        return REVIVE_TOPIC_PREFIX + self.cluster_name


@dataclass(frozen=True, slots=True)
class Popped:
    """One message a pop hands out."""

    record: bytes
    read_topic: str
    queue_id: int
    queue_offset: int
    checkpoint: Checkpoint
    deliveries: int = 1
    """For an orderly pop: how often this offset was handed out, this time included."""


class PopFailure(Exception):
    """A write to the revive log stored nothing; `put` says why."""

    def __init__(self, result: PutResult) -> None:
        super().__init__(result.status.value)
        self.result = result


class PopService:
    """The in-flight messages of every group that pops from this broker."""

    def __init__(
        self,
        store: MessageStore,
        put_path: PutPath,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        clock: Clock,
        settings: PopSettings,
        topics_updated: Callable[[list[str]], Awaitable[None]],
    ) -> None:
        """`topics_updated` saves and registers the retry and revive topics made here, as
        RocketMQ's broker does before it puts into them."""
        self.store = store
        self.put_path = put_path
        self.topics = topics
        self.offsets = offsets
        self.clock = clock
        self.settings = settings
        self._topics_updated = topics_updated
        self.table = CheckpointTable()
        self.orders = OrderQueues(self.table)
        self._locks: dict[tuple[str, str, int], asyncio.Lock] = {}
        self._revive_counter = itertools.count()
        self.changed = asyncio.Event()
        """Set when a message may have become poppable (an ack of an orderly batch, a
        revive): long-polling pops look again."""
        self.running = False
        self._revive_task: asyncio.Task[None] | None = None

    # -- running on a master -------------------------------------------------------------

    async def start(self) -> None:
        """Rebuilds the table from the log and starts reviving (the broker became master)."""
        if self.running:
            return
        await self.ensure_revive_topic()
        self.recover()
        self.running = True
        self._revive_task = asyncio.create_task(self._revive_loop(), name="pop-revive")

    async def stop(self) -> None:
        """Stops reviving and forgets the table (the broker is no master any more)."""
        if not self.running:
            return
        self.running = False
        if self._revive_task is not None:
            await cancel_and_wait(self._revive_task)
            self._revive_task = None
        self.table.clear()
        self.orders.clear()

    async def _revive_loop(self) -> None:
        while True:
            try:
                for checkpoint in self.due(self.clock.now_ms()):
                    await self.revive(checkpoint)
            except Exception:
                log.exception("pop: a revive round failed; trying again")
            await asyncio.sleep(REVIVE_TICK_S)

    # -- topics -------------------------------------------------------------------------

    async def ensure_revive_topic(self) -> None:
        name = self.settings.revive_topic
        if self.topics.get(name) is None:
            self.topics.create_system_topic(
                name, self.settings.revive_queue_num, PERM_READ | PERM_WRITE, self.clock.now_ms()
            )
            await self._topics_updated([name])

    def retry_topic_of(self, group: str, topic: str) -> str:
        return pop_retry_topic(group, topic, v2=self.settings.retry_topic_v2)

    async def ensure_retry_topic(self, group: str, topic: str) -> str:
        name = self.retry_topic_of(group, topic)
        if self.topics.get(name) is None:
            self.topics.create_system_topic(
                name, POP_RETRY_QUEUES, PERM_READ | PERM_WRITE, self.clock.now_ms()
            )
            log.info("created pop retry topic %s", name)
            await self._topics_updated([name])
        return name

    # -- popping --------------------------------------------------------------------------

    def lock(self, group: str, topic: str, queue_id: int) -> asyncio.Lock:
        key = (group, topic, queue_id)
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def start_offset(self, group: str, topic: str, queue_id: int, init_max: bool) -> int:
        """Where the group reads the queue next: its committed offset, else the queue's
        first (ConsumeInitMode MIN) or last (MAX) offset, except that MAX also starts at 0
        while the queue's first message is in memory (RocketMQ's `initPopOffsetByCheckMsgInMem`);
        a retry topic always from its first."""
        committed = self.offsets.query(group, topic, queue_id)
        low = self.store.get_min_offset_in_queue(topic, queue_id)
        if committed is not None:
            return max(committed, low)
        if (
            init_max
            and retry_flag(topic) == RETRY_NONE
            and not first_message_in_memory(self.store, topic, queue_id)
        ):
            return self.store.get_max_offset_in_queue(topic, queue_id)
        return low

    async def pop_queue(
        self,
        group: str,
        topic: str,
        queue_id: int,
        max_nums: int,
        invisible_ms: int,
        selection: MessageFilter,
        *,
        pop_time: int,
        revive_qid: int,
        order: bool = False,
        init_max: bool = False,
        max_bytes: int = 256 * 1024,
    ) -> list[Popped]:
        """Pops up to `max_nums` messages of one queue (`topic` may be a pop retry topic).

        Every queue one request pops shares its `pop_time` and `revive_qid` (the client builds
        each handle from the response header's); `next_revive_qid()` picks the latter.

        Raises:
            PopFailure: the checkpoint was not stored; nothing was handed out.
        """
        async with self.lock(group, topic, queue_id):
            if order:
                if self.orders.blocked((group, topic, queue_id), self.clock.now_ms()):
                    return []
                queue_state = self.orders.get((group, topic, queue_id))
                offset = (
                    queue_state.committed
                    if queue_state is not None
                    else self.start_offset(group, topic, queue_id, init_max)
                )
            else:
                queue_state = None
                offset = self.start_offset(group, topic, queue_id, init_max)
            done = queue_state.done if queue_state is not None else set()
            result = self.store.get_message(
                topic,
                queue_id,
                offset,
                max_nums + len(done),
                max_bytes=max_bytes,
                tag_codes=selection.tag_codes,
                record_filter=selection.record_filter,
            )
            kept = [
                (record, queue_offset)
                for record, queue_offset in zip(result.buffers, result.queue_offsets, strict=True)
                if queue_offset not in done
            ][:max_nums]
            if not kept:
                if result.next_begin_offset > offset and not order:
                    # Only filtered-out messages: move on past them.
                    self.offsets.advance(group, topic, queue_id, result.next_begin_offset)
                return []
            next_offset = (
                kept[-1][1] + 1 if len(kept) < len(result.buffers) else result.next_begin_offset
            )
            checkpoint = Checkpoint(
                group=group,
                topic=topic,
                queue_id=queue_id,
                start_offset=kept[0][1],
                pop_time=pop_time,
                invisible_time=invisible_ms,
                revive_qid=ORDER_REVIVE_QID if order else revive_qid,
                offsets=[queue_offset for _, queue_offset in kept],
                next_offset=next_offset,
                order=order,
            )
            put = await self._write(self._log_queue(checkpoint), CK_TAG, checkpoint.record())
            if not put.stored:
                raise PopFailure(put.result)
            self._apply_checkpoint(checkpoint)
            state = self.orders.get((group, topic, queue_id)) if order else None
            deliveries = state.deliveries if state is not None else {}
            return [
                Popped(
                    record,
                    topic,
                    queue_id,
                    queue_offset,
                    checkpoint,
                    deliveries.get(queue_offset, 1),
                )
                for record, queue_offset in kept
            ]

    def next_revive_qid(self) -> int:
        return next(self._revive_counter) % self.settings.revive_queue_num

    def _log_queue(self, checkpoint: Checkpoint) -> int:
        """The revive-log queue that holds a checkpoint's records."""
        if checkpoint.revive_qid != ORDER_REVIVE_QID:
            return checkpoint.revive_qid % self.settings.revive_queue_num
        return checkpoint.queue_id % self.settings.revive_queue_num

    def _apply_checkpoint(self, checkpoint: Checkpoint) -> None:
        """A stored checkpoint, live or replayed: into the table, and the group's offset on."""
        if not self.table.apply_checkpoint(checkpoint):
            return
        if checkpoint.order:
            committed = self.offsets.query(checkpoint.group, checkpoint.topic, checkpoint.queue_id)
            self.orders.apply_checkpoint(
                checkpoint, checkpoint.start_offset if committed is None else committed
            )
            self._commit_order(checkpoint.group, checkpoint.topic, checkpoint.queue_id)
        elif checkpoint.takes_over is None:
            self.offsets.advance(
                checkpoint.group, checkpoint.topic, checkpoint.queue_id, checkpoint.next_offset
            )

    def _apply_acks(self, key: Key, queue_offsets: list[int]) -> None:
        """A stored ack record, live or replayed."""
        checkpoint = self.table.get(key)
        self.table.apply_acks(key, queue_offsets)
        if checkpoint is not None and checkpoint.order:
            self.orders.apply_acks(key, queue_offsets)
            self._commit_order(checkpoint.group, checkpoint.topic, checkpoint.queue_id)
            self.changed.set()

    def _commit_order(self, group: str, topic: str, queue_id: int) -> None:
        state = self.orders.get((group, topic, queue_id))
        if state is not None:
            self.offsets.advance(group, topic, queue_id, state.committed)

    # -- acks and changes of invisible time --------------------------------------------------

    async def ack(self, refs: list[MessageRef]) -> tuple[list[MessageRef], PutResult | None]:
        """Acks messages of one checkpoint; returns those not in flight (unknown, expired,
        revived) and, if the ack record stored nothing, why (then nothing was acked)."""
        if not refs:
            return [], None
        key = refs[0].key
        held: list[MessageRef] = []
        refused: list[MessageRef] = []
        for ref in refs:
            if self.table.fate(ref) is Fate.ACKED:
                continue  # acked before: an ack is idempotent
            checkpoint = self.table.hold(ref, Fate.ACKING)
            (held if checkpoint is not None else refused).append(ref)
        if not held:
            return refused, None
        checkpoint = self.table.get(key)
        assert checkpoint is not None
        offsets = [ref.queue_offset for ref in held]
        put = await self._write(self._log_queue(checkpoint), ACK_TAG, ack_record(key, offsets))
        if not put.stored:
            for ref in held:
                self.table.release(ref)
            return refused, put.result
        self._apply_acks(key, offsets)
        return refused, None if put.result.ok else put.result

    async def change_invisible(
        self, ref: MessageRef, invisible_ms: int
    ) -> Checkpoint | PutResult | None:
        """Moves one in-flight message to a new checkpoint that becomes visible
        `invisible_ms` from now; None when the message is not in flight."""
        old = self.table.get(ref.key)
        if old is None or self.table.fate(ref) is not Fate.INFLIGHT:
            return None
        now = self.clock.now_ms()
        if old.order:
            # An orderly batch keeps its place in the queue: its visibility moves instead.
            old.invisible_time = now + invisible_ms - old.pop_time
            put = await self._write(self._log_queue(old), CK_TAG, old.record())
            return old if put.stored else put.result
        pop_time = now
        while self.table.get((old.group, old.topic, old.queue_id, ref.queue_offset, pop_time)):
            pop_time += 1  # a checkpoint of that key exists: the handle must name this one
        if self.table.hold(ref, Fate.ACKING) is None:
            return None
        checkpoint = Checkpoint(
            group=old.group,
            topic=old.topic,
            queue_id=old.queue_id,
            start_offset=ref.queue_offset,
            pop_time=pop_time,
            invisible_time=invisible_ms,
            revive_qid=self.next_revive_qid(),
            offsets=[ref.queue_offset],
            next_offset=ref.queue_offset + 1,
            takes_over=ref,
        )
        put = await self._write(self._log_queue(checkpoint), CK_TAG, checkpoint.record())
        if not put.stored:
            self.table.release(ref)
            return put.result
        self._apply_checkpoint(checkpoint)
        return checkpoint

    # -- the revive log -------------------------------------------------------------------------

    async def _write(self, queue_id: int, tag: str, body: bytes) -> Put:
        message = MessageToStore(
            topic=self.settings.revive_topic,
            body=body,
            properties=encode_properties({PROPERTY_TAGS: tag}),
            queue_id=queue_id,
            born_timestamp=self.clock.now_ms(),
            born_host=self.store.store_host,
        )
        try:
            return await self.put_path.put([message])
        except PutRefusal as exc:  # not expected for a plain message; say so and store nothing
            return Put(PutResult(PutStatus.MESSAGE_ILLEGAL, remark=exc.remark), [message])

    def recover(self) -> None:
        """Rebuilds the table from the revive log and the retry copies (a master starting)."""
        self.table.clear()
        self.orders.clear()
        topic = self.settings.revive_topic
        records = 0
        for queue_id in range(self.settings.revive_queue_num):
            for message in self._read_all(topic, queue_id):
                records += 1
                self._replay(message)
        revived = 0
        for group, retry_topic in sorted({(c.group, self._copy_topic(c)) for c in self.table}):
            for message in self._read_all(retry_topic, 0):
                ref = _revived_ref(group, retry_topic, message)
                if ref is not None:
                    self.table.apply_revived(ref)
                    revived += 1
        if records:
            log.info(
                "pop: replayed %d revive-log records and %d retry copies; %d checkpoints in flight",
                records,
                revived,
                len(self.table),
            )

    def _replay(self, message: StoredMessage) -> None:
        tag = message.properties.get(PROPERTY_TAGS)
        try:
            if tag == CK_TAG:
                checkpoint = Checkpoint.from_record(message.body)
                existing = self.table.get(checkpoint.key)
                if existing is not None and checkpoint.order:
                    existing.invisible_time = checkpoint.invisible_time  # a visibility change
                    return
                self._apply_checkpoint(checkpoint)
            elif tag == ACK_TAG:
                key, offsets = parse_ack_record(message.body)
                self._apply_acks(key, offsets)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("pop: skipped a revive-log record at %d: %s", message.queue_offset, exc)

    def _read_all(self, topic: str, queue_id: int) -> list[StoredMessage]:
        messages: list[StoredMessage] = []
        offset = self.store.get_min_offset_in_queue(topic, queue_id)
        end = self.store.get_max_offset_in_queue(topic, queue_id)
        while offset < end:
            result = self.store.get_message(topic, queue_id, offset, REPLAY_CHUNK)
            if not result.buffers:
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
                continue
            for buffer in result.buffers:
                try:
                    messages.append(decode_record(buffer))
                except MessageDecodeError as exc:
                    log.warning("pop: skipped an unreadable record of %s: %s", topic, exc)
            offset = result.next_begin_offset
        return messages

    def _copy_topic(self, checkpoint: Checkpoint) -> str:
        """Where a checkpoint's messages are revived to."""
        if retry_flag(checkpoint.topic) != RETRY_NONE:
            return checkpoint.topic
        return self.retry_topic_of(checkpoint.group, checkpoint.topic)

    # -- revive -------------------------------------------------------------------------

    def due(self, now_ms: int) -> list[Checkpoint]:
        return [c for c in self.table if not c.order and c.revive_time <= now_ms and not c.done]

    async def revive(self, checkpoint: Checkpoint) -> int:
        """Copies a due checkpoint's in-flight messages to the retry topic; returns how many
        are still waiting (their copy failed)."""
        retry_topic = self._copy_topic(checkpoint)
        if self.topics.get(retry_topic) is None:
            original = checkpoint.topic
            await self.ensure_retry_topic(checkpoint.group, original)
        failed = 0
        for offset, fate in zip(checkpoint.offsets, checkpoint.fates, strict=True):
            if fate is not Fate.INFLIGHT:
                continue
            ref = checkpoint.ref(offset)
            if self.table.hold(ref, Fate.REVIVING) is None:
                continue
            copy = self._retry_copy(checkpoint, offset, retry_topic)
            if copy is None:
                # The message is gone (retention); nothing to give back.
                self.table.apply_revived(ref)
                continue
            put = await self.put_path.put([copy])
            if put.stored:
                self.table.apply_revived(ref)
            else:
                self.table.release(ref)
                failed += 1
                log.warning(
                    "pop: revive of %s/%d@%d for %s failed: %s",
                    checkpoint.topic,
                    checkpoint.queue_id,
                    offset,
                    checkpoint.group,
                    put.result.status.value,
                )
        if failed:
            checkpoint.invisible_time += self.settings.revive_retry_ms
        self.changed.set()
        return failed

    def _retry_copy(
        self, checkpoint: Checkpoint, queue_offset: int, retry_topic: str
    ) -> MessageToStore | None:
        result = self.store.get_message(checkpoint.topic, checkpoint.queue_id, queue_offset, 1)
        if not result.buffers or result.queue_offsets[0] != queue_offset:
            return None
        stored = decode_record(result.buffers[0])
        properties = dict(stored.properties)
        if stored.reconsume_times == 0 or PROPERTY_FIRST_POP_TIME not in properties:
            properties[PROPERTY_FIRST_POP_TIME] = str(checkpoint.pop_time)
        properties[PROPERTY_REVIVE_OF] = (
            f"{retry_flag(checkpoint.topic)} {checkpoint.queue_id} {checkpoint.start_offset} "
            f"{checkpoint.pop_time} {queue_offset}"
        )
        return MessageToStore(
            topic=retry_topic,
            body=stored.body,
            properties=encode_properties(properties),
            queue_id=0,
            flag=stored.flag,
            sys_flag=stored.sys_flag,
            born_timestamp=stored.born_timestamp,
            born_host=stored.born_host,
            reconsume_times=stored.reconsume_times + 1,
        )


def _revived_ref(group: str, retry_topic: str, message: StoredMessage) -> MessageRef | None:
    """The checkpoint message a retry copy revives, from its POP_REVIVE_OF property."""
    text = message.properties.get(PROPERTY_REVIVE_OF)
    if not text:
        return None
    try:
        flag, queue_id, start, pop_time, queue_offset = text.split(" ")
        topic = retry_topic if flag != RETRY_NONE else _original_topic(group, retry_topic)
        return MessageRef(
            (group, topic, int(queue_id), int(start), int(pop_time)), int(queue_offset)
        )
    except ValueError:
        return None


def _original_topic(group: str, retry_topic: str) -> str:
    prefix_len = len(pop_retry_topic(group, ""))
    return retry_topic[prefix_len:]
