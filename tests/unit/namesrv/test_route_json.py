"""NameServer JSON bodies: both route styles, tolerant reading, registration bodies.

Golden strings follow rocketmq-wire.md §3.6 and the compatibility checklist (§11 item 4): a
route request with `version < 401` gets bare numeric `brokerAddrs` keys, `>= 401` quoted ones.
"""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.common import route_json
from pocketmq.common.data_version import DataVersion
from pocketmq.common.fastjson import parse_fastjson, quote_numeric_keys
from pocketmq.common.route import (
    BrokerData,
    BrokerTopicConfig,
    ClusterInfo,
    QueueData,
    TopicList,
    TopicRouteData,
)
from pocketmq.common.route_json import (
    RegisterBrokerBody,
    RouteBodyError,
    decode_cluster_info,
    decode_data_version,
    decode_kv_table,
    decode_register_broker_body,
    decode_topic_list,
    decode_topic_route,
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_register_broker_body,
    encode_topic_list,
    encode_topic_route,
    register_body_crc32,
    wants_standard_json,
)


def sample_route() -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[
            BrokerData("DefaultCluster", "broker-a", {1: "10.0.0.2:10911", 0: "10.0.0.1:10911"})
        ],
    )


GOLDEN_FASTJSON = (
    '{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
    '"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],'
    '"filterServerTable":{},'
    '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    '"writeQueueNums":4}]}'
)
GOLDEN_STANDARD = GOLDEN_FASTJSON.replace("{0:", '{"0":').replace(",1:", ',"1":')


def test_route_for_version_317_has_unquoted_broker_id_keys() -> None:
    assert not wants_standard_json(317)
    body = encode_topic_route(sample_route(), standard_json=wants_standard_json(317))
    assert body.decode() == GOLDEN_FASTJSON


def test_route_for_version_479_is_standard_json() -> None:
    assert wants_standard_json(479)
    body = encode_topic_route(sample_route(), standard_json=wants_standard_json(479))
    assert body.decode() == GOLDEN_STANDARD
    assert json.loads(body)["brokerDatas"][0]["brokerAddrs"] == {
        "0": "10.0.0.1:10911",
        "1": "10.0.0.2:10911",
    }


@pytest.mark.parametrize(
    ("version", "accept_standard_only", "standard"),
    [
        (63, False, False),
        (333, False, False),
        (400, False, False),
        (401, False, True),
        (63, True, True),
    ],
)
def test_route_style_follows_version_and_accept_standard_json_only(
    version: int, accept_standard_only: bool, standard: bool
) -> None:
    assert wants_standard_json(version, accept_standard_only) is standard


def test_route_lists_are_sorted_and_optional_fields_written_when_set() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("b", 1, 1, 6), QueueData("a", 2, 2, 4, 1)],
        broker_datas=[BrokerData("C", "b", {0: "x:1"}), BrokerData("C", "a", {0: "y:1"}, "z1")],
        filter_server_table={"y:1": ["f:1"]},
        order_topic_conf="a:2;b:1",
    )
    text = encode_topic_route(route, standard_json=True).decode()
    document = json.loads(text)
    assert list(document) == ["brokerDatas", "filterServerTable", "orderTopicConf", "queueDatas"]
    assert [b["brokerName"] for b in document["brokerDatas"]] == ["a", "b"]
    assert document["brokerDatas"][0]["zoneName"] == "z1"
    assert "zoneName" not in document["brokerDatas"][1]
    assert [q["brokerName"] for q in document["queueDatas"]] == ["a", "b"]
    assert document["filterServerTable"] == {"y:1": ["f:1"]}


def test_standard_style_escapes_non_ascii_and_fastjson_style_does_not() -> None:
    route = TopicRouteData(
        queue_datas=[QueueData("brokér", 1, 1, 6)],
        broker_datas=[BrokerData("C", "brokér", {0: "x:1"})],
    )
    assert b'"brok\\u00e9r"' in encode_topic_route(route, standard_json=True)
    assert '"brokér"'.encode() in encode_topic_route(route, standard_json=False)


