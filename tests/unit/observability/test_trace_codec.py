"""Message-trace text codec, trace-message keys and mqadmin's queryMsgTraceById view.

Literal records follow Apache RocketMQ `client/.../trace/TraceDataEncoder.java` (develop
branch line numbers given per test); `A` is U+0001 and `F` is U+0002.
"""

from __future__ import annotations

from datetime import UTC

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pocketmq.observability.trace import (
    AccessChannel,
    LocalTransactionState,
    MessageType,
    TraceBean,
    TraceContext,
    TraceDecodeError,
    TraceEncodeError,
    TraceType,
    decode,
    encode,
    java_hash_order,
    trace_keys,
    trace_message_keys,
)
from pocketmq.observability.trace_view import TraceMessage, format_trace_view

A = "\u0001"
F = "\u0002"

texts = st.text(
    alphabet=st.characters(blacklist_characters=[A, F], blacklist_categories=["Cs"]), max_size=12
)
nonempty = texts.filter(bool)
longs = st.integers(-(1 << 63), (1 << 63) - 1)
ints = st.integers(-(1 << 31), (1 << 31) - 1)


@given(
    ts=longs,
    region=texts,
    group=texts,
    topic=texts,
    msg_id=texts,
    tags=texts,
    keys=texts,
    store=texts,
    body=ints,
    cost=ints,
    mtype=st.sampled_from(MessageType),
    offset_id=texts,
    ok=st.booleans(),
)
def test_pub_round_trips(
    ts, region, group, topic, msg_id, tags, keys, store, body, cost, mtype, offset_id, ok
) -> None:
    bean = TraceBean(
        topic=topic,
        msg_id=msg_id,
        tags=tags,
        keys=keys,
        store_host=store,
        body_length=body,
        msg_type=mtype,
        offset_msg_id=offset_id,
    )
    ctx = TraceContext(TraceType.PUB, ts, region, group, cost, ok, beans=(bean,))
    assert decode(encode([ctx])) == [ctx]


@given(
    ts=longs,
    region=texts,
    group=texts,
    request_id=texts,
    beans=st.lists(st.tuples(texts, ints, texts), min_size=1, max_size=4),
)
def test_sub_before_round_trips_one_context_per_bean(ts, region, group, request_id, beans) -> None:
    made = tuple(TraceBean(msg_id=m, retry_times=r, keys=k) for m, r, k in beans)
    ctx = TraceContext(TraceType.SUB_BEFORE, ts, region, group, request_id=request_id, beans=made)
    expected = [
        TraceContext(TraceType.SUB_BEFORE, ts, region, group, request_id=request_id, beans=(b,))
        for b in made
    ]
    assert decode(encode([ctx])) == expected


@given(
    ts=longs,
    group=nonempty,
    request_id=texts,
    cost=ints,
    ok=st.booleans(),
    code=ints,
    msg_id=texts,
    keys=texts,
)
def test_sub_after_round_trips(ts, group, request_id, cost, ok, code, msg_id, keys) -> None:
    bean = TraceBean(msg_id=msg_id, keys=keys)
    ctx = TraceContext(
        TraceType.SUB_AFTER,
        ts,
        group_name=group,
        cost_time_ms=cost,
        success=ok,
        request_id=request_id,
        context_code=code,
        beans=(bean,),
    )
    assert decode(encode([ctx])) == [ctx]


@given(
    ts=longs,
    region=texts,
    group=texts,
    topic=texts,
    msg_id=texts,
    tags=texts,
    keys=texts,
    store=texts,
    tx_id=texts,
    state=st.sampled_from(LocalTransactionState),
    check=st.booleans(),
)
def test_end_transaction_round_trips(
    ts, region, group, topic, msg_id, tags, keys, store, tx_id, state, check
) -> None:
    bean = TraceBean(
        topic=topic,
        msg_id=msg_id,
        tags=tags,
        keys=keys,
        store_host=store,
        msg_type=MessageType.TRANS_COMMIT,
        transaction_id=tx_id,
        transaction_state=state,
        from_transaction_check=check,
    )
    ctx = TraceContext(TraceType.END_TRANSACTION, ts, region, group, beans=(bean,))
    assert decode(encode([ctx])) == [ctx]


@given(ts=longs, region=texts, group=texts, topic=texts, msg_id=texts, ok=st.booleans())
def test_recall_round_trips(ts, region, group, topic, msg_id, ok) -> None:
    bean = TraceBean(topic=topic, msg_id=msg_id)
    ctx = TraceContext(TraceType.RECALL, ts, region, group, success=ok, beans=(bean,))
    assert decode(encode([ctx])) == [ctx]


