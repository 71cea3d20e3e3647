"""SQL92 property filters (RocketMQ's `enablePropertyFilter`): `region = 'eu' AND amount > 100`.

The grammar is RocketMQ's (after ActiveMQ's selectors): comparisons (`= <> != > >= < <=`),
`[NOT] IN (...)`, `[NOT] BETWEEN a AND b`, `IS [NOT] NULL`, `[NOT] CONTAINS / STARTSWITH /
ENDSWITH 'text'`, `AND`, `OR`, `NOT`, parentheses, `TRUE`/`FALSE`, integer and decimal numbers
(negative ones too), strings in single quotes (`''` is a quote). Keywords are case-insensitive;
anything else that looks like a name is a property (message properties are strings; `TAGS` is
one of them).

Evaluation uses SQL's three-valued logic: a missing property is NULL, a comparison with NULL is
unknown, and a message matches only when the whole expression is TRUE. A property compared with
a number is read as a number (`'10' > 5`); one that is not a number makes the comparison unknown.

Pure: `compile_filter(text)` parses once (raising `PropertyFilterError` that says where and what
was expected); `PropertyFilter.matches(properties)` evaluates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

Value = str | int | float | bool | None
Node = Callable[[Mapping[str, str]], Value]

_TOKEN: Final = re.compile(
    r"\s*(?:(?P<number>\d+\.\d*|\.\d+|\d+)(?![A-Za-z_])|(?P<string>'(?:[^']|'')*')"
    r"|(?P<op><>|!=|>=|<=|=|>|<|\(|\)|,|-)|(?P<name>[A-Za-z_$][A-Za-z0-9_$.]*))"
)
_KEYWORDS: Final = frozenset(
    {
        "AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "TRUE", "FALSE",
        "CONTAINS", "STARTSWITH", "ENDSWITH",
    }
)  # fmt: skip


class PropertyFilterError(ValueError):
    """An expression that is not valid SQL92 for RocketMQ; the message says where."""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # number, string, op, name, keyword, end
    text: str
    position: int


def _tokenize(text: str) -> list[_Token]:
    tokens = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            start = len(text) - len(text[position:].lstrip())
            raise PropertyFilterError(f"unexpected character {text[start]!r} at position {start}")
        kind = match.lastgroup or "op"
        value = match.group(kind)
        start = match.start(kind)
        if kind == "name" and value.upper() in _KEYWORDS:
            tokens.append(_Token("keyword", value.upper(), start))
        else:
            tokens.append(_Token(kind, value, start))
        position = match.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


def _number(value: Value) -> int | float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value
    try:
        return int(value)
    except ValueError:
        try:
            return float(value)
        except ValueError:
            return None


def _compare(left: Value, right: Value, op: str) -> bool | None:
    if left is None or right is None:
        return None
    if isinstance(left, bool) or isinstance(right, bool):
        if op in ("=", "<>", "!="):
            same = left == right
            return same if op == "=" else not same
        return None
    if isinstance(left, int | float) or isinstance(right, int | float):
        a, b = _number(left), _number(right)
        if a is None or b is None:
            return None
        left, right = a, b
    if op == "=":
        return left == right
    if op in ("<>", "!="):
        return left != right
    if type(left) is not type(right) and not (
        isinstance(left, int | float) and isinstance(right, int | float)
    ):
        return None
    return {
        ">": left > right,  # type: ignore[operator]
        ">=": left >= right,  # type: ignore[operator]
        "<": left < right,  # type: ignore[operator]
        "<=": left <= right,  # type: ignore[operator]
    }[op]


def _not(value: Value) -> Value:
    return None if value is None else not value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.index = 0

    @property
    def token(self) -> _Token:
        return self.tokens[self.index]

    def _fail(self, expected: str) -> PropertyFilterError:
        token = self.token
        found = "the end" if token.kind == "end" else repr(token.text)
        return PropertyFilterError(
            f"expected {expected} at position {token.position}, found {found}"
        )

    def _accept(self, kind: str, text: str | None = None) -> _Token | None:
        token = self.token
        if token.kind == kind and (text is None or token.text == text):
            self.index += 1
            return token
        return None

    def _expect(self, kind: str, text: str, what: str) -> None:
        if self._accept(kind, text) is None:
            raise self._fail(what)

    def parse(self) -> Node:
        node = self._or()
        if self.token.kind != "end":
            raise self._fail("AND, OR or the end of the expression")
        return node

    def _or(self) -> Node:
        node = self._and()
        while self._accept("keyword", "OR"):
            left, right = node, self._and()
            node = _make_or(left, right)
        return node

    def _and(self) -> Node:
        node = self._not()
        while self._accept("keyword", "AND"):
            left, right = node, self._not()
            node = _make_and(left, right)
        return node

    def _not(self) -> Node:
        if self._accept("keyword", "NOT"):
            inner = self._not()
            return lambda p: _not(inner(p))
        return self._predicate()

    def _predicate(self) -> Node:
        left = self._operand()
        token = self.token
        if token.kind == "op" and token.text in ("=", "<>", "!=", ">", ">=", "<", "<="):
            self.index += 1
            right = self._operand()
            op = token.text
            return lambda p: _compare(left(p), right(p), op)
        if self._accept("keyword", "IS"):
            negate = self._accept("keyword", "NOT") is not None
            self._expect("keyword", "NULL", "NULL after IS")
            return (lambda p: left(p) is not None) if negate else (lambda p: left(p) is None)
        negate = self._accept("keyword", "NOT") is not None
        if self._accept("keyword", "IN"):
            node = self._in(left)
        elif self._accept("keyword", "BETWEEN"):
            low = self._operand()
            self._expect("keyword", "AND", "AND in BETWEEN")
            high = self._operand()
            node = _make_and(
                lambda p: _compare(left(p), low(p), ">="),
                lambda p: _compare(left(p), high(p), "<="),
            )
        elif self.token.kind == "keyword" and self.token.text in (
            "CONTAINS",
            "STARTSWITH",
            "ENDSWITH",
        ):
            node = self._text_test(left)
        elif negate:
            raise self._fail("IN, BETWEEN, CONTAINS, STARTSWITH or ENDSWITH after NOT")
        else:
            return left
        if negate:
            positive = node
            return lambda p: _not(positive(p))
        return node

    def _in(self, left: Node) -> Node:
        self._expect("op", "(", "( after IN")
        values = [self._literal("a string or number in the IN list")]
        while self._accept("op", ","):
            values.append(self._literal("a string or number in the IN list"))
        self._expect("op", ")", ") closing the IN list")

        def member(p: Mapping[str, str]) -> Value:
            value = left(p)
            if value is None:
                return None
            return any(_compare(value, v, "=") for v in values)

        return member

    def _text_test(self, left: Node) -> Node:
        word = self.token.text
        self.index += 1
        token = self._accept("string")
        if token is None:
            raise self._fail(f"a string after {word}")
        needle = token.text[1:-1].replace("''", "'")
        tests: dict[str, Callable[[str], bool]] = {
            "CONTAINS": lambda s: needle in s,
            "STARTSWITH": lambda s: s.startswith(needle),
            "ENDSWITH": lambda s: s.endswith(needle),
        }
        test = tests[word]

        def check(p: Mapping[str, str]) -> Value:
            value = left(p)
            return None if not isinstance(value, str) else test(value)

        return check

    def _literal(self, expected: str) -> Value:
        sign = -1 if self._accept("op", "-") else 1
        token = self.token
        if token.kind == "number":
            self.index += 1
            return sign * (float(token.text) if "." in token.text else int(token.text))
        if sign < 0:
            raise self._fail("a number after -")
        if token.kind == "string":
            self.index += 1
            return token.text[1:-1].replace("''", "'")
        raise self._fail(expected)

    def _operand(self) -> Node:
        token = self.token
        if token.kind in ("number", "string") or (token.kind == "op" and token.text == "-"):
            value = self._literal("a value")
            return lambda p: value
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE"):
            self.index += 1
            flag = token.text == "TRUE"
            return lambda p: flag
        if token.kind == "keyword" and token.text == "NULL":
            self.index += 1
            return lambda p: None
        if token.kind == "name":
            self.index += 1
            name = token.text
            return lambda p: p.get(name)
        if self._accept("op", "("):
            node = self._or()
            self._expect("op", ")", ") closing the parenthesis")
            return node
        raise self._fail("a property, a value or (")


def _make_and(left: Node, right: Node) -> Node:
    def both(p: Mapping[str, str]) -> Value:
        a = left(p)
        if a is False:
            return False
        b = right(p)
        if b is False:
            return False
        return None if a is None or b is None else bool(a) and bool(b)

    return both


def _make_or(left: Node, right: Node) -> Node:
    def either(p: Mapping[str, str]) -> Value:
        a = left(p)
        if a is True:
            return True
        b = right(p)
        if b is True:
            return True
        return None if a is None or b is None else bool(a) or bool(b)

    return either


@dataclass(frozen=True, slots=True)
class PropertyFilter:
    """A compiled SQL92 expression."""

    expression: str
    _node: Node

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether a message with these properties is selected (the expression is TRUE)."""
        return self._node(properties) is True


def compile_filter(text: str) -> PropertyFilter:
    """Parses an SQL92 expression.

    Raises:
        PropertyFilterError: blank, or not valid; the message names the position and what was
            expected there.
    """
    if not text or not text.strip():
        raise PropertyFilterError("the SQL92 expression is empty")
    return PropertyFilter(text, _Parser(text).parse())
