"""The connector's record decoders against the general one: same values for every record layout
(IPv4 and IPv6 hosts, long topics, compressed bodies, no UNIQ_KEY), only the range asked for, and
a clear error for bytes that are not a record. Both decoders are held to it: the interpreted one
and the compiled kernel's (run interpreted too, where the build did not compile it)."""

from __future__ import annotations

import zlib
from functools import partial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from pocketmq.client.message import MessageQueue  # noqa: E402
from pocketmq.common.constants import COMPRESSED_FLAG  # noqa: E402
from pocketmq.common.properties import encode_properties  # noqa: E402
from pocketmq.common.stored_message import (  # noqa: E402
    MessageDecodeError,
    decode_records,
    encode_record,
    pack_host,
)
from pocketmq.spark import records_kernel  # noqa: E402
from pocketmq.spark.records import (  # noqa: E402
    DECODERS,
    Decoder,
    decode_with_kernel,
    to_record_batch,
)
from pocketmq.spark.records_kernel import Columns  # noqa: E402
from tests.unit.common.kernel_source import interpreted  # noqa: E402

QUEUE = MessageQueue("Orders", "broker-a", 3)
# The decoders in use, and the kernel's source interpreted (the same as "kernel" where the build
# did not compile it).
ALL_DECODERS: dict[str, Decoder] = {
    **DECODERS,
    "kernel source": partial(decode_with_kernel, usual=interpreted(records_kernel).decode_usual),
}
V4 = pack_host(("10.1.2.3", 10911))
V6 = pack_host(("fe80::1", 10911))

texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02"),
    min_size=1,
    max_size=12,
)
records = st.fixed_dictionaries(
    {
        "body": st.binary(max_size=300),
        "user": st.dictionaries(
            st.from_regex(r"user[a-z]{1,4}", fullmatch=True), texts, max_size=3
        ),
        "keys": st.none() | texts,
        "tags": st.none() | texts,
        "unique": st.none() | st.text("0123456789ABCDEF", min_size=32, max_size=32),
        "born_v6": st.booleans(),
        "store_v6": st.booleans(),
        "compressed": st.booleans(),
        "long_topic": st.booleans(),
        "reconsumes": st.integers(0, 16),
    }
)


def encode(offset: int, spec: dict) -> bytes:  # type: ignore[type-arg]
    system = {"KEYS": spec["keys"], "TAGS": spec["tags"], "UNIQ_KEY": spec["unique"]}
    properties = {**spec["user"], **{k: v for k, v in system.items() if v is not None}}
    body = zlib.compress(spec["body"]) if spec["compressed"] else spec["body"]
    return encode_record(
        topic=(QUEUE.topic * (40 if spec["long_topic"] else 1)).encode(),
        body=body,
        properties=encode_properties(properties).encode(),
        queue_id=QUEUE.queue_id,
        queue_offset=offset,
        physical_offset=1000 + offset * 500,
        sys_flag=COMPRESSED_FLAG if spec["compressed"] else 0,
        born_timestamp=1_700_000_000_000 + offset,
        born_host=V6 if spec["born_v6"] else V4,
        store_timestamp=1_700_000_000_500 + offset,
        store_host=V6 if spec["store_v6"] else V4,
        reconsume_times=spec["reconsumes"],
    )


@pytest.mark.parametrize("decoder", ALL_DECODERS.values(), ids=ALL_DECODERS.keys())
@settings(max_examples=100, deadline=None)
@given(
    specs=st.lists(records, min_size=1, max_size=12),
    low=st.integers(0, 12),
    high=st.integers(0, 12),
)
def test_columns_match_the_general_decoder(
    decoder: Decoder,
    specs: list[dict],  # type: ignore[type-arg]
    low: int,
    high: int,
) -> None:
    start, end = 100 + min(low, high), 100 + max(low, high)
    encoded = [encode(100 + n, spec) for n, spec in enumerate(specs)]
    pulls = [b"".join(encoded[:5]), b"".join(encoded[5:])]
    batch = to_record_batch([p for p in pulls if p], QUEUE, start, end, decoder=decoder)
    expected = [m for m in decode_records(b"".join(encoded)) if start <= m.queue_offset < end]
    rows = batch.to_pylist()
    assert [r["queueOffset"] for r in rows] == [m.queue_offset for m in expected]
    for row, message in zip(rows, expected, strict=True):
        spec = specs[message.queue_offset - 100]
        assert row["body"] == spec["body"]
        assert (row["keys"], row["tags"]) == (spec["keys"], spec["tags"])
        assert dict(row["properties"]) == spec["user"]
        assert (row["topic"], row["brokerName"], row["queueId"]) == ("Orders", "broker-a", 3)
        assert row["bornTimestamp"].timestamp() * 1000 == message.born_timestamp
        assert row["storeTimestamp"].timestamp() * 1000 == message.store_timestamp
        assert row["reconsumeTimes"] == spec["reconsumes"]
        if spec["unique"]:
            assert row["msgId"] == spec["unique"]
        elif not spec["store_v6"]:  # RocketMQ's offset id: store host, port, CommitLog offset
            assert row["msgId"] == f"0A010203{10911:08X}{message.physical_offset:016X}"


