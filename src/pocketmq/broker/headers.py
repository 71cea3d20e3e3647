"""Reading RocketMQ request headers (ext fields) the way Java's `decodeCommandCustomHeader` does.

Required fields (`@CFNotNull`) raise `HeaderError` when absent; numbers follow
`Integer.parseInt` / `Long.parseLong` (ASCII digits and a sign, within 32 or 64 bits); booleans
follow `Boolean.parseBoolean`. A handler declares its header as a class with a `decode`
classmethod (`PullHeader` is the model) and lets `answers_header_errors` turn a `HeaderError`
into the response, with the handler's code and the error's text as remark.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Concatenate, Final, ParamSpec, TypeVar

from pocketmq.common.codes import ResponseCode
from pocketmq.remoting.command import RemotingCommand

JAVA_INT_TEXT: Final = re.compile(r"[+-]?[0-9]+")
"""What `Integer.parseInt` / `Long.parseLong` accept: Python's int() also takes blanks,
underscores and non-ASCII digits, which Java refuses."""
_INT32_RANGE: Final = range(-(1 << 31), 1 << 31)
_INT64_RANGE: Final = range(-(1 << 63), 1 << 63)


class HeaderError(ValueError):
    """A request header field is missing or not a number; answered with SYSTEM_ERROR, as Java
    answers a `RemotingCommandException` from `decodeCommandCustomHeader`.

    Attributes:
        field: The ext field's name as it travels (`queueId`, or `e` in a V2 send header), when
            one field is to blame.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


_Owner = TypeVar("_Owner")
_Rest = ParamSpec("_Rest")
_Handler = Callable[Concatenate[_Owner, RemotingCommand, _Rest], Awaitable[RemotingCommand]]


def answers_header_errors(
    code: ResponseCode = ResponseCode.SYSTEM_ERROR,
) -> Callable[[_Handler[_Owner, _Rest]], _Handler[_Owner, _Rest]]:
    """Decorates a handler method `(self, request, ...)`: a `HeaderError` it raises is answered
    with `code` and the error's text (Java answers SYSTEM_ERROR; admin requests answer
    INVALID_PARAMETER)."""

    def decorate(handler: _Handler[_Owner, _Rest]) -> _Handler[_Owner, _Rest]:
        @functools.wraps(handler)
        async def answer(
            owner: _Owner, request: RemotingCommand, /, *args: _Rest.args, **kwargs: _Rest.kwargs
        ) -> RemotingCommand:
            try:
                return await handler(owner, request, *args, **kwargs)
            except HeaderError as exc:
                return error_response(request, code, str(exc))

        return answer

    return decorate


INT_DIGITS: Final = 9
"""ASCII digits that always fit a Java int (and a long takes twice as many): a usual header's
one-pass reading (`send_header`, `pull`) needs no range check below them."""


def parse_java_int(text: str | None) -> int | None:
    """`text` read as `Integer.parseInt` / `Long.parseLong` would (no range check); None when
    absent or not such a number."""
    if text is None:
        return None
    # Plain ASCII digits, what clients send, pass without the pattern (a third of the time).
    if (text.isdigit() and text.isascii()) or JAVA_INT_TEXT.fullmatch(text):
        return int(text)
    return None


# -- header fields ---------------------------------------------------------------------------
def required_text(ext_fields: Mapping[str, str], name: str) -> str:
    """A required (`@CFNotNull`) string field.

    Raises:
        HeaderError: the field is absent.
    """
    value = ext_fields.get(name)
    if value is None:
        raise HeaderError(f"the custom field <{name}> is null", name)
    return value


def _parse_int(name: str, value: str, valid: range) -> int:
    number = parse_java_int(value)
    if number is None:
        raise HeaderError(f"the custom field <{name}> is not a number: {value!r}", name)
    if number not in valid:
        bits = 32 if valid is _INT32_RANGE else 64
        raise HeaderError(
            f"the custom field <{name}> = {value} does not fit a {bits}-bit integer", name
        )
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
