"""The blocking push consumer: `pocketmq.client.aio.PushConsumer` for code without an event
loop. The listener is a plain function, called on the consumer's worker threads."""

from __future__ import annotations

from typing import Any

from pocketmq.client.blocking.loop import BackgroundLoop, BlockingClient
from pocketmq.client.consumer import push as aio
from pocketmq.client.consumer.listener import Listener
from pocketmq.client.message import MessageQueue


class PushConsumer(BlockingClient[aio.PushConsumer]):
    """Consumes topics by calling a listener; `with PushConsumer(...) as consumer:`."""

    def __init__(self, group: str, *, loop: BackgroundLoop | None = None, **options: Any) -> None:
        """Creates a consumer.

        Args:
            group: The consumer group.
            loop: A background loop to share with other blocking clients.
            **options: The keyword arguments of `pocketmq.client.aio.PushConsumer`
                (`namesrv`, `message_model`, `consume_from_where`, `consume_thread_count`...).
        """
        self.aio = aio.PushConsumer(group, **options)  # first: refused options leave no loop
        super().__init__(loop)

    @property
    def group(self) -> str:
        return self.aio.group

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = "TAG") -> None:
        """Consumes `topic`'s messages that match `expression` (see `aio.PushConsumer`)."""
        self.aio.subscribe(topic, expression, expression_type=expression_type)

    def unsubscribe(self, topic: str) -> None:
        self.aio.unsubscribe(topic)

    def register_listener(self, listener: Listener) -> None:
        """Sets the function called with messages; it runs on worker threads."""
        self.aio.register_listener(listener)

    @property
    def assigned_queues(self) -> list[MessageQueue]:
        return self.aio.assigned_queues
