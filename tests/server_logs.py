"""What the tests read in the logs of the servers they start."""

from __future__ import annotations

from pathlib import Path

HANDLER_FAILED = "handler for request code"
"""What a server logs when a request handler raised (`Channel`): it answers SYSTEM_ERROR, which
clients retry, so a test whose assertions pass may still have hidden a server bug."""


def first_handler_failure(folder: Path) -> str | None:
    """The first request handler's exception logged in a `*.log` under `folder`, as
    `file: line`; None when there is none. Bad input gets a precise answer, never this."""
    for log in sorted(folder.rglob("*.log")):
        with log.open(errors="replace") as lines:
            for line in lines:
                if HANDLER_FAILED in line:
                    return f"{log.name}: {line.rstrip()}"
    return None
