"""Every ConsumeQueue of a store, created on first use: `consumequeue/<topic>/<queueId>/`.

It is the dispatcher's queue target (`dispatch_many`), loads and recovers every queue at start, and
flushes them all on the flush thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from pocketmq.common.constants import TRANSACTION_TYPE_MASK
from pocketmq.runtime.filesystem import OS_FILE_SYSTEM, FileSystem
from pocketmq.store.consume_queue import ENTRY, ConsumeQueue
from pocketmq.store.dispatch import NOT_CONSUMABLE, DispatchRequest
from pocketmq.store.mapped_file import sync_new_files

log = logging.getLogger(__name__)


class ConsumeQueueTable:
    """Every ConsumeQueue, created on first use: `consumequeue/<topic>/<queueId>/`."""

    def __init__(self, directory: Path, file_size: int, *, fs: FileSystem = OS_FILE_SYSTEM) -> None:
        self.directory = directory
        self.fs = fs
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        # While set (re-dispatch after an unclean stop): the last queue offset rewritten per
        # queue. Entries written after the checkpoint may be torn or missing after a power
        # loss, so re-dispatch rewrites them instead of trusting what it finds.
        self._repaired: dict[tuple[str, int], int] | None = None

    def load(self) -> None:
        fs = self.fs
        fs.make_dirs(self.directory)
        for topic in fs.list_dir(self.directory):
            if not fs.is_dir(self.directory / topic):
                continue
            for queue_name in fs.list_dir(self.directory / topic):
                if not queue_name.isdigit():
                    log.warning(
                        "ignoring unexpected consume queue directory %s",
                        self.directory / topic / queue_name,
                    )
                    continue
                queue = self._create(topic, int(queue_name))
                queue.load()
                queue.recover()

    def distrust_loaded_files(self) -> None:
        """After an unclean stop: the next flush syncs every queue file's name and size too
        (`MappedFileQueue.distrust_loaded_files`)."""
        for queue in self.queues.values():
            queue.files.distrust_loaded_files()

    def _create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(
            self.directory / topic / str(queue_id),
            topic,
            queue_id,
            file_size=self.file_size,
            fs=self.fs,
        )
        self.queues[(topic, queue_id)] = queue
        return queue

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        return self.queues.get((topic, queue_id)) or self._create(topic, queue_id)

    def dispatch_many(self, requests: Sequence[DispatchRequest]) -> None:
        if self._repaired is not None:
            for request in requests:
                self.dispatch(request)
            return
        # Records of one queue at consecutive offsets (mostly a batch) are packed as they come
        # and written as one run; the fields are unpacked at once, not read by name.
        pack = ENTRY.pack
        packed: list[bytes] = []
        topic_now, queue_now, first, next_offset, end = "", -1, -1, -1, 0
        for topic, queue_id, offset, size, tags, _, queue_offset, _, _, sys_flag, _ in requests:
            if sys_flag & TRANSACTION_TYPE_MASK in NOT_CONSUMABLE:
                continue
            if queue_offset != next_offset or queue_id != queue_now or topic != topic_now:
                if packed:
                    self._put_run(topic_now, queue_now, first, packed, end)
                    packed = []
                topic_now, queue_now, first = topic, queue_id, queue_offset
            packed.append(pack(offset, size, tags))
            next_offset = queue_offset + 1
            end = offset + size
        if packed:
            self._put_run(topic_now, queue_now, first, packed, end)

    def _put_run(
        self, topic: str, queue_id: int, first: int, packed: list[bytes], end: int
    ) -> None:
        queue = self.queues.get((topic, queue_id)) or self._create(topic, queue_id)
        queue.put_run(first, packed, end)

    def dispatch(self, request: DispatchRequest) -> None:
        if request.goes_to_consume_queue:
            queue = self.queues.get((request.topic, request.queue_id))
            if queue is None:
                queue = self._create(request.topic, request.queue_id)
            repaired = self._repaired
            if repaired is None:  # the hot path
                queue.put(
                    request.queue_offset, request.commit_log_offset, request.size, request.tags_code
                )
                return
            queue.put(
                request.queue_offset,
                request.commit_log_offset,
                request.size,
                request.tags_code,
                overwrite=True,
            )
            repaired[(request.topic, request.queue_id)] = request.queue_offset

    def begin_repair(self) -> None:
        """Until `end_repair`, dispatched entries overwrite what their queue holds."""
        self._repaired = {}

    def end_repair(self) -> None:
        """Cuts every rewritten queue just after its last rewritten entry (what lies beyond
        came from records the CommitLog no longer holds, or is torn)."""
        repaired, self._repaired = self._repaired or {}, None
        for queue_key, last in repaired.items():
            self.queues[queue_key].truncate_entries(last + 1)

    def flush(self) -> None:
        """Flushes every queue. Blocking.

        The files created since the last flush, in all queues, are synced first, and their
        directories once each: a topic's directory once for all its new queues."""
        queues = list(self.queues.values())
        sync_new_files(self.fs, [new for queue in queues for new in queue.files.take_new_files()])
        for queue in queues:
            queue.flush()

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()
