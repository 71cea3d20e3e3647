"""Delay levels, the schedule redirect and the send-back decision (pure parts)."""

from __future__ import annotations

import pytest

from pocketmq.broker.schedule import (
    DELAY_LEVELS_DEFAULT,
    SCHEDULE_TOPIC,
    DelayLevelError,
    parse_delay_levels,
    redirect_delayed,
)
from pocketmq.broker.send_back import decide_send_back
from pocketmq.common.properties import decode_properties, encode_properties
from pocketmq.store.api import MessageToStore


def test_default_levels_are_rocketmqs_eighteen() -> None:
    levels = parse_delay_levels(DELAY_LEVELS_DEFAULT)
    assert len(levels) == 18
    assert levels[:4] == [1000, 5000, 10_000, 30_000]
    assert levels[-1] == 7_200_000
    assert parse_delay_levels("250ms 1d") == [250, 86_400_000]


@pytest.mark.parametrize("text", ["", "5", "1x", "1s two"])
def test_bad_levels_say_which_item(text: str) -> None:
    with pytest.raises(DelayLevelError):
        parse_delay_levels(text)


def test_a_delayed_message_is_stored_in_the_schedule_topic_with_its_real_place() -> None:
    message = MessageToStore(
        "Orders", b"x", encode_properties({"DELAY": "30", "KEYS": "k"}), queue_id=3
    )
    redirected = redirect_delayed(message, 18)
    assert (redirected.topic, redirected.queue_id) == (SCHEDULE_TOPIC, 17)  # clamped to 18
    properties = decode_properties(redirected.properties)
    assert properties["REAL_TOPIC"] == "Orders"
    assert properties["REAL_QID"] == "3"
    assert properties["KEYS"] == "k"
    plain = MessageToStore("Orders", b"x", encode_properties({"KEYS": "k"}))
    assert redirect_delayed(plain, 18) is plain


@pytest.mark.parametrize(
    ("reconsume", "level", "maximum", "topic", "delay", "times"),
    [
        (0, 0, 16, "%RETRY%g", 3, 1),  # first retry: level 3
        (2, 0, 16, "%RETRY%g", 5, 3),  # grows with each try
        (1, 7, 16, "%RETRY%g", 7, 2),  # the consumer may choose the level
        (16, 0, 16, "%DLQ%g", 0, 17),  # tries used up
        (0, -1, 16, "%DLQ%g", 0, 1),  # the consumer asks for the DLQ
    ],
)
def test_send_back_goes_to_retry_with_growing_delays_then_to_the_dlq(
    reconsume: int, level: int, maximum: int, topic: str, delay: int, times: int
) -> None:
    decision = decide_send_back("g", reconsume, level, maximum)
    assert (decision.topic, decision.delay_level, decision.reconsume_times) == (
        topic,
        delay,
        times,
    )
