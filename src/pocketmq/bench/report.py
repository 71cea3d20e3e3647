"""What the load tools print: a line each second while they run, and the summary at the end."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, TextIO


@contextlib.asynccontextmanager
async def every_second(line: Callable[[], str], out: TextIO, *, quiet: bool) -> AsyncIterator[None]:
    """Prints `line()` once a second while the block runs (nothing when `quiet`)."""

    async def tick() -> None:
        while True:
            await asyncio.sleep(1)
            if not quiet:
                print(line(), file=out, flush=True)

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def latency_text(summary: dict[str, float]) -> str:
    """p50/p99/p99.9/max of a `LatencyHistogram.summary()`, in milliseconds."""
    return " ".join(
        f"{name} {summary[key] / 1000:.3f}"
        for name, key in (
            ("p50", "p50_us"),
            ("p99", "p99_us"),
            ("p99.9", "p999_us"),
            ("max", "max_us"),
        )
    )


def print_summary(summary: dict[str, Any], text: str, out: TextIO, *, as_json: bool) -> None:
    """The run's summary: JSON for scripts, else one `Summary:` line."""
    print(json.dumps(summary, indent=2) if as_json else f"Summary: {text}", file=out, flush=True)
