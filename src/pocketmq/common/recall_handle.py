"""The recall handle of a timer message (RocketMQ's `RecallMessageHandle.HandleV1`).

A broker returns it in the send response (`recallHandle`) of a timer message; a producer hands
it back in RECALL_MESSAGE to cancel the message before it is delivered. It is the text
`v1 <topic> <brokerName> <timestamp> <uniqKey>` in URL-safe base64 (with padding, as Java's
`Base64.getUrlEncoder` writes it). The timestamp is the message's TIMER_OUT_MS plus one, so a
delete marker sent for it rounds down to the same wheel slot as the message.

Pure; shared by the broker (which builds and checks handles) and the client (which reads the
broker name to know where to send the recall).
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Final

VERSION_1: Final = "v1"
_SEPARATOR: Final = " "
_URL_SAFE_BASE64: Final = re.compile(r"[A-Za-z0-9_-]*={0,2}")


class RecallHandleError(ValueError):
    """Text that is not a recall handle (not base64, not `v1 ...`, too few parts)."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """The parts of a version 1 handle.

    Attributes:
        topic: The message's topic (its real topic, not the timer topic).
        broker_name: The broker that holds the timer.
        timestamp: TIMER_OUT_MS + 1, as text (it travels as text and is checked as a number).
        message_id: The message's UNIQ_KEY.
    """

    topic: str
    broker_name: str
    timestamp: str
    message_id: str

    def encode(self) -> str:
        """The handle as the send response carries it."""
        raw = _SEPARATOR.join(
            (VERSION_1, self.topic, self.broker_name, self.timestamp, self.message_id)
        )
        return base64.urlsafe_b64encode(raw.encode()).decode("ascii")


def decode_recall_handle(text: str | None) -> RecallHandle:
    """Reads a handle.

    Raises:
        RecallHandleError: empty, not URL-safe base64, not UTF-8, not version 1, or fewer
            than five parts.
    """
    if not text:
        raise RecallHandleError("recall handle is invalid: it is empty")
    if not _URL_SAFE_BASE64.fullmatch(text):
        raise RecallHandleError("recall handle is invalid: not URL-safe base64")
    padded = text + "=" * (-len(text) % 4)  # Java's decoder accepts a handle without padding
    try:
        raw = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise RecallHandleError("recall handle is invalid: not URL-safe base64") from None
    items = raw.split(_SEPARATOR)
    if items[0] != VERSION_1 or len(items) < 5:
        raise RecallHandleError("recall handle is invalid: not a version 1 handle")
    return RecallHandle(items[1], items[2], items[3], items[4])
