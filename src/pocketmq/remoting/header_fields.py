"""What a command header's fields may hold, whichever codec writes it: Java's int ranges, the
language codes by ordinal, and the checks both codecs make before they encode."""

from __future__ import annotations

from typing import Final

from pocketmq.common.codes import LanguageCode
from pocketmq.remoting.errors import LocalProtocolError

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT16_MIN: Final = -(1 << 15)
INT16_MAX: Final = (1 << 15) - 1

LANGUAGE_BY_ORDINAL: Final = {member.value: member for member in LanguageCode}


def check_int32(name: str, value: int) -> None:
    """Raises `LocalProtocolError` when `value` does not fit a Java int."""
    if not INT32_MIN <= value <= INT32_MAX:
        raise LocalProtocolError(f"{name} {value} does not fit a 32-bit int")


def utf8(text: str, what: str) -> bytes:
    """`text` as UTF-8; `LocalProtocolError` naming `what` for a lone surrogate."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise LocalProtocolError(f"{what} is not encodable as UTF-8: {error}") from None
