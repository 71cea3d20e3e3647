"""The connector's options (`pocketmq.spark.options`) as Spark hands them over: keys lower-cased,
values strings. A bad value fails at planning time with an `OptionError` that names the option."""

from __future__ import annotations

import pytest

from pocketmq.spark.offsets import OptionError, StartSpec
from pocketmq.spark.options import Connection, ReadOptions, WriteOptions

NAMESRV = "127.0.0.1:9876;127.0.0.2:9876"


def spark_options(**options: str) -> dict[str, str]:
    """What Spark passes to a data source: every key lower-cased, every value a string."""
    return {key.lower(): value for key, value in options.items()}


def test_read_options_take_lower_cased_keys_as_spark_passes_them() -> None:
    parsed = ReadOptions.parse(
        spark_options(
            namesrv=NAMESRV,
            topic=" orders , payments ,",
            startingOffsets="earliest",
            maxMessagesPerTrigger="250",
            maxRecordsPerPartition="1000",
            failOnDataLoss="FALSE",
            consumerGroup="billing",
        ),
        streaming=True,
    )
    assert parsed == ReadOptions(
        connection=Connection(NAMESRV),
        topics=["orders", "payments"],
        topic_pattern=None,
        starting=StartSpec("earliest"),
        ending=StartSpec("latest"),
        max_messages_per_trigger=250,
        max_records_per_partition=1000,
        fail_on_data_loss=False,
        consumer_group="billing",
    )


def test_read_options_defaults_differ_for_batch_and_stream() -> None:
    base = spark_options(namesrv=NAMESRV, topicPattern="orders-.*")
    stream = ReadOptions.parse(base, streaming=True)
    batch = ReadOptions.parse(base, streaming=False)
    assert stream.starting == StartSpec("latest")
    assert batch.starting == StartSpec("earliest")
    assert batch.ending == StartSpec("latest")
    assert stream.topic_pattern == "orders-.*"
    assert stream.topics == []
    assert stream.max_messages_per_trigger is None
    assert stream.max_records_per_partition == 100_000
    assert stream.fail_on_data_loss is True
    assert stream.consumer_group is None


def test_kafkas_rate_limit_name_works_and_ours_wins() -> None:
    kafka = spark_options(namesrv=NAMESRV, topic="t", maxOffsetsPerTrigger="500")
    assert ReadOptions.parse(kafka, streaming=True).max_messages_per_trigger == 500
    both = {**kafka, "maxmessagespertrigger": "20"}
    assert ReadOptions.parse(both, streaming=True).max_messages_per_trigger == 20


def test_blank_values_count_as_absent() -> None:
    parsed = ReadOptions.parse(
        spark_options(namesrv=NAMESRV, topic="t", consumerGroup="  ", maxMessagesPerTrigger=" "),
        streaming=True,
    )
    assert parsed.consumer_group is None
    assert parsed.max_messages_per_trigger is None


@pytest.mark.parametrize(
    ("options", "streaming", "says"),
    [
        ({"topic": "t"}, True, "namesrv: required"),
        ({"namesrv": NAMESRV}, True, "exactly one of topic"),
        ({"namesrv": NAMESRV, "topic": " , "}, True, "exactly one of topic"),
        ({"namesrv": NAMESRV, "topic": "t", "topicPattern": "t.*"}, True, "exactly one of topic"),
        ({"namesrv": NAMESRV, "topicPattern": "orders-(["}, True, "topicPattern: 'orders-(['"),
        ({"namesrv": NAMESRV, "topic": "t", "endingOffsets": "latest"}, True, "endingOffsets:"),
        ({"namesrv": NAMESRV, "topic": "t", "startingOffsets": "{bad"}, True, "startingOffsets:"),
        ({"namesrv": NAMESRV, "topic": "t", "endingOffsets": "soon"}, False, "endingOffsets:"),
        ({"namesrv": NAMESRV, "topic": "t", "maxMessagesPerTrigger": "1e3"}, True,
         "maxMessagesPerTrigger: '1e3' is not a whole number"),
        ({"namesrv": NAMESRV, "topic": "t", "maxMessagesPerTrigger": "0"}, True,
         "maxMessagesPerTrigger: must be positive"),
        ({"namesrv": NAMESRV, "topic": "t", "maxRecordsPerPartition": "-5"}, False,
         "maxRecordsPerPartition: must be positive"),
        ({"namesrv": NAMESRV, "topic": "t", "failOnDataLoss": "yes"}, True,
         "failOnDataLoss: 'yes' is not true or false"),
    ],
)  # fmt: skip
def test_bad_read_options_raise_an_option_error_naming_the_option(
    options: dict[str, str], streaming: bool, says: str
) -> None:
    with pytest.raises(OptionError) as caught:
        ReadOptions.parse(spark_options(**options), streaming=streaming)
    assert says in str(caught.value)