def test_pub_encodes_fourteen_fields_in_java_order() -> None:
    # TraceDataEncoder.java:170-183: type ts region group topic msgId tags keys storeHost
    # bodyLength costTime msgType.ordinal offsetMsgId success, then FIELD_SPLITOR.
    bean = TraceBean(
        topic="T",
        msg_id="M1",
        tags=None,
        keys="k1 k2",
        store_host="10.0.0.1:10911",
        body_length=11,
        msg_type=MessageType.NORMAL,
        offset_msg_id="OFF",
    )
    ctx = TraceContext(TraceType.PUB, 1700000000000, "DefaultRegion", "PG", 3, True, beans=(bean,))
    expected = A.join(
        [
            "Pub", "1700000000000", "DefaultRegion", "PG", "T", "M1", "null", "k1 k2",
            "10.0.0.1:10911", "11", "3", "0", "OFF", "true",
        ]
    ) + F  # fmt: skip
    assert encode([ctx]) == expected


def test_decode_accepts_old_pub_layouts() -> None:
    # TraceDataEncoder.java:63-75: 13 fields = no offsetMsgId; 15 fields = 4.8.0's clientHost.
    head = ["Pub", "5", "R", "PG", "T", "M", "", "", "S", "1", "2", "1"]
    [old] = decode(A.join([*head, "false"]) + F)
    assert old.success is False
    assert old.beans[0].offset_msg_id == ""
    assert old.beans[0].msg_type is MessageType.TRANS_HALF
    [v48] = decode(A.join([*head, "OFF", "TRUE", "10.1.1.1"]) + F)
    assert (v48.beans[0].offset_msg_id, v48.success, v48.beans[0].client_host) == (
        "OFF",
        True,
        "10.1.1.1",
    )


def test_sub_after_layouts_local_cloud_and_old() -> None:
    # TraceDataEncoder.java:201-212 (encode; CLOUD stops after contextCode + CONTENT_SPLITOR),
    # :95-113 (decode: >=7 fields read contextCode, >=9 fields read timeStamp and groupName).
    bean = TraceBean(msg_id="M", keys="K")
    local = TraceContext(
        TraceType.SUB_AFTER, 9, group_name="CG", cost_time_ms=4, request_id="RQ", beans=(bean,)
    )
    assert encode([local]) == A.join(["SubAfter", "RQ", "M", "4", "true", "K", "0", "9", "CG"]) + F
    cloud = TraceContext(
        TraceType.SUB_AFTER,
        9,
        group_name="CG",
        cost_time_ms=4,
        request_id="RQ",
        access_channel=AccessChannel.CLOUD,
        beans=(bean,),
    )
    assert encode([cloud]) == A.join(["SubAfter", "RQ", "M", "4", "true", "K", "0"]) + A + F
    [decoded] = decode(encode([cloud]), now_ms=777)
    assert (decoded.timestamp_ms, decoded.group_name, decoded.context_code) == (777, "", 0)
    # 4.7-era record without contextCode (6 fields).
    [old] = decode(A.join(["SubAfter", "RQ", "M", "4", "false", "K"]) + F, now_ms=1)
    assert (old.success, old.context_code, old.timestamp_ms) == (False, 0, 1)


def test_sub_before_decodes_and_ignores_old_client_host() -> None:
    # TraceDataEncoder.java:188-195 (8 fields); 4.8.0 appended clientHost as a ninth.
    text = A.join(["SubBefore", "7", "R", "CG", "RQ", "M", "2", "K", "1.2.3.4"]) + F
    [ctx] = decode(text)
    assert ctx.request_id == "RQ"
    assert ctx.beans[0] == TraceBean(msg_id="M", retry_times=2, keys="K")


def test_end_transaction_literal() -> None:
    # TraceDataEncoder.java:218-230: ... storeHost msgType.ordinal txId txState.name fromCheck.
    text = (
        A.join(
            [
                "EndTransaction",
                "8",
                "R",
                "PG",
                "T",
                "M",
                "tg",
                "k",
                "S",
                "2",
                "TX",
                "UNKNOW",
                "true",
            ]
        )
        + F
    )
    [ctx] = decode(text)
    bean = ctx.beans[0]
    assert bean.transaction_state is LocalTransactionState.UNKNOW
    assert bean.from_transaction_check is True
    assert encode([ctx]) == text


