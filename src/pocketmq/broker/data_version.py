"""RocketMQ's `DataVersion`: a counter and timestamp that tell a NameServer a table changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class DataVersion:
    """Bumped on every change of the table it versions."""

    counter: int = 0
    state_version: int = 0
    timestamp: int = 0

    def bump(self, now_ms: int) -> None:
        self.counter += 1
        self.timestamp = now_ms

    def to_json(self) -> dict[str, int]:
        return {
            "counter": self.counter,
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
        }

    @classmethod
    def from_json(cls, data: Any) -> DataVersion:
        if not isinstance(data, dict):
            return cls()
        return cls(
            counter=int(data.get("counter", 0)),
            state_version=int(data.get("stateVersion", 0)),
            timestamp=int(data.get("timestamp", 0)),
        )
