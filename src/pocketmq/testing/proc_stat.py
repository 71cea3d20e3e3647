"""One process's counters from Linux's `/proc/<pid>/stat`, for benchmarks and tests that report
what a server cost (CPU, page faults) or walk its children."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    name: str
    parent: int
    minor_faults: int
    """Pages the kernel mapped in for the process without reading a disk (zeroed pages too)."""
    cpu_s: float
    """User and system CPU seconds so far."""


def proc_stat(pid: int | str) -> ProcStat:
    """The process's counters; OSError once it has ended (and been reaped)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    # The name sits in parentheses and may hold spaces or ")": everything after the last ")".
    name = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 1 :].split()
    return ProcStat(
        name=name,
        parent=int(fields[1]),
        minor_faults=int(fields[7]),
        cpu_s=(int(fields[11]) + int(fields[12])) / _TICKS,
    )
