"""The key-value state machine: the example of a `StateMachine` on Raft, and what the tests
replicate. Each key remembers the log index that last wrote it, so two replicas
can be compared for having applied the same commands in the same order."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Versioned:
    value: str
    index: int
    """The log index of the command that wrote `value`."""


def put_command(key: str, value: str) -> bytes:
    return json.dumps({"op": "put", "key": key, "value": value}).encode()


def delete_command(key: str) -> bytes:
    return json.dumps({"op": "delete", "key": key}).encode()


class KeyValueStore:
    def __init__(self) -> None:
        self.data: dict[str, Versioned] = {}
        self.applied = 0

    def apply(self, index: int, command: bytes) -> str | None:
        """Applies the command at log `index`; returns the key's previous value. A command that
        does not parse is skipped (it still takes its index) so that every replica agrees."""
        assert index > self.applied, (index, self.applied)
        self.applied = index
        try:
            decoded = json.loads(command)
            op, key = decoded["op"], decoded["key"]
        except (ValueError, KeyError, TypeError):
            return None
        previous = self.data.get(key)
        if op == "put":
            self.data[key] = Versioned(str(decoded.get("value", "")), index)
        elif op == "delete":
            self.data.pop(key, None)
        return previous.value if previous else None

    def get(self, key: str) -> str | None:
        found = self.data.get(key)
        return found.value if found else None

    def snapshot(self) -> bytes:
        items = {key: [v.value, v.index] for key, v in self.data.items()}
        return json.dumps({"applied": self.applied, "data": items}).encode()

    def restore(self, image: bytes) -> None:
        if not image:
            self.applied, self.data = 0, {}
            return
        decoded = json.loads(image)
        self.applied = int(decoded["applied"])
        self.data = {
            key: Versioned(value, index) for key, (value, index) in decoded["data"].items()
        }