def test_quoting_numeric_keys_leaves_strings_and_standard_json_alone() -> None:
    assert quote_numeric_keys('{0:"a", 1 :"b",\n-2: "c"}') == '{"0":"a", "1" :"b",\n"-2": "c"}'
    tricky = '{"k":"{0:\\"x\\",1:2}","n":[1,2,{3:4}]}'
    assert quote_numeric_keys(tricky) == '{"k":"{0:\\"x\\",1:2}","n":[1,2,{"3":4}]}'
    assert quote_numeric_keys(GOLDEN_STANDARD) == GOLDEN_STANDARD
    assert parse_fastjson(GOLDEN_FASTJSON) == json.loads(GOLDEN_STANDARD)


def test_decoding_reads_both_styles_to_the_same_route() -> None:
    expected = sample_route()
    expected.broker_datas[0].broker_addrs = {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert decode_topic_route(GOLDEN_FASTJSON.encode()) == expected
    assert decode_topic_route(GOLDEN_STANDARD.encode()) == expected


def test_decoding_a_4x_route_reads_topic_syn_flag_and_missing_fields() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"h:1"},"brokerName":"b"}],'
        b'"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":1,"topicSynFlag":3,'
        b'"writeQueueNums":1}]}'
    )
    route = decode_topic_route(body)
    assert route.queue_datas == [QueueData("b", 1, 1, 6, 3)]
    assert route.broker_datas == [BrokerData("", "b", {0: "h:1"})]
    assert route.filter_server_table == {}
    assert route.order_topic_conf is None


names = st.text(alphabet="abcXYZ09-_%|é", min_size=1, max_size=8)
queue_datas = st.builds(
    QueueData,
    broker_name=names,
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 7),
    topic_sys_flag=st.integers(0, 3),
)
broker_datas = st.builds(
    BrokerData,
    cluster=names,
    broker_name=names,
    broker_addrs=st.dictionaries(st.integers(0, 10**12), names, max_size=4),
    zone_name=st.none() | names,
    enable_acting_master=st.booleans(),
)
routes = st.builds(
    TopicRouteData,
    queue_datas=st.lists(queue_datas, max_size=4, unique_by=lambda q: q.broker_name),
    broker_datas=st.lists(broker_datas, max_size=4, unique_by=lambda b: b.broker_name),
    filter_server_table=st.dictionaries(names, st.lists(names, max_size=2), max_size=2),
    order_topic_conf=st.none() | names,
)


@given(route=routes, standard=st.booleans())
def test_route_round_trips_through_either_style(route: TopicRouteData, standard: bool) -> None:
    decoded = decode_topic_route(encode_topic_route(route, standard_json=standard))
    route.queue_datas.sort(key=lambda q: q.broker_name)
    route.broker_datas.sort(key=lambda b: b.broker_name)
    assert decoded == route


@given(route=routes)
def test_tolerant_parser_agrees_with_the_standard_one(route: TopicRouteData) -> None:
    fastjson = encode_topic_route(route, standard_json=False)
    standard = encode_topic_route(route, standard_json=True)
    assert parse_fastjson(fastjson) == json.loads(standard)


def test_cluster_info_is_fastjson_style_and_round_trips() -> None:
    info = ClusterInfo(
        broker_addr_table={"broker-a": BrokerData("C", "broker-a", {0: "h:1", 1: "h:2"})},
        cluster_addr_table={"C": {"broker-b", "broker-a"}},
    )
    body = encode_cluster_info(info)
    assert body.decode() == (
        '{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"h:1",1:"h:2"},"brokerName":"broker-a",'
        '"cluster":"C","enableActingMaster":false}},"clusterAddrTable":{"C":["broker-a","broker-b"]}}'
    )
    assert decode_cluster_info(body) == info
    assert decode_cluster_info(encode_cluster_info(info, standard_json=True)) == info


def test_topic_list_with_and_without_broker_addr() -> None:
    assert encode_topic_list(TopicList(["A", "B"])) == b'{"topicList":["A","B"]}'
    with_addr = TopicList(["C"], "h:1")
    assert encode_topic_list(with_addr) == b'{"brokerAddr":"h:1","topicList":["C"]}'
    assert decode_topic_list(encode_topic_list(with_addr)) == with_addr
    assert decode_topic_list(b"{}") == TopicList()


