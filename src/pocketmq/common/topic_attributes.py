"""Topic attributes as RocketMQ 5 sets them (`updateTopic -a +message.type=FIFO`): text
`+key=value` to set and `-key` to remove, joined by commas, over a few known keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

MESSAGE_TYPE: Final = "message.type"
KNOWN: Final[Mapping[str, frozenset[str] | None]] = {
    MESSAGE_TYPE: frozenset({"UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"}),
    "queue.type": frozenset({"SimpleCQ", "BatchCQ"}),
    "cleanup.policy": frozenset({"DELETE", "COMPACTION"}),
}


class TopicAttributeError(ValueError):
    """Attribute text that does not parse, or names an unknown key or value."""


def apply_attributes(current: Mapping[str, str], text: str) -> dict[str, str]:
    """`current` changed by `text`; raises TopicAttributeError naming the bad part."""
    result = dict(current)
    for part in filter(None, (p.strip() for p in text.split(","))):
        sign, body = part[0], part[1:]
        if sign not in "+-":
            raise TopicAttributeError(f"attribute {part!r} must start with + (set) or - (remove)")
        name, _, value = body.partition("=")
        if name not in KNOWN:
            raise TopicAttributeError(
                f"unknown attribute {name!r}: known are {', '.join(sorted(KNOWN))}"
            )
        if sign == "-":
            result.pop(name, None)
            continue
        allowed = KNOWN[name]
        if allowed is not None and value not in allowed:
            raise TopicAttributeError(
                f"attribute {name}={value!r} is not one of {', '.join(sorted(allowed))}"
            )
        result[name] = value
    return result


def attributes_text(attributes: Mapping[str, str]) -> str:
    return ",".join(f"+{k}={v}" for k, v in sorted(attributes.items()))
