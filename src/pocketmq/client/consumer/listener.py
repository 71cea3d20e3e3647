"""What a push consumer's listener is given and what it answers."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable

from pocketmq.client.message import MessageExt


class ConsumeResult(enum.Enum):
    """What a listener says about the messages it was given."""

    SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


Listener = Callable[[list[MessageExt]], ConsumeResult | Awaitable[ConsumeResult | None] | None]
"""Called with 1 to `consume_batch_max_size` messages of one queue; returning None or
SUCCESS marks them consumed, RECONSUME_LATER or an exception asks for redelivery."""
