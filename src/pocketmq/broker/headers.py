"""Reading RocketMQ request headers (ext fields) the way Java's `decodeCommandCustomHeader` does.

Required fields (`@CFNotNull`) raise `HeaderError` when absent; numbers follow
`Integer.parseInt` / `Long.parseLong` (ASCII digits and a sign, within 32 or 64 bits); booleans
follow `Boolean.parseBoolean`. Handlers answer a `HeaderError` with a precise code and its text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from pocketmq.remoting.command import RemotingCommand

_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+")
_INT32_RANGE: Final = range(-(1 << 31), 1 << 31)
_INT64_RANGE: Final = range(-(1 << 63), 1 << 63)


class HeaderError(ValueError):
    """A request header field is missing or not a number; answered with SYSTEM_ERROR, as Java
    answers a `RemotingCommandException` from `decodeCommandCustomHeader`."""


# -- header fields ---------------------------------------------------------------------------
def required_text(ext_fields: Mapping[str, str], name: str) -> str:
    """A required (`@CFNotNull`) string field.

    Raises:
        HeaderError: the field is absent.
    """
    value = ext_fields.get(name)
    if value is None:
        raise HeaderError(f"the custom field <{name}> is null")
    return value


def _parse_int(name: str, value: str, valid: range) -> int:
    # Java's Integer.parseInt/Long.parseLong: ASCII digits with an optional sign, no blanks.
    if not _INT_TEXT.fullmatch(value):
        raise HeaderError(f"the custom field <{name}> is not a number: {value!r}")
    number = int(value)
    if number not in valid:
        raise HeaderError(f"the custom field <{name}> is out of range: {value}")
    return number


def required_int(ext_fields: Mapping[str, str], name: str) -> int:
    """A required Java `int` field.

    Raises:
        HeaderError: the field is absent, not a number, or beyond 32 bits.
    """
    return _parse_int(name, required_text(ext_fields, name), _INT32_RANGE)


def required_long(ext_fields: Mapping[str, str], name: str) -> int:
    """A required Java `long` field.

    Raises:
        HeaderError: the field is absent, not a number, or beyond 64 bits.
    """
    return _parse_int(name, required_text(ext_fields, name), _INT64_RANGE)


def optional_int(ext_fields: Mapping[str, str], name: str) -> int | None:
    """An optional Java `Integer` field; None when absent.

    Raises:
        HeaderError: the field is present but not a 32-bit number.
    """
    value = ext_fields.get(name)
    return None if value is None else _parse_int(name, value, _INT32_RANGE)


def optional_long(ext_fields: Mapping[str, str], name: str) -> int | None:
    """An optional Java `Long` field; None when absent.

    Raises:
        HeaderError: the field is present but not a 64-bit number.
    """
    value = ext_fields.get(name)
    return None if value is None else _parse_int(name, value, _INT64_RANGE)


def optional_bool(ext_fields: Mapping[str, str], name: str) -> bool | None:
    """An optional Java `Boolean` field (`Boolean.parseBoolean`: only "true", in any case, is
    true); None when absent."""
    value = ext_fields.get(name)
    return None if value is None else value.lower() == "true"


def error_response(request: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    """A response with no header fields, only a code and its remark."""
    return RemotingCommand.response_to(request, code, remark)
