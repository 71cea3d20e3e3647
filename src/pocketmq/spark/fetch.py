"""Reads a planned range of queue offsets with many pulls in flight.

A pull carries at most what the broker allows (RocketMQ's `maxTransferCountOnMessageInMemory`,
32 by default), so reading a range one pull at a time waits a round trip per 32 messages. The
range is known in advance, so its pieces are asked for together: the first pull shows how many
messages the broker gives per pull, then up to `window` pulls cover the rest side by side. A pull
that comes back short (a byte limit) leaves its tail for the next round."""

from __future__ import annotations

import asyncio
from typing import Final

from pocketmq.client.admin import AdminClient, RawPull
from pocketmq.client.message import MessageQueue

FIRST_ASK: Final = 1024
"""Messages the first pull asks for: the broker answers with as many as it allows."""
WINDOW: Final = 16
ROUNDS_WITHOUT_PROGRESS: Final = 3


class DataLossError(RuntimeError):
    """Offsets a query still needs were removed by retention."""


Span = tuple[int, int]


def _plan(pending: list[Span], step: int, window: int) -> tuple[list[Span], list[Span]]:
    """Up to `window` pulls of `step` messages from the front of `pending`, and what is left."""
    planned: list[Span] = []
    rest: list[Span] = []
    for low, high in pending:
        while low < high and len(planned) < window:
            planned.append((low, min(high, low + step)))
            low = planned[-1][1]
        if low < high:
            rest.append((low, high))
    return planned, rest


async def fetch_range(
    admin: AdminClient,
    address: str,
    queue: MessageQueue,
    start: int,
    end: int,
    *,
    fail_on_data_loss: bool,
    window: int = WINDOW,
) -> list[bytes]:
    """Pull bodies that together hold every message at offsets [start, end) of `queue`, in
    offset order (they may hold a few messages past `end` too).

    Raises:
        DataLossError: retention removed offsets in the range and `fail_on_data_loss` is set.
        RuntimeError: the queue ends before `end`, or the broker keeps answering nothing.
    """
    pieces: list[tuple[int, bytes]] = []
    pending: list[Span] = [(start, end)] if start < end else []
    step, learned, idle_rounds = min(FIRST_ASK, end - start), False, 0
    while pending:
        planned, pending = _plan(pending, step, window if learned else 1)
        answers = await asyncio.gather(
            *(
                admin.pull_raw(address, queue.topic, queue.queue_id, low, high - low)
                for low, high in planned
            )
        )
        progress = False
        for (low, high), answer in zip(planned, answers, strict=True):
            reached = _reached(queue, low, high, answer, fail_on_data_loss)
            if answer.records:
                pieces.append((low, answer.records))
                if not learned:
                    step, learned = max(1, reached - low), True  # what the broker gives per pull
            progress = progress or reached > low
            if reached < high:
                pending.append((reached, high))
        pending.sort()
        idle_rounds = 0 if progress else idle_rounds + 1
        if idle_rounds >= ROUNDS_WITHOUT_PROGRESS:
            raise RuntimeError(
                f"{_name(queue)}: the broker returns nothing for offsets {pending[0][0]}.."
                f"{pending[-1][1] - 1} although they are below its max offset"
            )
    pieces.sort(key=lambda piece: piece[0])
    return [records for _, records in pieces]


def _reached(
    queue: MessageQueue, low: int, high: int, answer: RawPull, fail_on_data_loss: bool
) -> int:
    """Where reading goes on after `answer` to a pull from `low`."""
    if answer.min_offset > low:
        if fail_on_data_loss:
            raise DataLossError(
                f"{_name(queue)}: offsets {low}..{min(answer.min_offset, high) - 1} are gone "
                "(retention); the query needed them. Restart it from a new checkpoint, or set "
                "failOnDataLoss=false to skip them"
            )
        return min(answer.min_offset, high)
    if answer.records:
        return answer.next_begin_offset
    if answer.max_offset <= low:
        raise RuntimeError(
            f"{_name(queue)} ends at {answer.max_offset}, before the planned end {high}"
        )
    return low


def _name(queue: MessageQueue) -> str:
    return f"{queue.topic} {queue.broker_name}:{queue.queue_id}"