def test_endingoffsets_is_fine_for_a_batch_read() -> None:
    parsed = ReadOptions.parse(
        spark_options(namesrv=NAMESRV, topic="t", endingOffsets='{"t": {"broker-a:0": 10}}'),
        streaming=False,
    )
    assert parsed.ending == StartSpec("json", per_queue={"t/broker-a/0": 10})


def test_write_options_derive_a_stable_sink_id_from_the_checkpoint() -> None:
    options = spark_options(namesrv=NAMESRV, topic="out", checkpointLocation="/tmp/cp")
    first = WriteOptions.parse(options, streaming=True)
    again = WriteOptions.parse(dict(options), streaming=True)
    elsewhere = WriteOptions.parse({**options, "checkpointlocation": "/tmp/other"}, streaming=True)
    assert first.sink_id == again.sink_id
    assert first.sink_id != elsewhere.sink_id
    assert first.sink_id is not None
    assert len(first.sink_id) == 16
    assert first.batch_rows == 256


def test_write_options_take_an_explicit_sink_id_and_batch_size() -> None:
    parsed = WriteOptions.parse(
        spark_options(namesrv=NAMESRV, topic="out", sinkId="orders_sink-1", batchSize="64"),
        streaming=True,
    )
    assert (parsed.sink_id, parsed.batch_rows, parsed.topic) == ("orders_sink-1", 64, "out")


def test_a_batch_write_needs_neither_topic_nor_sink_id() -> None:
    parsed = WriteOptions.parse(spark_options(namesrv=NAMESRV), streaming=False)
    assert (parsed.topic, parsed.sink_id) == (None, None)


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"namesrv": NAMESRV, "sinkId": "s"}, "needs a topic option and a stable sinkId"),
        ({"namesrv": NAMESRV, "topic": "out"}, "needs a topic option and a stable sinkId"),
        ({"namesrv": NAMESRV, "topic": "out", "sinkId": "a b"}, "sinkId: 'a b' may hold"),
        ({"namesrv": NAMESRV, "topic": "out", "sinkId": "s", "batchSize": "x"}, "batchSize:"),
        ({"topic": "out", "sinkId": "s"}, "namesrv: required"),
    ],
)
def test_bad_write_options_raise_an_option_error_naming_the_option(
    options: dict[str, str], says: str
) -> None:
    with pytest.raises(OptionError) as caught:
        WriteOptions.parse(spark_options(**options), streaming=True)
    assert says in str(caught.value)


def test_an_acl_account_and_tls_are_connection_options() -> None:
    parsed = WriteOptions.parse(
        spark_options(namesrv=NAMESRV, accessKey="sparkAK", secretKey="spark-secret", tls="true"),
        streaming=False,
    )
    assert parsed.connection == Connection(NAMESRV, "sparkAK", "spark-secret", tls=True)
    assert "spark-secret" not in repr(parsed)
    with pytest.raises(OptionError, match="accessKey and secretKey: give both"):
        WriteOptions.parse(spark_options(namesrv=NAMESRV, accessKey="sparkAK"), streaming=False)
