"""A push consumer's listener for tests: it records what was delivered and waits for it.

The listener is a plain function, so the asyncio and the blocking clients can both call it,
from the consumer's loop or its worker threads; a lock keeps the record consistent, and the
waits poll it (see `waiting`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pocketmq.testing.waiting import DEFAULT_WAIT_S, async_wait_until

if TYPE_CHECKING:  # the plugin imports this package; only tests that consume need the client
    from pocketmq.client.message import MessageExt


class MessageRecorder:
    """Records every message a push consumer delivers, with its arrival time.

    Pass it as the listener: `PushConsumer(..., listener=recorder)` or
    `consumer.register_listener(recorder)`. Redeliveries are recorded again; `ids()` and
    `count_distinct()` see each message once.
    """

    def __init__(self, fail_first: int = 0) -> None:
        """Args:
        fail_first: The first this many calls raise (asking for redelivery) and record
            nothing, to test retries.
        """
        self._lock = threading.Lock()
        self._arrivals: list[tuple[float, MessageExt]] = []
        self._fail_left = fail_first
        self.calls = 0
        """How many times the listener was called, failed calls included."""

    def __call__(self, messages: list[MessageExt]) -> None:
        arrived = time.time()
        with self._lock:
            self.calls += 1
            if self._fail_left > 0:
                self._fail_left -= 1
                raise RuntimeError("failing on purpose")
            self._arrivals.extend((arrived, message) for message in messages)

    # -- what was recorded -----------------------------------------------------------------------

    @property
    def messages(self) -> list[MessageExt]:
        """Every delivery in arrival order, redeliveries included."""
        with self._lock:
            return [message for _, message in self._arrivals]

    @property
    def arrivals(self) -> list[tuple[float, MessageExt]]:
        """Every delivery with its wall-clock arrival time (`time.time()`)."""
        with self._lock:
            return list(self._arrivals)

    def bodies(self) -> list[bytes]:
        """The delivered bodies in arrival order, redeliveries included."""
        return [message.body for message in self.messages]

    def ids(self) -> set[str]:
        """The distinct message ids delivered."""
        return {message.msg_id for message in self.messages}

    def first_with_body(self, body: bytes) -> tuple[float, MessageExt] | None:
        """The first delivery of `body` with its arrival time, or None."""
        with self._lock:
            return next((a for a in self._arrivals if a[1].body == body), None)

    # -- waiting ---------------------------------------------------------------------------------

    async def wait_for(self, count: int, timeout_s: float = DEFAULT_WAIT_S) -> None:
        """Waits until `count` distinct messages (by id) were delivered.

        Raises:
            AssertionError: fewer arrived within `timeout_s`.
        """
        await async_wait_until(
            lambda: len(self.ids()) >= count,
            f"{count} distinct messages delivered",
            timeout_s=timeout_s,
            describe=lambda: f"{len(self.ids())} delivered",
        )

    async def wait_for_ids(self, ids: Iterable[str], timeout_s: float = DEFAULT_WAIT_S) -> None:
        """Waits until every message id in `ids` was delivered.

        Raises:
            AssertionError: some had not arrived within `timeout_s`.
        """
        expected = set(ids)
        await async_wait_until(
            lambda: self.ids() >= expected,
            f"{len(expected)} messages delivered",
            timeout_s=timeout_s,
            describe=lambda: f"{len(expected - self.ids())} of {len(expected)} missing",
        )

    async def wait_for_bodies(
        self, bodies: Iterable[bytes], timeout_s: float = DEFAULT_WAIT_S
    ) -> None:
        """Waits until every body in `bodies` was delivered.

        Raises:
            AssertionError: some had not arrived within `timeout_s`.
        """
        expected = set(bodies)
        await async_wait_until(
            lambda: expected <= set(self.bodies()),
            f"{len(expected)} bodies delivered",
            timeout_s=timeout_s,
            describe=lambda: f"missing {sorted(expected - set(self.bodies()))[:10]}",
        )

    async def wait_for_body(self, body: bytes, timeout_s: float = DEFAULT_WAIT_S) -> MessageExt:
        """Waits for the first delivery of `body` and returns it.

        Raises:
            AssertionError: it had not arrived within `timeout_s`.
        """
        _, message = await self.wait_for_arrival(body, timeout_s)
        return message

    async def wait_for_arrival(
        self, body: bytes, timeout_s: float = DEFAULT_WAIT_S
    ) -> tuple[float, MessageExt]:
        """Waits for the first delivery of `body`; returns its arrival time and the message.

        Raises:
            AssertionError: it had not arrived within `timeout_s`.
        """
        return await async_wait_until(
            lambda: self.first_with_body(body),
            f"{body!r} delivered",
            timeout_s=timeout_s,
            describe=lambda: f"delivered {self.bodies()[-20:]}",
        )
