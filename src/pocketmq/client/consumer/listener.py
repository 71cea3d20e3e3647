"""What a push consumer's listener is given and answers, and how it is called
(`ListenerCalls`): a plain function on a thread pool, an `async def` on the event loop, and
any failure turned into RECONSUME_LATER.

A listener answers None or a `ConsumeResult`. Anything else (a tuple, a bool, a string) is a
bug in the listener: it is treated as RECONSUME_LATER, as before, but said once per consumer at
WARNING level, because otherwise every message silently comes back later.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from pocketmq.client.consumer.process_queue import ProcessQueue
from pocketmq.client.message import MessageExt
from pocketmq.observability.trace import ConsumeReturnType

if TYPE_CHECKING:
    from pocketmq.client.trace_dispatch import ConsumeTracer

log = logging.getLogger(__name__)


class ConsumeResult(enum.Enum):
    """What a listener says about the messages it was given."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


Listener = Callable[[list[MessageExt]], ConsumeResult | Awaitable[ConsumeResult | None] | None]
"""Called with 1 to `consume_batch_max_size` messages of one queue; returning None or
SUCCESS marks them consumed, RECONSUME_LATER or an exception asks for redelivery. Any other
return value (True and False included) also asks for redelivery, with one warning per consumer."""


class ListenerCalls:
    """Calls one consumer group's listener; owns the thread pool of a plain-function one."""

    def __init__(self, group: str) -> None:
        self._group = group
        self._listener: Listener | None = None
        self.is_async = False
        self._executor: ThreadPoolExecutor | None = None
        # Results are read on the consume threads: the lock keeps the warning to one.
        self._warned_lock = threading.Lock()
        self._warned = False
        self.tracer: ConsumeTracer | None = None
        """Set when message trace is on: SubBefore/SubAfter around every call."""

    @property
    def registered(self) -> bool:
        return self._listener is not None

    def register(self, listener: Listener) -> None:
        self._listener = listener
        # An object whose __call__ is `async def` is an async listener too.
        function = listener if inspect.isroutine(listener) else type(listener).__call__
        self.is_async = inspect.iscoroutinefunction(function)

    def start(self, thread_count: int) -> None:
        """Starts the thread pool a plain-function listener runs on."""
        if not self.is_async:
            self._executor = ThreadPoolExecutor(
                thread_count, thread_name_prefix=f"consume-{self._group}"
            )

    def shutdown(self) -> None:
        """Stops the thread pool without waiting for calls still running on it."""
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def call(self, messages: list[MessageExt]) -> ConsumeResult:
        """Calls the listener with `messages`; any failure means RECONSUME_LATER."""
        result = (await self.call_all([messages]))[0]
        assert result is not None
        return result

    async def call_all(
        self, chunks: list[list[MessageExt]], process_queue: ProcessQueue | None = None
    ) -> list[ConsumeResult | None]:
        """One result per chunk; None for a chunk skipped because its queue was abandoned."""
        if self.is_async:
            return [await self._call_async(chunk) for chunk in chunks]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call_sync, chunks, process_queue)

    async def _call_async(self, messages: list[MessageExt]) -> ConsumeResult:
        listener = self._listener
        assert listener is not None
        tracer = self.tracer
        start = tracer.before(messages) if tracer is not None else None
        try:
            outcome = await listener(messages)  # type: ignore[misc]
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a listener failure means "later", never a crash
            self._log_failure(messages)
            result, return_type = ConsumeResult.RECONSUME_LATER, ConsumeReturnType.EXCEPTION
        else:
            result = self._result_of(outcome)
            return_type = _return_type(result)
        if start is not None:
            assert tracer is not None
            tracer.after(start, len(messages), return_type)
        return result

    def _call_sync(
        self, chunks: list[list[MessageExt]], process_queue: ProcessQueue | None
    ) -> list[ConsumeResult | None]:
        """Runs on a worker thread: one listener call per chunk, in order.

        A pull's chunks go on when their queue is dropped meanwhile: the batch was started,
        and finishing it (the drop waits for it) leaves no gap below the chunks already done
        that the next owner would read again. Only a queue abandoned after that wait stops
        here (reading the flag from this thread is safe: it only ever turns True).
        """
        listener = self._listener
        assert listener is not None
        results: list[ConsumeResult | None] = []
        for chunk in chunks:
            if process_queue is not None and process_queue.abandoned:
                results.append(None)
                continue
            tracer = self.tracer
            start = tracer.before(chunk) if tracer is not None else None
            try:
                result = self._result_of(listener(chunk))
            except Exception:  # noqa: BLE001 - a listener failure means "later", never a crash
                self._log_failure(chunk)
                result, return_type = ConsumeResult.RECONSUME_LATER, ConsumeReturnType.EXCEPTION
            else:
                return_type = _return_type(result)
            if start is not None:
                assert tracer is not None
                tracer.after(start, len(chunk), return_type)
            results.append(result)
        return results

    def _log_failure(self, messages: list[MessageExt]) -> None:
        log.warning(
            "listener of %s failed on %d messages (first %s at %s offset %d): redelivering",
            self._group,
            len(messages),
            messages[0].msg_id,
            messages[0].queue,
            messages[0].queue_offset,
            exc_info=True,
        )

    def _result_of(self, outcome: object) -> ConsumeResult:
        if outcome is None or outcome is ConsumeResult.SUCCESS:
            return ConsumeResult.SUCCESS
        if outcome is not ConsumeResult.RECONSUME_LATER:
            self._warn_unknown_result(outcome)
        return ConsumeResult.RECONSUME_LATER

    def _warn_unknown_result(self, outcome: object) -> None:
        with self._warned_lock:
            if self._warned:
                return
            self._warned = True
        log.warning(
            "listener %s of consumer group %s returned %s, which is neither None nor a "
            "ConsumeResult: its messages are redelivered later (RECONSUME_LATER). Return None "
            "or ConsumeResult.SUCCESS when consumed, ConsumeResult.RECONSUME_LATER (or raise) "
            "for a redelivery; this is said once per consumer",
            listener_name(self._listener),
            self._group,
            type(outcome).__name__,
        )


def _return_type(result: ConsumeResult) -> ConsumeReturnType:
    """The trace's view of a call that returned: SUCCESS, or FAILED (RECONSUME_LATER)."""
    if result is ConsumeResult.SUCCESS:
        return ConsumeReturnType.SUCCESS
    return ConsumeReturnType.FAILED


def listener_name(listener: object) -> str:
    """`module.qualname` of a function, or of the class of a callable object."""
    named = listener if inspect.isroutine(listener) else type(listener)
    module = getattr(named, "__module__", None)
    qualname = getattr(named, "__qualname__", repr(named))
    return f"{module}.{qualname}" if module else qualname
