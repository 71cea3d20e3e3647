"""fastjson's two departures from JSON: bare numeric keys and objects in key position."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common.fastjson import (
    DEPTH_MAX,
    FastjsonError,
    dumps,
    freeze_key,
    parse_fastjson,
    parse_fastjson_any_keys,
)


def test_dumps_writes_bare_integer_keys_first_unless_standard() -> None:
    node = {"b": {2: "x", 1: "y"}, "a": [True, None, "é"]}
    assert dumps(node, standard_json=False) == '{"a":[true,null,"é"],"b":{1:"y",2:"x"}}'.encode()
    assert dumps(node, standard_json=True) == b'{"a":[true,null,"\\u00e9"],"b":{"1":"y","2":"x"}}'


def test_parse_fastjson_reads_bare_keys_as_strings_and_refuses_garbage() -> None:
    assert parse_fastjson(b'{"m":{0:"a",-1:"b"}}') == {"m": {"0": "a", "-1": "b"}}
    with pytest.raises(FastjsonError, match="not JSON"):
        parse_fastjson(b"\xff")
    with pytest.raises(FastjsonError, match="not JSON"):
        parse_fastjson("{0:}")


def test_object_keys_become_sorted_item_tuples() -> None:
    body = '{"offsetTable":{{"topic":"T","queueId":1,"brokerName":"b"}:{"maxOffset":3}},"tps":0.5}'
    document = parse_fastjson_any_keys(body.encode())
    key = (("brokerName", "b"), ("queueId", 1), ("topic", "T"))
    assert document == {"offsetTable": {key: {"maxOffset": 3}}, "tps": 0.5}
    assert freeze_key({"topic": "T", "queueId": 1, "brokerName": "b"}) == key
    assert parse_fastjson_any_keys("{[1,2]:0, 7: 8}") == {(1, 2): 0, 7: 8}


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("", "unexpected end"),
        ('{"a":1', "expected"),
        ('{"a":1} x', "extra data"),
        ("{'a':1}", "unexpected"),
        ("[" * (DEPTH_MAX + 2), "nested deeper"),
    ],
)
def test_any_key_reader_says_where_a_body_breaks(text: str, where: str) -> None:
    with pytest.raises(FastjsonError, match=where):
        parse_fastjson_any_keys(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_standard_json_reads_the_same_with_either_reader(value: object) -> None:
    text = json.dumps(value)
    assert parse_fastjson(text) == value
    assert parse_fastjson_any_keys(text) == value


@pytest.mark.parametrize(
    "text",
    ['{"s":"\\ud800"}', '{"n":NaN,"i":-Infinity}', '{"f":1e400,"g":0.1}', '{"a":1,"a":2}',
     '{"long":[9223372036854775807,-9223372036854775808]}'],
)  # fmt: skip
def test_what_orjson_refuses_or_reads_otherwise_reads_as_the_json_module_does(text: str) -> None:
    assert repr(parse_fastjson(text)) == repr(json.loads(text))
    assert repr(parse_fastjson(text.encode())) == repr(json.loads(text))


def test_integers_beyond_javas_long_read_as_floats() -> None:
    """orjson's one departure from the json module on standard JSON; no RocketMQ body holds
    such a number (Java writes longs), and the route decoders refuse a float where they want
    an integer."""
    assert parse_fastjson("[18446744073709551616]") == [float(2**64)]


def test_nesting_too_deep_for_either_reader_is_refused() -> None:
    with pytest.raises(FastjsonError, match="not JSON"):
        parse_fastjson("[" * 100_000 + "]" * 100_000)
