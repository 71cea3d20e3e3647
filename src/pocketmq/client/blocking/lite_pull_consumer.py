"""The blocking lite pull consumer: `pocketmq.client.aio.LitePullConsumer` for code without an
event loop. `poll` blocks the calling thread up to its timeout."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pocketmq.client.blocking.loop import BackgroundLoop, BlockingClient
from pocketmq.client.consumer import lite_pull as aio
from pocketmq.client.message import MessageExt, MessageQueue


class LitePullConsumer(BlockingClient[aio.LitePullConsumer]):
    """Reads messages when asked; `with LitePullConsumer(...) as consumer: consumer.poll()`."""

    def __init__(self, group: str, *, loop: BackgroundLoop | None = None, **options: Any) -> None:
        """Creates a consumer.

        Args:
            group: The consumer group.
            loop: A background loop to share with other blocking clients.
            **options: The keyword arguments of `pocketmq.client.aio.LitePullConsumer`
                (`namesrv`, `message_model`, `auto_commit`, `poll_batch_max`, ...).
        """
        self.aio = aio.LitePullConsumer(group, **options)  # first: refused options leave no loop
        super().__init__(loop)

    @property
    def group(self) -> str:
        return self.aio.group

    @property
    def assignment(self) -> list[MessageQueue]:
        return self.aio.assignment

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        """Reads `topic`'s matching messages, sharing its queues with the group."""
        self.aio.subscribe(topic, expression, expression_type=expression_type)

    def assign(self, queues: Sequence[MessageQueue]) -> None:
        """Reads exactly `queues`, without rebalancing."""
        self._background.call(self.aio.assign(queues))

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic`."""
        return self._background.call(self.aio.fetch_queues(topic))

    def poll(self, timeout_s: float = 5.0) -> list[MessageExt]:
        """Up to `poll_batch_max` messages; [] when none came within `timeout_s`."""
        return self._background.call(self.aio.poll(timeout_s))

    def seek(self, queue: MessageQueue, offset: int) -> None:
        self._background.call(self.aio.seek(queue, offset))

    def seek_to_begin(self, queue: MessageQueue) -> None:
        self._background.call(self.aio.seek_to_begin(queue))

    def seek_to_end(self, queue: MessageQueue) -> None:
        self._background.call(self.aio.seek_to_end(queue))

    def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        """Commits what `poll` returned so far (or `offsets`)."""
        self._background.call(self.aio.commit(offsets))

    def committed(self, queue: MessageQueue) -> int:
        """The group's committed offset of `queue` (-1 when none)."""
        return self._background.call(self.aio.committed(queue))

    def pause(self, queues: Iterable[MessageQueue]) -> None:
        self._background.run(self.aio.pause, list(queues))

    def resume(self, queues: Iterable[MessageQueue]) -> None:
        self._background.run(self.aio.resume, list(queues))
