"""The blocking transactional producer: `pocketmq.client.tx.TransactionProducer` for code
without an event loop.

The listener's plain methods run in worker threads, so a local transaction may block on a
database call; `async def` methods run on the background loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pocketmq.client.blocking.loop import BackgroundLoop
from pocketmq.client.blocking.producer import Producer
from pocketmq.client.message import Message
from pocketmq.client.producer import transaction as tx


class TransactionProducer(Producer):
    """Sends messages in transactions; `with TransactionProducer("g", listener, ...) as p:`."""

    aio: tx.TransactionProducer

    def __init__(
        self,
        group: str,
        listener: tx.TransactionListener,
        *,
        check_topics: Sequence[str] = (),
        loop: BackgroundLoop | None = None,
        **options: Any,
    ) -> None:
        """Creates a transactional producer (arguments as the asyncio `TransactionProducer`)."""
        self._listener = listener
        self._check_topics = tuple(check_topics)
        super().__init__(group, loop=loop, **options)

    def _make_aio(self, group: str, options: dict[str, Any]) -> tx.TransactionProducer:
        return tx.TransactionProducer(
            group, self._listener, check_topics=self._check_topics, **options
        )

    def send_in_transaction(self, message: Message, arg: Any = None) -> tx.TransactionSendResult:
        """Sends a half, runs the local transaction and ends it (see the asyncio method)."""
        return self._background.call(self.aio.send_in_transaction(message, arg))