def test_data_version_and_kv_table_bodies() -> None:
    version = DataVersion(5, 1, 1_700_000_000_000)
    body = encode_data_version(version)
    assert body == b'{"counter":5,"stateVersion":1,"timestamp":1700000000000}'
    assert decode_data_version(body) == version
    assert decode_data_version(b"") == DataVersion()
    table = {"TopicB": "broker-a:4", "TopicA": "broker-b:8"}
    assert encode_kv_table(table) == b'{"table":{"TopicA":"broker-b:8","TopicB":"broker-a:4"}}'
    assert decode_kv_table(encode_kv_table(table)) == table


JAVA_REGISTER_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{'
    b'"dataVersion":{"counter":5,"stateVersion":0,"timestamp":1700000000000},'
    b'"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000000},'
    b'"topicConfigTable":{"TopicA":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"TopicA","topicSysFlag":0,"writeQueueNums":4},'
    b'"TBW102":{"order":true,"perm":7,"readQueueNums":8,"topicFilterType":"MULTI_TAG",'
    b'"topicName":"TBW102","topicSysFlag":1,"writeQueueNums":8}},'
    b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{0:{}}}}'
)


def test_register_body_from_a_java_broker() -> None:
    body = decode_register_broker_body(JAVA_REGISTER_BODY, compressed=False)
    assert body.data_version == DataVersion(5, 0, 1_700_000_000_000)
    assert body.filter_server_list == []
    assert body.topic_configs == {
        "TopicA": BrokerTopicConfig("TopicA", 4, 4, 6),
        "TBW102": BrokerTopicConfig("TBW102", 8, 8, 7, 1, "MULTI_TAG", order=True),
    }


def test_register_body_of_a_pre_3_0_11_broker_is_a_bare_wrapper() -> None:
    wrapper = json.loads(JAVA_REGISTER_BODY.replace(b"{0:{}}", b"{}"))[
        "topicConfigSerializeWrapper"
    ]
    body = decode_register_broker_body(json.dumps(wrapper).encode(), compressed=False)
    assert body.filter_server_list is None  # leaves the filter server table alone
    assert set(body.topic_configs) == {"TopicA", "TBW102"}


def test_empty_register_body_is_version_zero_without_topics() -> None:
    assert decode_register_broker_body(b"", compressed=True) == RegisterBrokerBody()


def sample_register_body() -> RegisterBrokerBody:
    return RegisterBrokerBody(
        data_version=DataVersion(7, 2, 1_700_000_000_000),
        topic_configs={
            "TopicA": BrokerTopicConfig("TopicA", 4, 4, 6, attributes={"+message.type": "FIFO"}),
            "TopicB": BrokerTopicConfig("TopicB", 2, 1, 4, 0, "MULTI_TAG"),
        },
        filter_server_list=["10.0.0.5:3000"],
    )


def test_register_body_round_trips_as_json() -> None:
    body = sample_register_body()
    encoded = encode_register_broker_body(body)
    assert json.loads(encoded)["topicConfigSerializeWrapper"]["topicQueueMappingInfoMap"] == {}
    assert decode_register_broker_body(encoded, compressed=False) == body


@pytest.mark.parametrize("flag", [True, False])
def test_compressed_register_body_round_trips_with_or_without_the_header_flag(flag: bool) -> None:
    """develop brokers compress but send `compressed=false`: the zlib header is sniffed."""
    body = sample_register_body()
    encoded = encode_register_broker_body(body, compress=True)
    assert encoded[:2] == b"\x78\xda"  # Deflater.BEST_COMPRESSION
    assert decode_register_broker_body(encoded, compressed=flag) == body


