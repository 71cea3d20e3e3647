"""How `pocketmq admin` commands report: a JSON document for `--json`, aligned text otherwise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Report:
    """What a command found: a JSON document for `--json`, text lines otherwise."""

    document: Any
    lines: list[str]


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    """Left-aligned columns two spaces apart; the last column is not padded."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append("  ".join([*padded, row[-1]]).rstrip())
    return lines


def key_values(pairs: Sequence[tuple[str, object]], separator: str = ": ") -> list[str]:
    """`key<sep>value` lines with the keys padded to one width."""
    width = max((len(k) for k, _ in pairs), default=0)
    return [f"{k.ljust(width)}{separator}{v}" for k, v in pairs]


def human_time_ms(timestamp_ms: int) -> str:
    """`yyyy-MM-dd HH:mm:ss,SSS` in local time, as mqadmin prints times; "" for 0."""
    if timestamp_ms <= 0:
        return ""
    moment = datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S,") + f"{timestamp_ms % 1000:03d}"
