"""Saving a running broker's metadata files: consumer offsets every
`flushConsumerOffsetInterval` (and at once for a commit that waits for its answer), delay
offsets along with them, topics whenever they change, and all of them at shutdown.

Files are written off the loop (`asyncio.to_thread`).
"""

from __future__ import annotations

import asyncio

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.delay_delivery import DelayDelivery
from pocketmq.broker.offsets import ConsumerOffsetTable
from pocketmq.broker.topics import TopicTable
from pocketmq.store.message_store import MessageStore


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
        self._offset_save_lock = asyncio.Lock()
        self._offset_saves_asked = 0
        self._offset_saves_done = 0
        self._topics_dirty = asyncio.Event()

    def topics_changed(self) -> None:
        """Asks the topics loop for a save."""
        self._topics_dirty.set()

    async def offsets_periodically(self) -> None:
        while True:
            await asyncio.sleep(self._config.flush_consumer_offset_interval_ms / 1000)
            await self._persist_offsets()

    async def topics_on_change(self) -> None:
        while True:
            await self._topics_dirty.wait()
            self._topics_dirty.clear()
            await self._persist_topics()

    async def save_offsets_now(self) -> None:
        """Saves the consumer offsets committed so far; callers waiting together share a save
        (one that starts after each caller's call)."""
        self._offset_saves_asked += 1
        asked = self._offset_saves_asked
        async with self._offset_save_lock:
            if self._offset_saves_done >= asked:
                return  # a save that started after this call has finished
            covers = self._offset_saves_asked
            await self._save_offsets()
            self._offset_saves_done = covers

    async def save_all(self) -> None:
        """The last save, once the loops and delayed delivery (which saves its own offsets
        when it stops) have stopped: topics, and every consumer offset."""
        await self._persist_topics()
        self._offsets.changed = True
        async with self._offset_save_lock:
            await self._save_offsets()

    async def _persist_offsets(self) -> None:
        async with self._offset_save_lock:
            await self._save_offsets()
        if self._delay_delivery is not None:
            await self._delay_delivery.persist()

    async def _save_offsets(self) -> None:
        if self._offsets.changed:
            document = self._offsets.snapshot()
            await asyncio.to_thread(self._store.metadata.consumer_offsets.save, document)

    async def _persist_topics(self) -> None:
        document = self._topics.snapshot()
        await asyncio.to_thread(self._store.metadata.topics.save, document)