def java_compressed(topic_lines: list[bytes], *, mappings: list[bytes] | None) -> bytes:
    """The layout of `RegisterBrokerBody.encode(true)`, built by hand."""

    def block(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    raw = block(b'{"counter":3,"stateVersion":0,"timestamp":9}')
    raw += struct.pack(">i", len(topic_lines)) + b"".join(block(t) for t in topic_lines)
    raw += block(b'["fs:1"]')
    if mappings is not None:
        raw += struct.pack(">i", len(mappings)) + b"".join(block(m) for m in mappings)
    return zlib.compress(raw, 9)


def test_compressed_body_of_4x_and_5x_brokers() -> None:
    old = java_compressed([b"TopicA 4 4 6 SINGLE_TAG"], mappings=None)  # 4.x: 5 fields, no maps
    new = java_compressed(
        [b'TopicA 4 4 6 SINGLE_TAG {"+message.type":"NORMAL"}'],
        mappings=[b'{"bname":"broker-a","topic":"S","totalQueues":1}'],
    )
    old_body = decode_register_broker_body(old, compressed=True)
    assert old_body.data_version == DataVersion(3, 0, 9)
    assert old_body.topic_configs == {"TopicA": BrokerTopicConfig("TopicA", 4, 4, 6)}
    assert old_body.filter_server_list == ["fs:1"]
    new_body = decode_register_broker_body(new, compressed=True)
    assert new_body.topic_configs["TopicA"].attributes == {"+message.type": "NORMAL"}


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "registerBrokerBody is not a JSON object"),
        (b'{"topicConfigSerializeWrapper":[]}', "topicConfigSerializeWrapper"),
        (b'{"topicConfigTable":{"T":{"perm":"rw"}}}', "perm"),
        (b'{"topicConfigTable":{"T":{"order":1}}}', "order"),
        (b'{"dataVersion":{"counter":1.5}}', "counter"),
        (b'{"topicConfigSerializeWrapper":{},"filterServerList":[1]}', "filterServerList"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_malformed_json_register_bodies_say_where(body: bytes, where: str) -> None:
    with pytest.raises(RouteBodyError, match=where):
        decode_register_broker_body(body, compressed=False)


def test_malformed_compressed_register_bodies_are_refused() -> None:
    good = java_compressed([b"TopicA 4 4 6 SINGLE_TAG"], mappings=[])
    with pytest.raises(RouteBodyError, match="does not inflate"):
        decode_register_broker_body(b"\x78\x9c garbage", compressed=True)
    truncated = zlib.compress(zlib.decompress(good)[:-6], 9)
    with pytest.raises(RouteBodyError, match="filter server list"):
        decode_register_broker_body(truncated, compressed=True)
    with pytest.raises(RouteBodyError, match="fewer than 5 fields"):
        decode_register_broker_body(java_compressed([b"TopicA 4 4"], mappings=[]), compressed=True)
    with pytest.raises(RouteBodyError, match="readQueueNums"):
        decode_register_broker_body(
            java_compressed([b"TopicA x 4 6 SINGLE_TAG"], mappings=[]), compressed=True
        )
    huge_count = zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 10**6), 9)
    with pytest.raises(RouteBodyError, match="topic count"):
        decode_register_broker_body(huge_count, compressed=True)


def test_compressed_register_body_that_inflates_too_far_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(route_json, "REGISTER_BODY_INFLATED_BYTES_MAX", 1000)
    bomb = zlib.compress(b"\0" * 10_000, 9)
    with pytest.raises(RouteBodyError, match="inflates past 1000 bytes"):
        decode_register_broker_body(bomb, compressed=True)


def test_malformed_routes_and_lists_are_refused() -> None:
    with pytest.raises(RouteBodyError, match="brokerAddrs key"):
        decode_topic_route(b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"m":"h"}}]}')
    with pytest.raises(RouteBodyError, match="queueDatas is not a JSON array"):
        decode_topic_route(b'{"queueDatas":{}}')
    with pytest.raises(RouteBodyError, match="brokerName"):
        decode_topic_route(b'{"queueDatas":[{"perm":6}]}')
    with pytest.raises(RouteBodyError, match="topicList"):
        decode_topic_list(b'{"topicList":"A"}')
    with pytest.raises(RouteBodyError, match="table"):
        decode_kv_table(b'{"table":{"k":1}}')


def test_body_crc32_matches_java_utilall() -> None:
    assert register_body_crc32(b"123456789") == 0xCBF43926 & 0x7FFFFFFF
    assert register_body_crc32(JAVA_REGISTER_BODY) == zlib.crc32(JAVA_REGISTER_BODY) & 0x7FFFFFFF