def test_batch_and_unknown_types() -> None:
    # AsyncTraceDispatcher.flushData appends records back to back; unknown types are skipped.
    text = A.join(["Recall", "1", "R", "G", "T", "M", "true"]) + F + "Bogus" + A + "x" + F
    assert [c.trace_type for c in decode(text)] == [TraceType.RECALL]
    assert decode("") == []


@pytest.mark.parametrize(
    "text",
    [
        A.join(["Pub", "x", "R"]) + F,
        A.join(["Pub", "1", "R", "G", "T", "M", "", "", "S", "1", "2", "9", "O", "true"]) + F,
        A.join(["SubBefore", "1", "R", "G", "RQ", "M", "1_0", "K"]) + F,
        A.join(["EndTransaction", "1", "R", "G", "T", "M", "", "", "S", "2", "X", "MAYBE"]) + F,
    ],
)
def test_bad_records_raise_decode_error(text) -> None:
    with pytest.raises(TraceDecodeError):
        decode(text)


def test_encode_rejects_separators_and_missing_beans() -> None:
    with pytest.raises(TraceEncodeError):
        encode([TraceContext(TraceType.PUB, beans=(TraceBean(keys="a" + A),))])
    with pytest.raises(TraceEncodeError):
        encode([TraceContext(TraceType.RECALL)])


def test_trace_keys_are_msg_id_then_split_keys() -> None:
    # TraceDataEncoder.java:247-254: msgId, then keys split on " " (Java split semantics).
    assert trace_keys(TraceBean(msg_id="M", keys="a b")) == ["M", "a", "b"]
    assert trace_keys(TraceBean(msg_id="M", keys="a  b ")) == ["M", "a", "", "b"]
    assert trace_keys(TraceBean(msg_id="M", keys=None)) == ["M"]
    assert trace_keys(TraceBean(msg_id="M", keys="")) == ["M"]


def test_trace_message_keys_follow_java_hash_set_order() -> None:
    # Java: "b".hashCode()=98 -> bucket 2, "a"=97 -> bucket 1; new HashSet(["b","a"]) iterates a, b.
    assert java_hash_order(["b", "a", "b"]) == ["a", "b"]
    ctx = TraceContext(TraceType.PUB, beans=(TraceBean(msg_id="b", keys="a"),))
    assert trace_message_keys([ctx]) == "a b"


@given(st.lists(st.text(max_size=6), max_size=80))
def test_java_hash_order_is_a_permutation_of_distinct_keys(keys) -> None:
    ordered = java_hash_order(keys)
    assert sorted(ordered) == sorted(set(keys))


def test_view_for_pub_sub_before_and_sub_after() -> None:
    # QueryMsgTraceByIdSubCommand.printMessageTrace: "%-10s %-20s %-20s %-20s %-10s %-10s%n";
    # only Pub and SubAfter print; ClientHost is the trace message's born host.
    msg_id = "7F0000010001"
    pub = TraceContext(
        TraceType.PUB,
        1700000000123,
        "DefaultRegion",
        "PG",
        12,
        True,
        beans=(TraceBean(topic="T", msg_id=msg_id),),
    )
    before = TraceContext(
        TraceType.SUB_BEFORE, 1700000001000, group_name="CG", beans=(TraceBean(msg_id=msg_id),)
    )
    after = TraceContext(
        TraceType.SUB_AFTER,
        1700000002000,
        group_name="CG",
        cost_time_ms=5,
        success=False,
        beans=(TraceBean(msg_id=msg_id),),
    )
    other = TraceContext(TraceType.PUB, 1, beans=(TraceBean(msg_id="OTHER"),))
    messages = [
        TraceMessage("10.0.0.5", tuple(decode(encode([pub, other])))),
        TraceMessage("10.0.0.6", tuple(decode(encode([before, after])))),
    ]
    expected = (
        "#Type      #ProducerGroup       #ClientHost         "
        " #SendTime            #CostTimes #Status   \n"
        "Pub        PG                   10.0.0.5            "
        " 2023-11-14 22:13:20  12ms       success   \n"
        "\n"
        "#Type      #ConsumerGroup       #ClientHost         "
        " #ConsumerTime        #CostTimes #Status   \n"
        "Sub        CG                   10.0.0.6            "
        " 2023-11-14 22:13:22  5ms        failed    \n"
        "\n"
    )  # fmt: skip
    assert format_trace_view(messages, msg_id, tz=UTC) == expected
