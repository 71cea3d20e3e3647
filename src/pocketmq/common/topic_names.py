"""Topic name rules (RocketMQ's `TopicValidator`), shared by brokers and clients.

A client checks a name before sending so that a typo fails at once with the rule it broke,
instead of as a broker error after a network round trip.
"""

from __future__ import annotations

import re
from typing import Final

TOPIC_NAME_MAX_LENGTH: Final = 127
_VALID_NAME: Final = re.compile(r"^[%|a-zA-Z0-9_-]+$")


class TopicError(ValueError):
    """A topic name or setting that RocketMQ would refuse; the message says which rule."""


def validate_topic_name(name: str) -> None:
    """Raises `TopicError` unless `name` is a legal topic name (`TopicValidator`)."""
    if not name or not name.strip():
        raise TopicError("the topic name is blank")
    if len(name) > TOPIC_NAME_MAX_LENGTH:
        raise TopicError(f"the topic name is longer than {TOPIC_NAME_MAX_LENGTH} characters")
    if not _VALID_NAME.match(name):
        raise TopicError(
            f"the topic name {name!r} contains illegal characters; allowed: letters, digits, "
            "'%', '|', '_' and '-'"
        )
