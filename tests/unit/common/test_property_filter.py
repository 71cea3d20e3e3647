"""SQL92 property filters: RocketMQ's operators, three-valued logic and clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.property_filter import PropertyFilterError, compile_filter

PROPERTIES = {"a": "10", "b": "2.5", "region": "eu", "TAGS": "TagA", "quote": "it's", "flag": "x"}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("a > 5", True),
        ("a = 10", True),
        ("a <> 10", False),
        ("a != 9", True),
        ("a >= 10 AND a <= 10", True),
        ("b < 3", True),
        ("b > 2.4 AND b < 2.6", True),
        ("a BETWEEN 1 AND 9", False),
        ("a NOT BETWEEN 1 AND 9", True),
        ("region = 'eu'", True),
        ("region IN ('us', 'eu')", True),
        ("region NOT IN ('us', 'eu')", False),
        ("missing IS NULL", True),
        ("region IS NOT NULL", True),
        ("missing = 1", False),
        ("NOT missing = 1", False),  # unknown stays unknown
        ("missing = 1 OR a = 10", True),
        ("missing = 1 AND a = 10", False),
        ("quote = 'it''s'", True),
        ("TAGS = 'TagA'", True),
        ("region CONTAINS 'u'", True),
        ("region STARTSWITH 'e' AND region ENDSWITH 'u'", True),
        ("region NOT CONTAINS 'x'", True),
        ("a > 5 OR a < 0 AND region = 'us'", True),  # AND binds tighter than OR
        ("(a > 5 OR a < 0) AND region = 'us'", False),
        ("NOT (a > 5)", False),
        ("flag > 1", False),  # not a number: unknown
        ("TRUE", True),
        ("and_more = 1 or A > 5", False),  # names are case-sensitive, keywords are not
        ("a > 5 and REGION = 'eu'", False),
    ],
)
def test_evaluation(expression: str, expected: bool) -> None:
    assert compile_filter(expression).matches(PROPERTIES) is expected


@pytest.mark.parametrize(
    ("expression", "where"),
    [
        ("a >", "position 3"),
        ("a = = 1", "position 4"),
        ("region IN ('eu'", "position 15"),
        ("a ~ 1", "position 2"),
        ("a BETWEEN 1", "AND in BETWEEN"),
        ("a IS 1", "NULL after IS"),
        ("a > 1 b", "AND, OR or the end"),
        ("   ", "empty"),
    ],
)
def test_bad_expressions_say_where(expression: str, where: str) -> None:
    with pytest.raises(PropertyFilterError, match=where):
        compile_filter(expression)


_literal = st.one_of(st.integers(-5, 20).map(str), st.sampled_from(["'eu'", "'x''y'", "2.5"]))
_operand = st.one_of(
    st.sampled_from(["a", "b", "region", "missing", "TAGS", "TRUE", "NULL"]), _literal
)


@st.composite
def _expression(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.booleans()):
        left, right = draw(_operand), draw(_operand)
        op = draw(st.sampled_from(["=", "<>", ">", ">=", "<", "<="]))
        return draw(
            st.sampled_from(
                [
                    f"{left} {op} {right}",
                    f"{left} IS NULL",
                    f"{left} IN ({draw(_literal)}, 'eu')",
                    f"{left} BETWEEN 0 AND {right}",
                ]
            )
        )
    left = draw(_expression(depth - 1))
    right = draw(_expression(depth - 1))
    return draw(st.sampled_from([f"({left}) AND ({right})", f"{left} OR {right}", f"NOT ({left})"]))


@given(_expression())
def test_well_formed_expressions_parse_and_evaluate_to_a_boolean(expression: str) -> None:
    assert compile_filter(expression).matches(PROPERTIES) in (True, False)


@given(st.text(max_size=30))
def test_any_text_either_compiles_or_raises_the_filter_error(text: str) -> None:
    try:
        compiled = compile_filter(text)
    except PropertyFilterError:
        return
    assert compiled.matches(PROPERTIES) in (True, False)
