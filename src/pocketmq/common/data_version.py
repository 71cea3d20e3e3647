"""RocketMQ's `DataVersion`: how a broker tells NameServers that its topic table changed.

Equal versions mean an unchanged table; a broker makes a new version on every change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic table version (`DataVersion`); equal when all three fields are."""

    counter: int = 0
    state_version: int = 0
    timestamp: int = 0

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DataVersion:
        """Reads `{"counter", "stateVersion", "timestamp"}`; missing fields are 0.

        Raises:
            ValueError: A field is not an integer.
        """
        return cls(
            counter=_json_int(data.get("counter", 0), "counter"),
            state_version=_json_int(data.get("stateVersion", 0), "stateVersion"),
            timestamp=_json_int(data.get("timestamp", 0), "timestamp"),
        )

    def to_json(self) -> dict[str, int]:
        return {
            "counter": self.counter,
            "stateVersion": self.state_version,
            "timestamp": self.timestamp,
        }

    def bumped(self, now_ms: int) -> DataVersion:
        """The next version, made at `now_ms`."""
        return DataVersion(self.counter + 1, self.state_version, now_ms)


def _json_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"{what} is not an integer: {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{what} is not an integer: {value!r}") from None
