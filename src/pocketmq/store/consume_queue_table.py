"""Every ConsumeQueue of a store, created on first use: `consumequeue/<topic>/<queueId>/`.

It is the dispatcher's queue target (`dispatch`), loads and recovers every queue at start, and
flushes them all on the flush thread.
"""

from __future__ import annotations

import logging
from pathlib import Path

from pocketmq.store.consume_queue import ConsumeQueue
from pocketmq.store.dispatch import DispatchRequest

log = logging.getLogger(__name__)


class ConsumeQueueTable:
    """Every ConsumeQueue, created on first use: `consumequeue/<topic>/<queueId>/`."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.directory = directory
        self.file_size = file_size
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}

    def load(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(self.directory.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if not queue_dir.name.isdigit():
                    log.warning("ignoring unexpected consume queue directory %s", queue_dir)
                    continue
                queue = self._create(topic_dir.name, int(queue_dir.name))
                queue.load()
                queue.recover()

    def _create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = ConsumeQueue(
            self.directory / topic / str(queue_id), topic, queue_id, file_size=self.file_size
        )
        self.queues[(topic, queue_id)] = queue
        return queue

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.queues.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        return self.queues.get((topic, queue_id)) or self._create(topic, queue_id)

    def dispatch(self, request: DispatchRequest) -> None:
        if request.goes_to_consume_queue:
            queue = self.queues.get((request.topic, request.queue_id))
            if queue is None:
                queue = self._create(request.topic, request.queue_id)
            queue.put(
                request.queue_offset, request.commit_log_offset, request.size, request.tags_code
            )

    def flush(self) -> None:
        """Flushes every queue. Blocking."""
        for queue in list(self.queues.values()):
            queue.flush()

    def close(self) -> None:
        for queue in self.queues.values():
            queue.close()
