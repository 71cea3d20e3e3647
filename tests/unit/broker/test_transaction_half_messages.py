"""Half messages as values: the conversions and the check-back's decisions (RocketMQ's
`TransactionalMessageBridge`, `EndTransactionProcessor.endMessageTransaction`,
`TransactionalMessageServiceImpl.check`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pocketmq.broker.transaction.half_messages import (
    CHECK_MAX_TIME_TOPIC,
    HALF_TOPIC,
    OP_TOPIC,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    CheckSettings,
    HalfMessageError,
    HalfVerdict,
    OpLedger,
    check_request,
    checked_properties,
    discarded,
    end_message,
    immune_properties,
    immunity_ms,
    is_transaction_send,
    judge_half,
    op_message,
    parse_op_offsets,
    renewed_half,
    to_half,
)
from pocketmq.common.constants import (
    COMPRESSED_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_TYPE_MASK,
)
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.common.stored_message import StoredMessage, decode_record
from pocketmq.store.api import MessageToStore

NOW = 1_700_000_000_000
SETTINGS = CheckSettings(interval_ms=1000, timeout_ms=6000, check_max=3)
UNIQ = "0A000001000012340000AAAA00000001"


def sent(**properties: str) -> MessageToStore:
    """A transactional send as the send path builds it."""
    props = {"TAGS": "TagA", "UNIQ_KEY": UNIQ, "TRAN_MSG": "true", "PGROUP": "tx-group"}
    props.update(properties)
    return MessageToStore(
        topic="Orders",
        body=b"order-1",
        properties=encode_properties(props),
        queue_id=3,
        flag=7,
        sys_flag=COMPRESSED_FLAG | TRANSACTION_PREPARED_TYPE,
        born_timestamp=NOW - 10_000,
        born_host=("10.0.0.7", 52000),
        reconsume_times=0,
    )


def stored_half(
    *,
    queue_offset: int = 5,
    physical_offset: int = 4096,
    born_ms: int = NOW - 10_000,
    stored_ms: int = NOW - 9_000,
    **properties: str,
) -> StoredMessage:
    """A half as read back from RMQ_SYS_TRANS_HALF_TOPIC."""
    half = to_half(sent())
    props = decode_properties(half.properties)
    props.update(properties)
    return StoredMessage(
        topic=half.topic,
        body=half.body,
        queue_id=half.queue_id,
        flag=half.flag,
        queue_offset=queue_offset,
        physical_offset=physical_offset,
        sys_flag=half.sys_flag,
        born_timestamp=born_ms,
        born_host=half.born_host,
        store_timestamp=stored_ms,
        store_host=("192.168.0.10", 10911),
        properties=props,
    )


@pytest.mark.parametrize(
    ("properties", "reconsume_times", "expected"),
    [
        ({"TRAN_MSG": "true"}, 0, True),
        ({"TRAN_MSG": "TRUE"}, 0, True),  # Boolean.parseBoolean ignores case
        ({"TRAN_MSG": "false"}, 0, False),
        ({"TRAN_MSG": "1"}, 0, False),
        ({}, 0, False),
        # A retry of a client before 4.6.1 still carries TRAN_MSG: not a half.
        ({"TRAN_MSG": "true", "DELAY": "3"}, 2, False),
        ({"TRAN_MSG": "true", "DELAY": "3"}, 0, True),
    ],
)
def test_a_send_is_a_half_when_tran_msg_says_true_and_it_is_no_old_style_retry(
    properties: dict[str, str], reconsume_times: int, expected: bool
) -> None:
    assert is_transaction_send(encode_properties(properties), reconsume_times) is expected


def test_a_half_goes_to_queue_0_of_the_half_topic_remembering_where_it_was_sent() -> None:
    half = to_half(sent(DELAY="2"))
    properties = decode_properties(half.properties)
    assert (half.topic, half.queue_id) == (HALF_TOPIC, 0)
    assert properties["REAL_TOPIC"] == "Orders"
    assert properties["REAL_QID"] == "3"
    assert properties["__transactionId__"] == UNIQ
    assert properties["DELAY"] == "2"  # the commit is delayed, not the half (put path)
    assert half.sys_flag & TRANSACTION_TYPE_MASK == 0
    assert half.sys_flag & COMPRESSED_FLAG
    assert (half.body, half.flag, half.born_timestamp) == (b"order-1", 7, NOW - 10_000)


def test_a_commit_stores_the_half_in_its_real_topic_as_a_commit_record() -> None:
    half = stored_half(TRANSACTION_CHECK_TIMES="2")
    message = end_message(half)
    properties = decode_properties(message.properties)
    assert (message.topic, message.queue_id) == ("Orders", 3)
    assert message.sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_COMMIT_TYPE
    assert message.sys_flag & COMPRESSED_FLAG
    assert message.prepared_transaction_offset == half.physical_offset
    assert (message.body, message.flag, message.born_host) == (b"order-1", 7, half.born_host)
    assert not {"REAL_TOPIC", "REAL_QID", "TRAN_MSG"} & set(properties)
    assert properties["PGROUP"] == "tx-group"
    assert properties["UNIQ_KEY"] == UNIQ
    assert properties["TAGS"] == "TagA"


def test_only_a_half_with_a_real_destination_can_be_committed() -> None:
    with pytest.raises(HalfMessageError, match="is in Orders"):
        end_message(replace(stored_half(), topic="Orders"))
    half = stored_half()
    del half.properties["REAL_QID"]
    with pytest.raises(HalfMessageError, match="REAL_QID"):
        end_message(half)
    with pytest.raises(HalfMessageError, match="REAL_TOPIC"):
        end_message(replace(stored_half(), properties={"REAL_QID": "1"}))


def test_an_op_record_names_the_half_queue_offset_under_tag_d() -> None:
    op = op_message(0, 42, ("192.168.0.10", 10911), NOW)
    assert (op.topic, op.queue_id, op.body) == (OP_TOPIC, 0, b"42,")
    assert decode_properties(op.properties)["TAGS"] == "d"
    assert parse_op_offsets(op.body) == [42]


@pytest.mark.parametrize(
    ("body", "offsets"),
    [
        (b"7", [7]),  # RocketMQ 4.x wrote the bare offset
        (b"1,2,3,", [1, 2, 3]),  # 5.x batches several
        (b"1,x,3", [1, 3]),
        (b"", []),
        (b"\xff", []),
    ],
)
def test_op_bodies_of_either_rocketmq_generation_parse(body: bytes, offsets: list[int]) -> None:
    assert parse_op_offsets(body) == offsets


@pytest.mark.parametrize(
    ("half", "verdict"),
    [
        (stored_half(born_ms=NOW - 1_000), HalfVerdict.WAIT),  # younger than the timeout
        (stored_half(born_ms=NOW - 6_000), HalfVerdict.WAIT),  # exactly the timeout
        (stored_half(born_ms=NOW - 6_001), HalfVerdict.CHECK),
        (stored_half(stored_ms=NOW), HalfVerdict.WAIT),  # stored during this pass
        (stored_half(born_ms=NOW + 60_000), HalfVerdict.CHECK),  # producer clock ahead
        (stored_half(TRANSACTION_CHECK_TIMES="2"), HalfVerdict.CHECK),
        # A copy stored by a check 6 s ago: its producer may still be answering.
        (stored_half(TRANSACTION_CHECK_TIMES="1", stored_ms=NOW - 6_000), HalfVerdict.WAIT),
        (stored_half(TRANSACTION_CHECK_TIMES="1", stored_ms=NOW - 6_001), HalfVerdict.CHECK),
        (stored_half(TRANSACTION_CHECK_TIMES="3"), HalfVerdict.DISCARD),
        # The last check is answered (or not) before the half is given up on.
        (stored_half(TRANSACTION_CHECK_TIMES="3", stored_ms=NOW - 1_000), HalfVerdict.WAIT),
        (stored_half(born_ms=NOW - 73 * 3_600_000), HalfVerdict.DISCARD),  # past retention
    ],
)
def test_the_check_back_judges_an_open_half_by_age_and_check_count(
    half: StoredMessage, verdict: HalfVerdict
) -> None:
    judged = judge_half(
        half, now_ms=NOW, pass_started_ms=NOW, settings=SETTINGS, resolved=frozenset()
    )
    assert judged is verdict


def test_a_half_inside_its_own_immunity_moves_forward_until_resolved_or_due() -> None:
    def judge(half: StoredMessage, resolved: frozenset[int] = frozenset()) -> HalfVerdict:
        return judge_half(
            half, now_ms=NOW, pass_started_ms=NOW, settings=SETTINGS, resolved=resolved
        )

    first = stored_half(queue_offset=5, CHECK_IMMUNITY_TIME_IN_SECONDS="60")
    assert judge(first) is HalfVerdict.MOVE_ON_IMMUNE
    copy_properties = immune_properties(first)
    assert copy_properties[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] == "5"
    copy = replace(first, queue_offset=9, properties=copy_properties)
    # A further copy keeps the first offset, which END_TRANSACTION named.
    assert immune_properties(copy)[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] == "5"
    assert judge(copy) is HalfVerdict.MOVE_ON_IMMUNE
    assert judge(copy, frozenset({5})) is HalfVerdict.RESOLVED
    due = replace(copy, born_timestamp=NOW - 61_000)
    assert judge(due) is HalfVerdict.CHECK


def test_an_immunity_shorter_than_the_timeout_or_unreadable_counts_as_the_timeout() -> None:
    assert immunity_ms("60", 6000) == 60_000
    assert immunity_ms("1", 6000) == 6000
    assert immunity_ms("soon", 6000) == 6000


def test_each_check_counts_one_more_on_the_copy() -> None:
    assert checked_properties(stored_half())["TRANSACTION_CHECK_TIMES"] == "1"
    once = stored_half(TRANSACTION_CHECK_TIMES="1")
    assert checked_properties(once)["TRANSACTION_CHECK_TIMES"] == "2"
    copy = renewed_half(once, checked_properties(once))
    assert (copy.topic, copy.queue_id, copy.body, copy.flag) == (HALF_TOPIC, 0, b"order-1", 7)
    assert copy.born_timestamp == once.born_timestamp
    assert decode_properties(copy.properties)["REAL_TOPIC"] == "Orders"


def test_a_discarded_half_keeps_its_message_in_the_check_max_time_topic() -> None:
    gone = discarded(stored_half(TRANSACTION_CHECK_TIMES="15"))
    assert (gone.topic, gone.queue_id, gone.body) == (CHECK_MAX_TIME_TOPIC, 0, b"order-1")
    assert decode_properties(gone.properties)["TRANSACTION_CHECK_TIMES"] == "15"


def test_the_op_offset_moves_over_leading_done_records_only() -> None:
    ledger = OpLedger(half_offset=10, op_offset=100)
    ledger.add(100, "d", b"4,")  # names a half before the pass: done at once
    ledger.add(101, "d", b"12,")
    ledger.add(102, "x", b"13,")  # a foreign tag: done, ignored
    ledger.add(103, "d", b"11,")
    assert ledger.next_op_offset() == 101
    assert ledger.take(10) is False
    assert ledger.take(11) is True
    assert ledger.next_op_offset() == 101  # 101 still waits for half 12
    assert ledger.take(12) is True
    assert ledger.take(12) is False
    assert ledger.next_op_offset() == 104
    # Forwarded copies look their first offset up, even one before the pass.
    assert 4 in ledger
    assert 12 in ledger
    assert 13 not in ledger


def test_a_check_request_names_the_half_and_carries_the_message_in_its_real_topic() -> None:
    half = stored_half(queue_offset=8, physical_offset=8192)
    fields, body = check_request(half, "broker-a")
    assert fields["topic"] == HALF_TOPIC
    assert fields["tranStateTableOffset"] == "8"
    assert fields["commitLogOffset"] == "8192"
    assert fields["msgId"] == fields["transactionId"] == UNIQ
    assert fields["bname"] == "broker-a"
    assert len(fields["offsetMsgId"]) == 32
    decoded = decode_record(body)
    assert (decoded.topic, decoded.queue_id) == ("Orders", 3)
    assert (decoded.queue_offset, decoded.physical_offset) == (8, 8192)
    assert decoded.body == b"order-1"
    assert decoded.properties["PGROUP"] == "tx-group"
