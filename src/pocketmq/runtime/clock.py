"""The clock port: wall time for stored timestamps, monotonic time for intervals.

Stores and servers read time only through a `Clock` so that tests can move time by hand
(retention at `deleteWhen`, file expiry, timeouts) without sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Where time comes from."""

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the Unix epoch (stored in messages and file times)."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start that never go backwards (for intervals)."""
        ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to; for tests and simulations."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self._now_ms = now_ms
        self._monotonic = 0.0

    def now_ms(self) -> int:
        return self._now_ms

    def monotonic(self) -> float:
        return self._monotonic

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by `seconds`."""
        assert seconds >= 0, "time never goes backwards"
        self._now_ms += int(seconds * 1000)
        self._monotonic += seconds