@pytest.mark.parametrize("decoder", ALL_DECODERS.values(), ids=ALL_DECODERS.keys())
def test_a_record_cut_short_is_refused_with_its_position(decoder: Decoder) -> None:
    whole = encode(7, {**_plain(), "body": b"x" * 100})
    with pytest.raises(MessageDecodeError, match="truncated"):
        to_record_batch([whole[:-10]], QUEUE, 0, 100, decoder=decoder)
    with pytest.raises(MessageDecodeError):
        to_record_batch([b"\x00" * 200], QUEUE, 0, 100, decoder=decoder)
    with pytest.raises(MessageDecodeError, match="truncated"):  # only part of the fixed fields
        to_record_batch([whole, whole[:50]], QUEUE, 0, 100, decoder=decoder)


@pytest.mark.parametrize("decoder", ALL_DECODERS.values(), ids=ALL_DECODERS.keys())
@pytest.mark.parametrize("size", [0, -1, 87])
def test_a_total_size_below_the_fixed_part_is_refused(decoder: Decoder, size: int) -> None:
    """Outside the range asked for too: such a record would otherwise be skipped by a step of
    its TOTALSIZE, which for 0 never moves on."""
    record = bytearray(encode(7, _plain()))
    record[0:4] = size.to_bytes(4, "big", signed=True)
    for start, end in ((0, 100), (50, 60)):
        with pytest.raises(MessageDecodeError):
            to_record_batch([bytes(record)], QUEUE, start, end, decoder=decoder)


@pytest.mark.parametrize("decoder", ALL_DECODERS.values(), ids=ALL_DECODERS.keys())
def test_properties_that_are_not_utf8_are_refused(decoder: Decoder) -> None:
    record = bytearray(encode(0, {**_plain(), "tags": "TagA"}))
    record[-3] = 0xFF  # inside "TagA", the last property
    with pytest.raises(MessageDecodeError, match="not UTF-8"):
        to_record_batch([bytes(record)], QUEUE, 0, 1, decoder=decoder)


@pytest.mark.parametrize("decoder", ALL_DECODERS.values(), ids=ALL_DECODERS.keys())
def test_an_lz4_body_is_refused_with_what_to_do(decoder: Decoder) -> None:
    record = bytearray(encode(0, {**_plain(), "compressed": True}))
    record[36:40] = (COMPRESSED_FLAG | 0x100).to_bytes(4, "big")  # SYSFLAG: LZ4
    with pytest.raises(MessageDecodeError, match=r"LZ4.*zlib"):
        to_record_batch([bytes(record)], QUEUE, 0, 1, decoder=decoder)


def _plain() -> dict:  # type: ignore[type-arg]
    return {
        "body": b"hello",
        "user": {},
        "keys": None,
        "tags": None,
        "unique": None,
        "born_v6": False,
        "store_v6": False,
        "compressed": False,
        "long_topic": False,
        "reconsumes": 0,
    }


@pytest.mark.parametrize("decoder", ALL_DECODERS.values(), ids=ALL_DECODERS.keys())
@settings(max_examples=50, deadline=None)
@given(specs=st.lists(records, min_size=1, max_size=8))
def test_columns_without_properties_skip_only_those(
    decoder: Decoder,
    specs: list[dict],  # type: ignore[type-arg]
) -> None:
    """A read of no column from the properties does not split them, and fills the rest as a
    read of every column does."""
    pulls = [b"".join(encode(100 + n, spec) for n, spec in enumerate(specs))]
    whole, some = Columns(), Columns(with_properties=False)
    decoder(whole, pulls[0], 100, 100 + len(specs))
    decoder(some, pulls[0], 100, 100 + len(specs))
    for name in ("bodies", "offsets", "born", "stored", "reconsumes"):
        assert getattr(some, name) == getattr(whole, name)
    assert (some.keys, some.tags, some.ids, some.map_keys) == ([], [], [], [])
    assert len(whole.ids) == len(specs)
