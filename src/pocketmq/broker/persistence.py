"""Saving a running broker's metadata files: consumer offsets every
`flushConsumerOffsetInterval` (and at once for a commit that waits for its answer), delay
offsets along with them, topics whenever they change (and a topic's creation or deletion at
once, in the journal of `topics.json`, answered once saved as RocketMQ's is), and all of them
at shutdown.

Files are written off the loop (`asyncio.to_thread`). Each save of the topics also checks that
their queues, once written, fit in the open files the process may hold.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.runtime.json_journal import JournaledJsonFile
from pocketmq.store.message_store import MessageStore

log = logging.getLogger(__name__)

FILES_PER_QUEUE: Final = 1
"""Open files a written queue holds: its mapped ConsumeQueue file's (more once it rolls)."""


class OpenFilesCheck:
    """Warns when the topics' queues, once written, would need more open files than the process
    may hold: the broker would then fail to create a queue file in the middle of a put. Once
    when they go over, not at every save after (again if they went under in between)."""

    def __init__(self) -> None:
        self._over = False
        self._queues: dict[str, int] = {}
        self._total = 0

    def check(self, topics: TopicTable, names: Iterable[str] | None = None) -> None:
        """Counts the queues again: of every topic, or (quicker) of the named ones that
        changed since the last count."""
        if names is None:
            self._queues = {n: max(c.read_queue_nums, c.write_queue_nums)
                            for n, c in topics.topics.items()}  # fmt: skip
            self._total = sum(self._queues.values())
        else:
            for name in names:
                config = topics.get(name)
                queues = (
                    0 if config is None else max(config.read_queue_nums, config.write_queue_nums)
                )
                self._total += queues - self._queues.pop(name, 0)
                if queues:
                    self._queues[name] = queues
        queues = self._total
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        over = limit != resource.RLIM_INFINITY and queues * FILES_PER_QUEUE > limit
        if over and not self._over:
            log.warning(
                "topics now have %d queues; written, they hold about %d open files, and this "
                "process may open %d: raise it (ulimit -n) before they fill",
                queues, queues * FILES_PER_QUEUE, limit,
            )  # fmt: skip
        self._over = over


class SharedSaves:
    """Saves for callers that each need one begun after their call; callers waiting together
    share one."""

    def __init__(self, save: Callable[[], Awaitable[None]]) -> None:
        self._save = save
        self._lock = asyncio.Lock()
        self._asked = 0
        self._done = 0

    async def save(self) -> None:
        self._asked += 1
        asked = self._asked
        async with self._lock:
            if self._done >= asked:
                return  # a save that started after this call has finished
            covers = self._asked
            await self._save()
            self._done = covers


class JournaledSaves:
    """The saves of one journaled metadata file (`topics.json`, `subscriptionGroup.json`): the
    entries a request changed, appended to the journal before its answer (callers waiting
    together share an append), and the whole table in the background once the journal has
    outgrown the file, or when the table changed otherwise (a slave's copy, a replicated log).
    """

    def __init__(
        self,
        file: JournaledJsonFile,
        snapshot: Callable[[], dict[str, Any]],
        changes: Callable[[list[str]], dict[str, Any]],
        before_save: Callable[[Iterable[str] | None], None] = lambda names: None,
    ) -> None:
        """
        Args:
            file: Where the table is saved.
            snapshot: The whole document, as it is now.
            changes: The named entries' part of it, None for one removed.
            before_save: Called just before each save with the changed names, or None for a
                whole save (the topics' open-files check).
        """
        self._file = file
        self._snapshot = snapshot
        self._changes = changes
        self._before_save = before_save
        self._unsaved: set[str] = set()
        self._file_lock = asyncio.Lock()
        """Held by an append and by a whole save: a save's document must hold every change
        appended before it."""
        self._appends = SharedSaves(self._append)
        self._wholes = SharedSaves(self._save_whole)
        self._dirty = asyncio.Event()

    def changed(self) -> None:
        """Asks `run` for a whole save."""
        self._dirty.set()

    async def run(self) -> None:
        """Saves the whole table whenever `changed` asks."""
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            try:
                await self._wholes.save()
            except OSError as exc:
                # The journal still holds every change; the next change asks again.
                log.error("could not save %s (%s); trying again at the next change",
                          self._file.path, exc)  # fmt: skip

    async def save_now(self, names: Iterable[str]) -> None:
        """Saves the named entries (created, changed or removed) as they are now, durably."""
        self._unsaved.update(names)
        await self._appends.save()

    async def save_whole(self) -> None:
        """Saves the whole table as it is now; callers waiting together share a save."""
        await self._wholes.save()

    async def _append(self) -> None:
        names, self._unsaved = self._unsaved, set()
        if not names:
            return
        try:
            async with self._file_lock:
                self._before_save(names)
                change = self._changes(sorted(names))
                await asyncio.to_thread(self._file.append, change)
        except BaseException:
            self._unsaved |= names  # for whoever waited on this append too
            self.changed()
            raise
        if self._file.wants_save:
            self.changed()

    async def _save_whole(self) -> None:
        async with self._file_lock:
            self._before_save(None)
            document = self._snapshot()
            await asyncio.to_thread(self._file.save, document)


class MetadataPersistence:
    """The save loops of one broker over its loaded store."""

    def __init__(
        self,
        store: MessageStore,
        topics: TopicTable,
        offsets: ConsumerOffsetTable,
        config: BrokerConfig,
        delay_delivery: DelayDelivery | None,
    ) -> None:
        """
        Args:
            store: Where the files are written (its `metadata`).
            topics: Saved after each `topics_changed`.
            offsets: Saved on the interval when changed.
            config: `flushConsumerOffsetInterval` is read again on every round (a live setting).
            delay_delivery: Its offsets are saved with the consumer offsets.
        """
        self._store = store
        self._topics = topics
        self._offsets = offsets
        self._config = config
        self._delay_delivery = delay_delivery
        self._offset_saves = SharedSaves(self._save_offsets)
        open_files = OpenFilesCheck()
        self._topic_saves = JournaledSaves(
            store.metadata.topics,
            topics.snapshot,
            topics.changes,
            # Here rather than in each caller: creations by a send count as much as an
            # `updateTopic`, and an append counts only the changed topics again.
            lambda names: open_files.check(topics, names),
        )

    def topics_changed(self) -> None:
        """Asks the topics loop for a whole save."""
        self._topic_saves.changed()

    async def offsets_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._config.flush_consumer_offset_interval_ms / 1000)
            await self._persist_offsets()

    async def topics_on_change(self) -> None:
        await self._topic_saves.run()

    async def save_offsets_now(self) -> None:
        """Saves the consumer offsets committed so far; callers waiting together share a save
        (one that starts after each caller's call)."""
        await self._offset_saves.save()

    async def save_topics_now(self, names: Iterable[str]) -> None:
        """Saves the named topics (created, changed or deleted) as they are now, durably, in
        the journal of `topics.json`; callers waiting together share an append."""
        await self._topic_saves.save_now(names)

    async def save_all(self) -> None:
        """The last save, once the loops and delayed delivery (which saves its own offsets
        when it stops) have stopped: topics, and every consumer offset."""
        await self._topic_saves.save_whole()
        self._offsets.changed = True
        await self._offset_saves.save()

    async def _persist_offsets(self) -> None:
        await self._offset_saves.save()
        if self._delay_delivery is not None:
            await self._delay_delivery.persist()

    async def _save_offsets(self) -> None:
        if self._offsets.changed:
            document = self._offsets.snapshot()
            await asyncio.to_thread(self._store.metadata.consumer_offsets.save, document)
