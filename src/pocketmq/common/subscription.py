"""Subscription expressions (RocketMQ's `FilterAPI`): what a consumer wants from a topic.

A TAG expression is `*` or empty (everything) or tags joined by `||` (`TagA || TagB`). It becomes
a `SubscriptionData` holding the tags and their Java `String.hashCode` codes; the broker matches
a ConsumeQueue entry's tag code against those codes (a hash match only: clients re-check the
real TAGS property, as hashes collide). Codes are always computed here, never taken from a
client: the C++ client's heartbeat `codeSet` is garbage (`atoi` of the tag).

An SQL92 expression is compiled (`pocketmq.common.property_filter`) and kept on the
subscription; a broker evaluates it only with `enablePropertyFilter=true` and otherwise answers
as a Java broker does (SYSTEM_ERROR, "The broker does not support consumer to filter message by
SQL92"). Other expression types raise `UnsupportedExpressionTypeError`.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Final

from pocketmq.common.codes import ResponseCode
from pocketmq.common.java_hash import tags_code
from pocketmq.common.property_filter import PropertyFilter, PropertyFilterError, compile_filter

SUB_ALL: Final = "*"
"""The expression that takes every message (`SubscriptionData.SUB_ALL`)."""
TAG_SEPARATOR: Final = "||"
EXPRESSION_TYPE_TAG: Final = "TAG"
EXPRESSION_TYPE_SQL92: Final = "SQL92"
# Java's String.trim removes every char <= U+0020, not Unicode whitespace as str.strip does.
_JAVA_TRIM_CHARS: Final = "".join(map(chr, range(0x21)))


class SubscriptionError(ValueError):
    """A subscription the broker cannot serve; `response_code` is what a pull answers."""

    response_code: ClassVar[ResponseCode] = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class SubscriptionParseError(SubscriptionError):
    """The expression does not parse (Java: `SUBSCRIPTION_PARSE_FAILED`)."""

    response_code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class UnsupportedExpressionTypeError(SubscriptionError):
    """An expression type this broker does not filter by (SQL92 without
    `enablePropertyFilter`, or a type other than TAG and SQL92).

    Answered as a Java broker with `enablePropertyFilter=false` answers: SYSTEM_ERROR with the
    remark `The broker does not support consumer to filter message by <type>`, which Java
    clients show as is.
    """

    response_code = ResponseCode.SYSTEM_ERROR

    def __init__(self, expression_type: str) -> None:
        self.expression_type = expression_type
        super().__init__(
            f"The broker does not support consumer to filter message by {expression_type}"
        )


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """One consumer's subscription to one topic (RocketMQ's `SubscriptionData`).

    Attributes:
        topic: The subscribed topic.
        sub_string: The expression; `*` when it takes everything.
        tags_set: The tags of a TAG expression (empty for `*`).
        code_set: Java hash codes of `tags_set`, what ConsumeQueue entries are matched with.
        expression_type: `TAG` or `SQL92`.
        sub_version: The client's subscription version (a timestamp in Java clients).
        property_filter: The compiled expression of an SQL92 subscription.
    """

    topic: str
    sub_string: str = SUB_ALL
    tags_set: frozenset[str] = frozenset()
    code_set: frozenset[int] = frozenset()
    expression_type: str = EXPRESSION_TYPE_TAG
    sub_version: int = 0
    property_filter: PropertyFilter | None = field(default=None, compare=False)

    @property
    def takes_all(self) -> bool:
        """Whether every message matches (`*`)."""
        return self.sub_string == SUB_ALL

    @property
    def tag_codes(self) -> frozenset[int] | None:
        """The filter for `MessageStore.get_message`: None takes every entry (SQL92
        subscriptions filter on properties, not on tag hashes)."""
        return None if self.takes_all or self.property_filter is not None else self.code_set

    def matches_tags_code(self, code: int) -> bool:
        """Whether a ConsumeQueue entry with tag hash `code` may match (Java's
        `ExpressionMessageFilter.isMatchedByConsumeQueue` for TAG expressions)."""
        return self.tag_codes is None or code in self.code_set


def is_tag_type(expression_type: str | None) -> bool:
    """Java's `ExpressionType.isTagType`: absent, empty and `TAG` all mean tags."""
    return not expression_type or expression_type == EXPRESSION_TYPE_TAG


def parse_subscription(
    topic: str,
    expression: str | None,
    expression_type: str | None = None,
    *,
    sub_version: int = 0,
) -> SubscriptionData:
    """Builds the subscription of `topic` from a consumer's expression (`FilterAPI.build`).

    Args:
        topic: The subscribed topic.
        expression: `*`, empty or None (everything), or tags joined by `||`; each tag is trimmed
            as Java's `String.trim` does, and empty tags are dropped.
        expression_type: `TAG` (also when None or empty) or another type such as `SQL92`.
        sub_version: Carried into the result.

    Returns:
        The subscription, with tag codes computed by Java's `String.hashCode`.

    Raises:
        SubscriptionParseError: a TAG expression with no tag at all between its separators
            (`||`), or an empty expression of a non-TAG type; answer SUBSCRIPTION_PARSE_FAILED.
            Also an SQL92 expression that does not parse (the message says where).
        UnsupportedExpressionTypeError: a type other than TAG and SQL92; answer SYSTEM_ERROR
            with the error text as remark.
    """
    if not is_tag_type(expression_type):
        assert expression_type is not None
        if not expression:
            raise SubscriptionParseError(f"the {expression_type} expression is empty")
        if expression_type.upper() != EXPRESSION_TYPE_SQL92:
            raise UnsupportedExpressionTypeError(expression_type)
        try:
            compiled = compile_filter(expression)
        except PropertyFilterError as exc:
            raise SubscriptionParseError(f"bad SQL92 expression {expression!r}: {exc}") from None
        return SubscriptionData(
            topic,
            expression,
            expression_type=EXPRESSION_TYPE_SQL92,
            sub_version=sub_version,
            property_filter=compiled,
        )
    if not expression or expression == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, sub_version=sub_version)
    pieces = expression.split(TAG_SEPARATOR)
    # Java's String.split drops trailing empty strings; nothing left means a split error.
    while pieces and not pieces[-1]:
        pieces.pop()
    if not pieces:
        raise SubscriptionParseError(f"the subscription {expression!r} has no tag")
    tags = frozenset(tag for tag in (piece.strip(_JAVA_TRIM_CHARS) for piece in pieces) if tag)
    return SubscriptionData(
        topic,
        expression,
        tags,
        frozenset(tags_code(tag) for tag in tags),
        EXPRESSION_TYPE_TAG,
        sub_version,
    )
