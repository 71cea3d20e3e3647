"""JSON as RocketMQ's fastjson writes and reads it, where that differs from standard JSON.

fastjson departs from standard JSON in two places RocketMQ bodies rely on:

* `Long` map keys are written as bare numbers, `{"brokerAddrs":{0:"a:1"}}` (routes, cluster
  tables, `consumerOffset.json`, lock bodies of Java clients);
* a map keyed by a bean writes the bean as a JSON object in key position,
  `{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}` (`TopicStatsTable`,
  `ConsumeStats`).

`dumps` writes the first form (or, with `standard_json`, quotes every key and escapes non-ASCII
as `BrowserCompatible` does); `parse_fastjson` reads standard JSON with orjson, and the first
form at `json` module speed by quoting bare numeric keys first. `parse_fastjson_any_keys` reads
the second form too, with a small recursive reader: an object or array in key position becomes
a hashable sorted tuple (`freeze_key`).

Both readers raise `FastjsonError` for anything that is not JSON in either form; nesting is
bounded, so a hostile body cannot exhaust the stack.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeAlias

import orjson

DEPTH_MAX: Final = 64
"""Nesting `parse_fastjson_any_keys` accepts; RocketMQ bodies nest at most five levels."""


class FastjsonError(ValueError):
    """A body that is not JSON, not even in fastjson's forms; the message says where."""


# ---- writing ------------------------------------------------------------------------------

Node: TypeAlias = (
    bool | int | str | Sequence["Node"] | Mapping[str, "Node"] | Mapping[int, "Node"] | None
)
"""What `dumps` writes: JSON values whose map keys are strings or integers."""


def dumps(node: Node, *, standard_json: bool) -> bytes:
    """`node` as UTF-8 JSON without spaces, map keys sorted (integers first, ascending).

    Args:
        node: The document.
        standard_json: Quote integer keys and escape non-ASCII text as `\\uXXXX`; otherwise
            integer keys stay bare and text is written as UTF-8, as fastjson does by default.
    """
    out: list[str] = []
    _write(node, out, standard_json)
    return "".join(out).encode("utf-8")


def _write(node: Node, out: list[str], standard_json: bool) -> None:
    if node is None:
        out.append("null")
    elif isinstance(node, bool):
        out.append("true" if node else "false")
    elif isinstance(node, int):
        out.append(str(node))
    elif isinstance(node, str):
        out.append(json.dumps(node, ensure_ascii=standard_json))
    elif isinstance(node, Mapping):
        items: list[tuple[str | int, Node]] = [(k, v) for k, v in node.items()]
        items.sort(key=_key_order)
        out.append("{")
        for index, (key, value) in enumerate(items):
            if index:
                out.append(",")
            if isinstance(key, str):
                out.append(json.dumps(key, ensure_ascii=standard_json))
            else:
                out.append(f'"{key}"' if standard_json else str(key))
            out.append(":")
            _write(value, out, standard_json)
        out.append("}")
    else:
        out.append("[")
        for index, value in enumerate(node):
            if index:
                out.append(",")
            _write(value, out, standard_json)
        out.append("]")


def _key_order(item: tuple[str | int, Node]) -> tuple[int, int, str]:
    key = item[0]
    return (1, 0, key) if isinstance(key, str) else (0, key, "")


# ---- reading: bare numeric keys -------------------------------------------------------------

# A whole JSON string (skipped as is), or a bare integer key right after `{` or `,`.
_STRING_OR_BARE_KEY: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|(?<=[{,])(\s*)(-?\d+)(\s*:)')


def quote_numeric_keys(text: str) -> str:
    """Rewrites fastjson's bare numeric keys as JSON strings: `{0:"a"}` -> `{"0":"a"}`.

    Text inside strings is never touched, and standard JSON comes back unchanged.
    """
    return _STRING_OR_BARE_KEY.sub(_quote_key, text)


def _quote_key(match: re.Match[str]) -> str:
    if match.group(2) is None:
        return match.group(0)
    return f'{match.group(1)}"{match.group(2)}"{match.group(3)}'


def parse_fastjson(data: bytes | str) -> object:
    """Parses JSON as fastjson writes it (bare numeric keys allowed, read as strings).

    Raises:
        FastjsonError: Not UTF-8, or not JSON even after quoting numeric keys.
    """
    try:
        # Most bodies are standard JSON (pocketmq's brokers and clients write it; Java writes
        # bare keys only in a few maps): orjson reads those several times faster. It refuses
        # the rest, which the slower path reads as before.
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        parsed: object = json.loads(quote_numeric_keys(text))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise FastjsonError(f"body is not JSON: {error}") from None
    return parsed


# ---- reading: any value as a key ------------------------------------------------------------


def parse_fastjson_any_keys(data: bytes | str) -> Any:
    """Parses a fastjson body in which any value may be a map key (`{{"a":1}:2}`).

    An object or array used as a key becomes `freeze_key` of it; a bare number key stays a
    number.

    Raises:
        FastjsonError: Not UTF-8, or not JSON even with fastjson's key forms.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as error:
        raise FastjsonError(f"body is not UTF-8: {error}") from None
    return _AnyKeyReader(text).document()


def freeze_key(value: Any) -> Any:
    """A hashable form of a key: objects become sorted `(name, value)` tuples, arrays tuples."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze_key(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(freeze_key(v) for v in value)
    return value


class _AnyKeyReader:
    """A recursive-descent reader for objects and arrays; scalars go to the `json` module."""

    _WHITESPACE: Final = " \t\n\r"

    def __init__(self, text: str) -> None:
        self._text = text
        self._pos = 0
        self._scalars = json.JSONDecoder()

    def document(self) -> Any:
        value = self._value(0)
        self._skip()
        if self._pos != len(self._text):
            raise FastjsonError(f"extra data at character {self._pos}")
        return value

    def _skip(self) -> None:
        text, pos = self._text, self._pos
        while pos < len(text) and text[pos] in self._WHITESPACE:
            pos += 1
        self._pos = pos

    def _value(self, depth: int) -> Any:
        if depth > DEPTH_MAX:
            raise FastjsonError(f"nested deeper than {DEPTH_MAX} levels")
        self._skip()
        text, pos = self._text, self._pos
        if pos >= len(text):
            raise FastjsonError("unexpected end of the document")
        char = text[pos]
        if char == "{":
            return self._object(depth)
        if char == "[":
            return self._array(depth)
        try:
            value, self._pos = self._scalars.raw_decode(text, pos)
        except json.JSONDecodeError:
            raise FastjsonError(f"unexpected {char!r} at character {pos}") from None
        return value

    def _expect(self, char: str) -> None:
        self._skip()
        if self._text[self._pos : self._pos + 1] != char:
            raise FastjsonError(f"expected {char!r} at character {self._pos}")
        self._pos += 1

    def _next_is(self, char: str) -> bool:
        self._skip()
        if self._text[self._pos : self._pos + 1] == char:
            self._pos += 1
            return True
        return False

    def _object(self, depth: int) -> dict[Any, Any]:
        self._pos += 1
        result: dict[Any, Any] = {}
        if self._next_is("}"):
            return result
        while True:
            key = freeze_key(self._value(depth + 1))
            self._expect(":")
            result[key] = self._value(depth + 1)
            if self._next_is("}"):
                return result
            self._expect(",")

    def _array(self, depth: int) -> list[Any]:
        self._pos += 1
        result: list[Any] = []
        if self._next_is("]"):
            return result
        while True:
            result.append(self._value(depth + 1))
            if self._next_is("]"):
                return result
            self._expect(",")
