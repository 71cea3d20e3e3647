"""Subscription expressions as RocketMQ's FilterAPI parses them (wire reference section 6.6)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.codes import ResponseCode
from pocketmq.common.java_hash import tags_code
from pocketmq.common.subscription import (
    SUB_ALL,
    SubscriptionParseError,
    UnsupportedExpressionTypeError,
    is_tag_type,
    parse_subscription,
)


@pytest.mark.parametrize("expression", [None, "", "*"])
def test_star_empty_and_absent_expressions_take_every_message(expression: str | None) -> None:
    data = parse_subscription("T", expression)
    assert data.takes_all
    assert data.sub_string == SUB_ALL
    assert data.tag_codes is None
    assert data.matches_tags_code(12345)
    assert data.tags_set == frozenset()


def test_tags_are_split_on_double_bar_and_trimmed() -> None:
    data = parse_subscription("T", " TagA ||TagB||  TagC\t")
    assert data.tags_set == {"TagA", "TagB", "TagC"}
    assert data.code_set == {tags_code("TagA"), tags_code("TagB"), tags_code("TagC")}
    assert data.tag_codes == data.code_set
    assert not data.takes_all
    assert data.sub_string == " TagA ||TagB||  TagC\t"


def test_tag_codes_are_java_string_hash_codes() -> None:
    """Wire reference 6.6: "TagA".hashCode() = 2598919."""
    assert parse_subscription("T", "TagA").code_set == {2598919}


def test_matches_only_codes_of_subscribed_tags() -> None:
    data = parse_subscription("T", "TagA || TagB")
    assert data.matches_tags_code(tags_code("TagA"))
    assert not data.matches_tags_code(tags_code("TagC"))
    assert not data.matches_tags_code(0)  # untagged messages do not match a tag list


def test_empty_pieces_are_dropped() -> None:
    assert parse_subscription("T", "TagA||").tags_set == {"TagA"}
    assert parse_subscription("T", "||TagA|| ||").tags_set == {"TagA"}


def test_expression_of_only_separators_fails_as_java_split_does() -> None:
    with pytest.raises(SubscriptionParseError) as raised:
        parse_subscription("T", "||||")
    assert raised.value.response_code is ResponseCode.SUBSCRIPTION_PARSE_FAILED


def test_blank_tags_between_separators_match_nothing() -> None:
    data = parse_subscription("T", " || ")
    assert data.tags_set == frozenset()
    assert data.tag_codes == frozenset()


def test_single_bar_is_part_of_a_tag() -> None:
    assert parse_subscription("T", "a|b").tags_set == {"a|b"}


def test_trim_follows_java_not_unicode_whitespace() -> None:
    # Java's trim removes control characters but keeps a no-break space.
    assert parse_subscription("T", "\x01TagA\x1f").tags_set == {"TagA"}
    assert parse_subscription("T", "\u00a0TagA").tags_set == {"\u00a0TagA"}


@pytest.mark.parametrize("expression_type", [None, "", "TAG"])
def test_tag_expression_types(expression_type: str | None) -> None:
    assert is_tag_type(expression_type)
    assert parse_subscription("T", "TagA", expression_type).tags_set == {"TagA"}


def test_sql92_subscriptions_carry_a_compiled_filter_and_no_tag_codes() -> None:
    subscription = parse_subscription("T", "a > 1 AND region = 'eu'", "SQL92")
    assert subscription.tag_codes is None
    assert subscription.property_filter is not None
    assert subscription.property_filter.matches({"a": "2", "region": "eu"})
    assert not subscription.property_filter.matches({"a": "2"})


def test_a_bad_sql92_expression_says_where() -> None:
    with pytest.raises(SubscriptionParseError, match="position 4"):
        parse_subscription("T", "a > ", "SQL92")


def test_other_expression_types_are_not_supported_and_say_so() -> None:
    with pytest.raises(UnsupportedExpressionTypeError) as raised:
        parse_subscription("T", "com.example.Filter", "CLASS")
    error = raised.value
    assert error.response_code is ResponseCode.SYSTEM_ERROR
    assert str(error) == "The broker does not support consumer to filter message by CLASS"


def test_empty_sql92_expression_is_a_parse_failure() -> None:
    with pytest.raises(SubscriptionParseError):
        parse_subscription("T", "", "SQL92")


def test_sub_version_and_topic_are_kept() -> None:
    data = parse_subscription("Topic", "*", sub_version=42)
    assert (data.topic, data.sub_version, data.expression_type) == ("Topic", 42, "TAG")


_tag = st.text(
    alphabet=st.characters(blacklist_characters="|", min_codepoint=0x21, max_codepoint=0x2FF),
    min_size=1,
    max_size=12,
)


@given(st.lists(_tag, min_size=1, max_size=6))
def test_joined_tags_parse_back_to_their_set(tags: list[str]) -> None:
    expression = " || ".join(tags)
    if expression == SUB_ALL:
        return
    data = parse_subscription("T", expression)
    assert data.tags_set == frozenset(tags)
    assert data.code_set == frozenset(tags_code(tag) for tag in tags)
