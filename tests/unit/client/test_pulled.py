"""Pull bodies decoded for consumers (`decode_pulled`) read as the general decoder reads them."""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.client.message import MessageExt, MessageQueue
from pocketmq.client.pulled import decode_pulled
from pocketmq.common.constants import COMPRESSED_FLAG
from pocketmq.common.properties import LazyProperties, encode_properties
from pocketmq.common.stored_message import (
    MessageDecodeError,
    decode_record,
    encode_record,
    pack_host,
)

QUEUE = MessageQueue("T", "broker-a", 1)
V4 = ("10.0.0.7", 5555)
V6 = ("::1", 10911)


def record(
    *,
    topic: str = "T",
    body: bytes = b"hello",
    properties: dict[str, str] | None = None,
    queue_id: int = 1,
    queue_offset: int = 0,
    sys_flag: int = 0,
    born_host: tuple[str, int] = V4,
    store_host: tuple[str, int] = ("127.0.0.1", 10911),
) -> bytes:
    text = encode_properties(properties if properties is not None else {"TAGS": "a"})
    return encode_record(
        topic=topic.encode(),
        body=body,
        properties=text.encode(),
        queue_id=queue_id,
        queue_offset=queue_offset,
        physical_offset=1000 + queue_offset,
        sys_flag=sys_flag,
        born_timestamp=1_700_000_000_000 + queue_offset,
        born_host=pack_host(born_host),
        store_timestamp=1_700_000_000_500,
        store_host=pack_host(store_host),
        reconsume_times=queue_offset % 3,
    )


def general(body: bytes, queue: MessageQueue = QUEUE) -> list[MessageExt]:
    messages, pos = [], 0
    while pos < len(body):
        stored = decode_record(body, pos, check_crc=False)
        messages.append(MessageExt.from_stored(stored, queue.broker_name, pulled_from=queue))
        pos += stored.store_size
    return messages


texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x01\x02"),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["T", "U", "%RETRY%g", "话题"]),
            st.binary(max_size=64),
            st.dictionaries(texts, texts, max_size=4),
            st.sampled_from([V4, V6]),
            st.integers(0, 3),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_every_record_reads_as_the_general_decoder_reads_it(
    records: list[tuple[str, bytes, dict[str, str], tuple[str, int], int]],
) -> None:
    body = b"".join(
        record(topic=topic, body=data, properties=props, born_host=host, queue_id=queue_id)
        for topic, data, props, host, queue_id in records
    )
    assert decode_pulled(body, QUEUE) == general(body)


def test_a_redelivered_message_shows_its_original_topic() -> None:
    body = record(topic="%RETRY%g", properties={"RETRY_TOPIC": "T", "TAGS": "a"})
    (message,) = decode_pulled(body, MessageQueue("%RETRY%g", "broker-a", 1))
    assert message.topic == "T"
    assert message.queue.topic == "%RETRY%g"


def test_a_compressed_body_is_inflated_and_a_bad_one_refused() -> None:
    (message,) = decode_pulled(
        record(body=zlib.compress(b"x" * 100), sys_flag=COMPRESSED_FLAG), QUEUE
    )
    assert message.body == b"x" * 100
    with pytest.raises(zlib.error):
        decode_pulled(record(body=b"not zlib", sys_flag=COMPRESSED_FLAG), QUEUE)


def test_a_torn_record_or_text_that_is_not_utf8_is_refused() -> None:
    whole = record() + record(queue_offset=1)
    with pytest.raises(MessageDecodeError):
        decode_pulled(whole[:-3], QUEUE)
    bad_topic = record(topic="T").replace(b"\x01T", b"\x01\xff", 1)
    with pytest.raises(MessageDecodeError):
        decode_pulled(bad_topic, QUEUE)


def test_lazy_properties_read_as_a_dict() -> None:
    properties = LazyProperties("TAGS\x01a\x02KEYS\x01k1 k2\x02x\x02")
    assert properties == {"TAGS": "a", "KEYS": "k1 k2"}
    assert {"TAGS": "a", "KEYS": "k1 k2"} == properties  # noqa: SIM300 (a dict on the left)
    assert properties.get("TAGS") == "a"
    assert properties.get("nope") is None
    assert "KEYS" in properties
    assert len(properties) == 2
    assert dict(properties) == {"TAGS": "a", "KEYS": "k1 k2"}
    assert sorted(properties) == ["KEYS", "TAGS"]
