"""Long polling (RocketMQ's `PullRequestHoldService`): pulls that wait for messages to arrive.

A pull that finds nothing new may be held: its request task awaits `hold()` until the queue's
max offset passes the offset it asked for, or its deadline. The dispatcher wakes holders as it
builds ConsumeQueue entries (`on_dispatched`, hooked into `Dispatcher.on_dispatched`), so a
held pull answers as soon as the message is readable; there is no periodic scan and no
polling.

Invariants kept:
- a waiter is registered under its (topic, queue id) only while its `hold()` runs; it removes
  itself on wake-up, timeout and cancellation alike, so a cancelled request task (the
  connection closed, the server stops) leaves nothing behind;
- `notify` touches only the waiters of the queue it names;
- at most `max_held` pulls wait at once; past that `hold()` returns at once (the pull is
  answered with what there is), which bounds memory whatever clients do;
- every wait ends by a deadline on the event loop's clock.

Not here: what a pull answers (`pull.py`), and message filters: a holder is woken by any new
entry of its queue and re-reads; the pull decides whether what came matches.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pocketmq.runtime.event_loop import resolve_after
from pocketmq.store.dispatch import DispatchRequest

log = logging.getLogger(__name__)

MAX_HELD_DEFAULT: Final = 100_000
"""Held pulls at most; each costs a task and a future (a few KiB), so ~100k is a few hundred MiB
at worst, while a broker rarely serves more than a few thousand consumer queues."""


@dataclass(eq=False, slots=True)
class _Waiter:
    offset: int
    future: asyncio.Future[None] = field(repr=False)


class PullHoldService:
    """Parks pulls per (topic, queue id) until their queue grows past their offset."""

    def __init__(
        self,
        max_offset_of: Callable[[str, int], int],
        *,
        max_held: int = MAX_HELD_DEFAULT,
    ) -> None:
        """
        Args:
            max_offset_of: The queue's max offset (one past its last entry), such as
                `MessageStore.get_max_offset_in_queue`; read before waiting and on return.
            max_held: How many pulls may wait at once.
        """
        self._max_offset_of = max_offset_of
        self._max_held = max_held
        self._waiters: dict[tuple[str, int], set[_Waiter]] = {}
        self._held = 0
        self._closed = False
        self.rejected_count = 0
        """Holds refused because `max_held` pulls were already waiting."""

    @property
    def held_count(self) -> int:
        """Pulls waiting now."""
        return self._held

    @property
    def is_full(self) -> bool:
        return self._held >= self._max_held

    async def hold(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """Waits until the queue's max offset exceeds `offset`, at most `timeout_s` seconds.

        Returns at once when there already is a message at `offset`, when `timeout_s` is not
        positive, when `max_held` pulls are waiting, or after `close()`.

        Args:
            topic: The queue's topic.
            queue_id: The queue's id.
            offset: The queue offset the pull wants to read.
            timeout_s: The longest wait, on the event loop's clock.

        Returns:
            Whether the queue's max offset exceeds `offset` now: True as soon as a message
            arrived, False on timeout (or refusal); the caller reads the queue again either way.
        """
        if self._max_offset_of(topic, queue_id) > offset:
            return True
        if timeout_s <= 0 or self._closed:
            return False
        if self._held >= self._max_held:
            self.rejected_count += 1
            if self.rejected_count % 1000 == 1:
                log.warning(
                    "%d pulls are held, the most allowed; answering pulls at once "
                    "(%d refused so far)",
                    self._held,
                    self.rejected_count,
                )
            return False
        key = (topic, queue_id)
        waiter = _Waiter(offset, asyncio.get_running_loop().create_future())
        self._waiters.setdefault(key, set()).add(waiter)
        self._held += 1
        expiry = resolve_after(timeout_s, waiter.future, None)  # the wait ends either way
        try:
            await waiter.future
        finally:
            expiry.cancel()
            self._held -= 1
            self._forget(key, waiter)
        return self._max_offset_of(topic, queue_id) > offset

    def _forget(self, key: tuple[str, int], waiter: _Waiter) -> None:
        waiters = self._waiters.get(key)
        if waiters is not None:
            waiters.discard(waiter)
            if not waiters:
                del self._waiters[key]

    def notify(self, topic: str, queue_id: int, max_offset: int) -> int:
        """Wakes the pulls of one queue that wait for an offset below `max_offset`.

        Args:
            topic: The queue's topic.
            queue_id: The queue's id.
            max_offset: The queue's max offset now (one past its newest entry).

        Returns:
            How many pulls were woken.
        """
        key = (topic, queue_id)
        waiters = self._waiters.get(key)
        if not waiters:
            return 0
        woken = [waiter for waiter in waiters if waiter.offset < max_offset]
        for waiter in woken:
            waiters.discard(waiter)
            if not waiter.future.done():
                waiter.future.set_result(None)
        if not waiters:
            del self._waiters[key]
        return len(woken)

    def on_dispatched(self, run: Sequence[DispatchRequest]) -> None:
        """A `Dispatcher.on_dispatched` listener: queue entries were just built. Each queue
        with pulls waiting is notified once a run, with the newest of its entries."""
        waiters = self._waiters
        if not waiters:
            return
        newest: dict[tuple[str, int], int] = {}
        for request in run:
            key = (request.topic, request.queue_id)
            if key in waiters and request.goes_to_consume_queue:
                newest[key] = max(newest.get(key, 0), request.queue_offset + 1)
        for (topic, queue_id), max_offset in newest.items():
            self.notify(topic, queue_id, max_offset)

    def close(self) -> None:
        """Wakes every held pull (they answer with what there is) and refuses new holds."""
        self._closed = True
        for waiters in self._waiters.values():
            for waiter in waiters:
                if not waiter.future.done():
                    waiter.future.set_result(None)
        self._waiters.clear()
